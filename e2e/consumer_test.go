package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/clienttest"
)

// startConsumer builds the example consumer from the client module alone,
// as a consuming service would, runs it against issuerURL on a free port and
// returns its base URL. It must stop cleanly on SIGTERM when the test ends.
func startConsumer(t *testing.T, issuerURL string) string {
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
	cmd := exec.Command(bin)
	cmd.Env = []string{"SNOWTOKEN_ISSUER_URL=" + issuerURL, "CONSUMER_ADDR=127.0.0.1:0"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("consumer after SIGTERM: %v", err)
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("the consumer did not stop within 15 s of SIGTERM")
		}
	})
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadBytes('\n') // the "listening" log line
	if err != nil {
		t.Fatalf("no start-up log: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	var l struct{ Msg, Addr string }
	if err := json.Unmarshal(first, &l); err != nil || l.Msg != "listening" || l.Addr == "" {
		t.Fatalf("start-up log %q: %v", first, err)
	}
	return "http://" + l.Addr
}

// getURL sends GET url with tok as bearer token (none when empty).
func getURL(t *testing.T, url, tok string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestConsumer runs the example consumer binary against a real issuer.
func TestConsumer(t *testing.T) {
	issuer := clienttest.New(t, clienttest.Config{})
	base := startConsumer(t, issuer.URL)

	if resp, body := getURL(t, base+"/healthz", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("GET /healthz: got %d %s, want 200", resp.StatusCode, body)
	}
	if resp, _ := getURL(t, base+"/orders", ""); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") != `Bearer realm="snowtoken"` {
		t.Errorf("no token: got %d %q, want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	reader, err := issuer.Token(t.Context(), "orders:read")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := getURL(t, base+"/orders", reader)
	var got struct {
		Orders  []map[string]any `json:"orders"`
		Subject string           `json:"subject"`
	}
	if err := json.Unmarshal([]byte(body), &got); resp.StatusCode != http.StatusOK || err != nil ||
		got.Subject != issuer.ClientID || len(got.Orders) == 0 {
		t.Errorf("valid token: got %d %s, want 200 with the orders of %s", resp.StatusCode, body, issuer.ClientID)
	}

	writer, err := issuer.Token(t.Context(), "orders:write")
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := getURL(t, base+"/orders", writer); resp.StatusCode != http.StatusForbidden {
		t.Errorf("token without orders:read: got %d, want 403", resp.StatusCode)
	}

	if err := issuer.Revoke(t.Context(), reader); err != nil {
		t.Fatal(err)
	}
	if resp, _ := getURL(t, base+"/orders", reader); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked token: got %d, want 401", resp.StatusCode)
	}

	issuer.Close()
	if resp, _ := getURL(t, base+"/orders", writer); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("issuer down: got %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
