// Package filetest writes the files a test reads (a clients file, a key
// file) into a directory of the test's own.
package filetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes data to name in a temporary directory of tb and returns its
// path.
func Write(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
