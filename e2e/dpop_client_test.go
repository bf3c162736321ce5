package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
	"github.com/snowtoken/snowtoken/clienttest"
)

// TestDPoPClientAndMiddleware: the client module on both sides of a
// DPoP-bound token against a real issuer that asks for nonces. A caller
// gets the token with golang.org/x/oauth2's clientcredentials over a
// dpop.Transport (which answers use_dpop_nonce by itself), and calls a
// service whose middleware checks the token and the proof in every mode:
// Remote (the issuer checks the proof, from a DPoP forwarder's forwarded
// headers) and Local. The token copied out of the request is refused as
// Bearer, and with a proof by another key.
func TestDPoPClientAndMiddleware(t *testing.T) {
	t.Parallel()
	is := clienttest.New(t, clienttest.Config{DPoPForwarders: []string{"127.0.0.1"}, DPoPNonces: true})
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	transport := &dpop.Transport{Prover: prover}
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, &http.Client{Transport: transport})
	cc := clientcredentials.Config{ClientID: is.ClientID, ClientSecret: is.ClientSecret, TokenURL: is.URL + "/token",
		Scopes: []string{"orders:read"}}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("clientcredentials with a dpop.Transport: %v", err)
	}
	if tok.Type() != "DPoP" {
		t.Fatalf("token_type %q, want DPoP", tok.TokenType)
	}

	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(nil)
			opts := m.opts
			opts.IssuerURL, opts.Logger = is.URL, slog.New(slog.DiscardHandler)
			opts.DPoP = client.DPoP{PublicURL: "http://" + srv.Listener.Addr().String()}
			v, err := client.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			srv.Config.Handler = v.Middleware(middlewaretest.Echo, "orders:read")
			srv.Start()
			t.Cleanup(srv.Close)

			caller := cc.Client(ctx) // Authorization: DPoP and a proof from transport, its own token
			status, body := get(t, caller, srv.URL+"/orders/17?expand=lines", "")
			if status != http.StatusOK {
				t.Fatalf("the caller with its token and proofs: %d %s", status, body)
			}
			var c client.Claims
			if err := json.Unmarshal(body, &c); err != nil || c.JKT != prover.Thumbprint() {
				t.Errorf("claims %+v (%v), want jkt %s", c, err, prover.Thumbprint())
			}
			if status, _ := get(t, caller, srv.URL+"/orders/18", ""); status != http.StatusOK {
				t.Errorf("a second request, a new proof: %d", status)
			}

			// A thief with the token alone, or with a key of its own: 401 with
			// the DPoP challenge that says why.
			thief, _ := dpop.GenerateProver()
			for name, tc := range map[string]struct {
				c      *http.Client
				scheme string
				codes  []string
			}{
				"the token as Bearer": {http.DefaultClient, "Bearer ", []string{"invalid_token"}},
				"the token with another key's proof": {&http.Client{Transport: &dpop.Transport{Prover: thief}}, "DPoP ",
					[]string{"invalid_token", "invalid_dpop_proof"}}, // Local mode finds the key another; Remote, the issuer
			} {
				status, body, hdr := getWithHeader(t, tc.c, srv.URL+"/orders/17", tc.scheme+tok.AccessToken)
				var e struct{ Error string }
				_ = json.Unmarshal(body, &e)
				if status != http.StatusUnauthorized || !slices.Contains(tc.codes, e.Error) ||
					!strings.HasPrefix(hdr.Get("WWW-Authenticate"), "DPoP ") || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="`+e.Error+`"`) {
					t.Errorf("%s: %d %s, WWW-Authenticate %q; want 401 %v with its DPoP challenge", name, status, body, hdr.Get("WWW-Authenticate"), tc.codes)
				}
			}
		})
	}
}

// get sends GET u with c, with authorization if not empty; status and body.
func get(tb testing.TB, c *http.Client, u, authorization string) (int, []byte) {
	tb.Helper()
	status, body, _ := getWithHeader(tb, c, u, authorization)
	return status, body
}

// getWithHeader is get, with the answer's header too.
func getWithHeader(tb testing.TB, c *http.Client, u, authorization string) (int, []byte, http.Header) {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header
}
