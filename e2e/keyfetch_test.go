package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/credentials"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// TestClientRefreshKeysReplicas: a private_key_jwt client's key is
// compromised and taken out of its jwks_uri's set. The replica keeps
// accepting it from its cache, until the operator runs `client
// refresh-keys -replicas`: once that says the replica loaded the change,
// the key is refused, long before the cache's 5 minutes (once only the
// TTL dropped it, and a reload kept it).
func TestClientRefreshKeysReplicas(t *testing.T) {
	srv := redistest.NewServer(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "signing.pem")
	if err := run(t.Context(), []string{"keys", "new", "-out", keyPath}, nil, &strings.Builder{}); err != nil {
		t.Fatalf("keys new: %v", err)
	}
	jwk := func(pub ed25519.PublicKey, kid string) string {
		return fmt.Sprintf(`{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": %q, "x": %q}]}`, kid, base64.RawURLEncoding.EncodeToString(pub))
	}
	oldPub, oldPriv, _ := ed25519.GenerateKey(rand.Reader)
	newPub, newPriv, _ := ed25519.GenerateKey(rand.Reader)
	var set atomic.Pointer[string]
	published := jwk(oldPub, "batch-1")
	set.Store(&published)
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(*set.Load())) }))
	t.Cleanup(keys.Close)

	clientsPath := filepath.Join(dir, "clients.json")
	writeClients(t, clientsPath, `{"clients": [{"id": "batch", "token_endpoint_auth_method": "private_key_jwt", "scopes": ["a"], "jwks_uri": "`+keys.URL+`"}]}`)
	env := replicaEnv(srv.URL())
	env["SNOWTOKEN_ENV"] = "production"
	env["SNOWTOKEN_ADDR"] = "127.0.0.1:0"
	env["SNOWTOKEN_CLIENTS_FILE"] = clientsPath
	env["SNOWTOKEN_SIGNING_KEYS"] = keyPath
	env["SNOWTOKEN_WORKER_ID"] = "9"
	env["SNOWTOKEN_WORKER_LEASE_TTL"] = "1s"
	p := startProgram(t, env)
	waitReady(t, p.url("/readyz"), waitLimit)

	grant := func(priv ed25519.PrivateKey, kid string) int {
		t.Helper()
		a, err := credentials.KeyAssertion("batch", env["SNOWTOKEN_ISSUER"], priv, kid)
		if err != nil {
			t.Fatal(err)
		}
		assertion, err := a(t.Context(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"batch"},
			"client_assertion_type": {credentials.AssertionType}, "client_assertion": {assertion}}
		req, _ := http.NewRequest(http.MethodPost, p.url("/token"), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		status, _ := doRequest(t, req)
		return status
	}
	if got := grant(oldPriv, "batch-1"); got != http.StatusOK {
		t.Fatalf("the client's key: %d", got)
	}
	rotated := jwk(newPub, "batch-2")
	set.Store(&rotated) // batch-1 is compromised: taken out
	if got := grant(oldPriv, "batch-1"); got != http.StatusOK {
		t.Fatalf("the key taken out, before refresh-keys: %d, want 200 from the cache (else this test shows nothing)", got)
	}

	var out strings.Builder
	if err := run(t.Context(), []string{"client", "refresh-keys", "-file", clientsPath, "-id", "batch",
		"-replicas", p.url(""), "-replicas-wait", "10s"}, nil, &out); err != nil {
		t.Fatalf("client refresh-keys: %v\n%s", err, out.String())
	}
	if want := "replica " + p.url("/readyz") + " loaded the change"; !strings.Contains(out.String(), want) {
		t.Fatalf("client refresh-keys printed:\n%s\nwant a line with %q", out.String(), want)
	}
	if got := grant(oldPriv, "batch-1"); got != http.StatusUnauthorized {
		t.Errorf("the key taken out, after refresh-keys: %d, want 401", got)
	}
	if got := grant(newPriv, "batch-2"); got != http.StatusOK {
		t.Errorf("the new key: %d", got)
	}
	if b, err := os.ReadFile(clientsPath); err != nil || !strings.Contains(string(b), `"keys_refreshed"`) {
		t.Errorf("the clients file: %v\n%s", err, b)
	}
}
