package clients

import (
	"os"
	"path/filepath"
	"testing"
)

// ByID is the client id, or nil: for the tests.
func (cs *Registry) ByID(id string) *Client { return cs.byID[id] }

// WriteFile writes data to name in a temporary directory and returns its path.
func WriteFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
