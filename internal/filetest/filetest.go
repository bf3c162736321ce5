// Package filetest writes the files a test reads (a clients file, a key
// file) into a directory of the test's own.
package filetest

import (
	"crypto/sha256"
	"encoding/hex"
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

// SHA256Hex returns the hex SHA-256 of s: a clients file's secret_sha256
// of the secret s, or, its first 12 digits, the version of the file s.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
