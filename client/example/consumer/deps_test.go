package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lightModules are all the modules the client module may need: itself,
// golang-jwt, bitsalloc (standard library only; the ID layout), and for
// client/dpop go-json-experiment (strict JSON: exact names, no duplicates)
// and edwards25519 (a proof key's point checks), neither of which needs
// another module. No gin, go-redis, quic-go, otter or anything else.
var lightModules = []string{
	"github.com/snowtoken/snowtoken/client",
	"github.com/golang-jwt/jwt/v5",
	"github.com/snowtoken/snowtoken/bitsalloc",
	"github.com/go-json-experiment/json",
	"filippo.io/edwards25519",
}

// TestBuildsFromTheClientModuleAlone builds the consumer as a consuming
// service does, from the client module alone (no workspace, go.mod as it
// stands), and fails if its dependencies, or the module's, hold any module
// but lightModules.
func TestBuildsFromTheClientModuleAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build; skipped with -short")
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr(err))
		}
		return string(out)
	}
	bin := filepath.Join(t.TempDir(), "consumer")
	goCmd("build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	if fi, err := os.Stat(bin); err == nil {
		t.Logf("consumer binary (-trimpath -ldflags='-s -w'): %.1f MB", float64(fi.Size())/1e6)
	}

	deps := strings.Fields(goCmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "."))
	slices.Sort(deps)
	deps = slices.Compact(deps) // a module per package: each once
	if !slices.Contains(deps, "github.com/golang-jwt/jwt/v5") {
		t.Errorf("go list -deps names no golang-jwt: %q; is the list read right?", deps)
	}
	for _, m := range deps {
		if !slices.Contains(lightModules, m) {
			t.Errorf("the consumer depends on module %s; the client module may need only %q", m, lightModules)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(goCmd("list", "-m", "all")), "\n") {
		if m, _, _ := strings.Cut(line, " "); !slices.Contains(lightModules, m) {
			t.Errorf("go list -m all: the client module requires %s; it may need only %q", line, lightModules)
		}
	}
}

// stderr is what a failed command wrote to its standard error.
func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
