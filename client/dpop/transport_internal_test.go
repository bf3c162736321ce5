package dpop

import (
	"strconv"
	"testing"
)

// TestNonceOriginsBounded: a Transport remembers at most MaxNonceOrigins
// origins, and the newest always.
func TestNonceOriginsBounded(t *testing.T) {
	var tr Transport
	for i := range 3 * MaxNonceOrigins {
		o := "https://h" + strconv.Itoa(i)
		tr.remember(o, "n")
		if tr.nonce(o) != "n" {
			t.Fatalf("origin %d forgotten at once", i)
		}
	}
	if n := len(tr.nonces); n != MaxNonceOrigins {
		t.Errorf("%d origins remembered, want %d", n, MaxNonceOrigins)
	}
}
