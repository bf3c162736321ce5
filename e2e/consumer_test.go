package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/clienttest"
)

// startConsumer builds the example consumer from the client module alone,
// as a consuming service would, runs it (spawnProc, the driver's
// process half) against issuerURL on a free port and returns it; its URL is
// its url. It must stop cleanly on SIGTERM when the test ends.
func startConsumer(t *testing.T, issuerURL string) *issuer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the consumer; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "consumer")
	build := exec.Command("go", "build", "-o", bin, "./example/consumer")
	build.Dir = filepath.Join("..", "client")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./example/consumer in client/: %v\n%s", err, out)
	}
	p := spawnProc(t, "consumer", map[string]string{"SNOWTOKEN_ISSUER_URL": issuerURL, "CONSUMER_ADDR": "127.0.0.1:0"}, bin)
	t.Cleanup(func() { // before spawnProc's kill
		if err := p.stop(t); err != nil {
			t.Errorf("consumer after SIGTERM: %v", err)
		}
	})
	p.addr, _ = p.waitLog(t, "listening")["addr"].(string)
	if p.addr == "" {
		t.Fatalf("the consumer logged no address; output:\n%s", p.logs())
	}
	return p
}

// TestConsumer runs the example consumer binary against a real issuer.
func TestConsumer(t *testing.T) {
	issuer := clienttest.New(t, clienttest.Config{})
	c := startConsumer(t, issuer.URL)

	if status, _, body := fleetCall(t, http.MethodGet, c.url("/healthz"), nil, "", nil); status != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("GET /healthz: got %d %s, want 200", status, body)
	}
	if status, h, _ := fleetCall(t, http.MethodGet, c.url("/orders"), nil, "", nil); status != http.StatusUnauthorized ||
		h.Get("WWW-Authenticate") != `Bearer realm="snowtoken"` {
		t.Errorf("no token: got %d %q, want 401 with a Bearer challenge", status, h.Get("WWW-Authenticate"))
	}

	reader, err := issuer.Token(t.Context(), "orders:read")
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := fleetCall(t, http.MethodGet, c.url("/orders"), nil, reader, nil)
	var got struct {
		Orders  []map[string]any `json:"orders"`
		Subject string           `json:"subject"`
	}
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil ||
		got.Subject != issuer.ClientID || len(got.Orders) == 0 {
		t.Errorf("valid token: got %d %s, want 200 with the orders of %s", status, body, issuer.ClientID)
	}

	writer, err := issuer.Token(t.Context(), "orders:write")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := fleetCall(t, http.MethodGet, c.url("/orders"), nil, writer, nil); status != http.StatusForbidden {
		t.Errorf("token without orders:read: got %d, want 403", status)
	}

	if err := issuer.Revoke(t.Context(), reader); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := fleetCall(t, http.MethodGet, c.url("/orders"), nil, reader, nil); status != http.StatusUnauthorized {
		t.Errorf("revoked token: got %d, want 401", status)
	}

	issuer.Close()
	if status, h, _ := fleetCall(t, http.MethodGet, c.url("/orders"), nil, writer, nil); status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("issuer down: got %d Retry-After %q, want 503 with Retry-After", status, h.Get("Retry-After"))
	}
}
