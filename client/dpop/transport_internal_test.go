package dpop

import (
	"io"
	"net/http"
	"strconv"
	"strings"
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

// FuzzAsksForNonce: whatever a server answers, asksForNonce does not
// panic, gives the caller the whole body back, and finds use_dpop_nonce
// only in a 400's JSON error or a 401's DPoP challenge.
func FuzzAsksForNonce(f *testing.F) {
	f.Add(400, `{"error":"use_dpop_nonce"}`, "")
	f.Add(400, `{"error":"use_dpop_nonce"`, "")
	f.Add(400, strings.Repeat(" ", maxErrorBody)+`{"error":"use_dpop_nonce"}`, "")
	f.Add(401, "", `DPoP error="use_dpop_nonce"`)
	f.Add(401, "", `Bearer error="use_dpop_nonce"`)
	f.Add(200, `{"error":"use_dpop_nonce"}`, `DPoP error="use_dpop_nonce"`)
	f.Fuzz(func(t *testing.T, status int, body, challenge string) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Www-Authenticate": {challenge}},
			Body: io.NopCloser(strings.NewReader(body))}
		asks := asksForNonce(resp)
		got, _ := io.ReadAll(resp.Body)
		if string(got) != body {
			t.Fatalf("the caller reads %q, want %q", got, body)
		}
		if asks && status != 400 && status != 401 {
			t.Fatalf("status %d asks for a nonce", status)
		}
		if asks && status == 400 && !strings.Contains(body, "use_dpop_nonce") {
			t.Fatalf("400 %q asks for a nonce", body)
		}
	})
}
