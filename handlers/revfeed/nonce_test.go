package revfeed_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// TestNonceRefused checks that a nonce that is not 22 to 128 base64url
// characters, or is given twice, is a 400 invalid_request on the stream and
// the snapshot, before anything is served.
func TestNonceRefused(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revocation.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{})
	for _, q := range []string{"nonce=short", "nonce=" + testNonce + "%2B", "nonce=" + testNonce + "=",
		"nonce=" + strings.Repeat("a", 129), "nonce=" + testNonce + "&nonce=" + testNonce, "nonce="} {
		for _, path := range []string{"/revocations/events", "/revocations"} {
			resp := is.get(t, t.Context(), path+"?"+q, "api", map[string]string{"Last-Event-ID": ev.ID})
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error != "invalid_request" {
				t.Errorf("%s?%s: %d %s, want 400 invalid_request", path, q, resp.StatusCode, body)
			}
		}
	}
	if n := is.gauge(t); n != 0 {
		t.Errorf("%v subscribers after refusals", n)
	}
}
