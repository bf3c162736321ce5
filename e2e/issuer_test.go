package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/client"
)

// TestIssuerTrailingSlash: the issuer configured with or without a trailing
// slash, and a consuming service configured with or without one, agree on
// the iss in every combination and every mode of the client; the metadata's
// issuer is the iss the issuer signs (RFC 8414 §3), with no slash.
func TestIssuerTrailingSlash(t *testing.T) {
	addr := fleetAddr(t, "127.0.0.1")
	canonical := "http://" + addr
	spellings := []string{canonical, canonical + "/"}
	for _, issuerSet := range spellings {
		t.Run("SNOWTOKEN_ISSUER="+issuerSet, func(t *testing.T) {
			env := devEnvVars()
			env["SNOWTOKEN_ADDR"], env["SNOWTOKEN_ISSUER"] = addr, issuerSet
			p := startProgram(t, env)
			defer p.stop(t)
			tok := p.issueForm(t, p.dev, url.Values{"scope": {"read"}})
			iss := issOf(t, tok)
			if iss != canonical {
				t.Errorf("iss %q, want %s", iss, canonical)
			}
			status, body := doRequest(t, mustRequest(t, p.url("/.well-known/oauth-authorization-server")))
			var meta struct{ Issuer string }
			if err := json.Unmarshal(body, &meta); status != http.StatusOK || err != nil {
				t.Fatalf("metadata: %d %s (%v)", status, body, err)
			}
			if meta.Issuer != iss || meta.Issuer != canonical {
				t.Errorf("metadata issuer %q, iss %q: want both %s", meta.Issuer, iss, canonical)
			}
			if warned := strings.Contains(p.logs(), "SNOWTOKEN_ISSUER is taken in its canonical form"); warned != (issuerSet != canonical) {
				t.Errorf("the warning about SNOWTOKEN_ISSUER's form logged: %t, want %t", warned, issuerSet != canonical)
			}

			for _, consumerSet := range spellings {
				for _, tc := range []struct {
					name string
					opts client.Options
				}{
					{"local, skip", client.Options{IssuerURL: consumerSet, Mode: client.Local, RevocationCheck: client.Skip}},
					{"local, check", client.Options{IssuerURL: consumerSet, Mode: client.Local}},
					{"local, skip, Issuer set", client.Options{IssuerURL: consumerSet, Issuer: consumerSet, Mode: client.Local, RevocationCheck: client.Skip}},
					{"remote", client.Options{IssuerURL: consumerSet}},
					{"remote, Issuer set", client.Options{IssuerURL: consumerSet, Issuer: consumerSet}},
				} {
					v, err := client.New(tc.opts)
					if err != nil {
						t.Fatalf("%s, consumer %s: %v", tc.name, consumerSet, err)
					}
					c, err := v.Validate(t.Context(), tok, "read")
					if err != nil {
						t.Errorf("%s, consumer %s: %v, want the token valid", tc.name, consumerSet, err)
						continue
					}
					if c.Issuer != canonical {
						t.Errorf("%s, consumer %s: claims' Issuer %q, want %s", tc.name, consumerSet, c.Issuer, canonical)
					}
				}
			}
		})
	}
}

// mustRequest is a GET of u.
func mustRequest(tb testing.TB, u string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// issOf is the iss of a JWT, read without verifying it.
func issOf(tb testing.TB, tok string) string {
	tb.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		tb.Fatalf("a token of %d segments, want a JWT", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		tb.Fatal(err)
	}
	var claims struct{ Iss string }
	if err := json.Unmarshal(b, &claims); err != nil {
		tb.Fatal(err)
	}
	return claims.Iss
}
