package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/snowtoken/snowtoken/token/keyset"
)

// TestKeysRotateAtOnce: two `keys rotate` started together on a new
// directory run one after the other: the first
// creates the active key, the second adds a next key, and no key file is
// left that the manifest does not name. Each round runs the real binary
// twice.
func TestKeysRotateAtOnce(t *testing.T) {
	const rounds = 20
	bin := fleetBinary(t)
	for i := range rounds {
		dir := filepath.Join(t.TempDir(), "keys")
		outs := runAtOnce(t, exec.Command(bin, "keys", "rotate", "-dir", dir), exec.Command(bin, "keys", "rotate", "-dir", dir))
		ks, err := keyset.LoadDir(dir)
		if err != nil {
			t.Fatalf("round %d: the directory keys rotate wrote does not load: %v", i, err)
		}
		pems, err := filepath.Glob(filepath.Join(dir, "*.pem"))
		if err != nil {
			t.Fatal(err)
		}
		var active, next int
		for _, k := range ks.Keys() {
			active += btoi(k.State == keyset.Active)
			next += btoi(k.State == keyset.Next)
		}
		if active != 1 || next != 1 || len(pems) != 2 {
			t.Fatalf("round %d: %d active and %d next keys, %d key files; want 1, 1 and 2: one rotation was lost\n%s\n%s",
				i, active, next, len(pems), outs[0], outs[1])
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
