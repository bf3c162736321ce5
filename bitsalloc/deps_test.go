package bitsalloc_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly fails if the module needs anything but the
// standard library: the issuer, the client module and every consuming
// service require it, so it must stay free of dependencies.
func TestStandardLibraryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped with -short")
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != 1 || got[0] != "github.com/snowtoken/snowtoken/bitsalloc" {
		t.Errorf("bitsalloc's non-standard dependencies: %q; want only itself", got)
	}
	mods := exec.Command("go", "list", "-m", "all")
	mods.Env = cmd.Env
	out, err = mods.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "github.com/snowtoken/snowtoken/bitsalloc" {
		t.Errorf("go list -m all in bitsalloc/: %q; want the module alone", got)
	}
}
