package token_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoRedis fails if package token, the domain, depends on a Redis
// client: the store that keeps its sessions in Redis is package
// redisstore, which implements token.Store.
func TestNoRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped with -short")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "go-redis") || strings.HasSuffix(dep, "/redisstore") {
			t.Errorf("package token depends on %s; the Redis store belongs in token/redisstore", dep)
		}
	}
}
