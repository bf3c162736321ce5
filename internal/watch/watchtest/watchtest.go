// Package watchtest changes files the way deployments do, for the tests of
// package watch and of the issuer's reloads.
package watchtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KubeletWrite updates file in a mounted volume's dir as the kubelet's
// AtomicWriter does for a Secret or ConfigMap: the data goes to a new
// timestamped directory, a symlink ..data_tmp to it is renamed over ..data,
// the file is a symlink through ..data (made on the first write), and the
// old directory is removed.
func KubeletWrite(tb testing.TB, dir, file string, data []byte) {
	tb.Helper()
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := "..2026_11_25_18_00_00." + time.Now().Format("150405.000000000")
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ts, file), data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, file)); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink(filepath.Join("..data", file), filepath.Join(dir, file)); err != nil {
			tb.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			tb.Fatal(err)
		}
	}
}
