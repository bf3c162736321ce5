package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/keyset"
)

// readmeRunbook returns the sh block under the heading "## "+title of
// docs/operations.md: each runbook there is one fenced sh block under its
// own heading, so that a test can run what an operator would paste.
func readmeRunbook(tb testing.TB, title string) string {
	tb.Helper()
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		tb.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## "+title+"\n")
	if !ok {
		tb.Fatalf("docs/operations.md has no heading %q", "## "+title)
	}
	start := strings.Index(section, "\n```sh\n")
	next := strings.Index(section, "\n## ")
	if h := strings.Index(section, "\n### "); h >= 0 && (next < 0 || h < next) {
		next = h
	}
	if start < 0 || (next >= 0 && next < start) {
		tb.Fatalf("docs/operations.md: %q has no sh block", title)
	}
	block := section[start+len("\n```sh\n"):]
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		tb.Fatalf("docs/operations.md: %q: the sh block does not end", title)
	}
	return block
}

// runRunbook runs a runbook with bash -eu (stopping at the first command
// that fails), the snowtoken binary first on PATH, and env.
func runRunbook(tb testing.TB, bin, script string, env ...string) string {
	tb.Helper()
	for _, tool := range []string{"bash", "curl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("the runbook needs %s", tool)
		}
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append([]string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("the runbook failed: %v\n%s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

// TestRunbookRotateSigningKey runs docs/operations.md's "Rotate a signing key" on a
// keys directory that a running replica uses: every command succeeds, the
// directory holds the active key and a next one, and the replica reloads it
// by itself and names it in /readyz.
func TestRunbookRotateSigningKey(t *testing.T) {
	script := readmeRunbook(t, "Rotate a signing key")
	keys := filepath.Join(t.TempDir(), "keys")
	p := startIssuer(t, issuerOpts{ip: "127.0.0.42", prepare: func(bin string, creds fleetCreds) []string {
		fleetCommand(t, bin, "keys", "rotate", "-dir", keys, "-adopt", creds.keyPath)
		return []string{"SNOWTOKEN_SIGNING_KEYS", keys}
	}})
	bin := p.bin

	out := runRunbook(t, bin, script, "KEYS="+keys, "ISSUER=http://"+p.addr)
	for _, want := range []string{"added", "may sign from", `"status":"ready"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the runbook printed:\n%s\nwant %q in it", out, want)
		}
	}
	ks, err := keyset.LoadDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, k := range ks.Keys() {
		states = append(states, string(k.State))
	}
	if got := strings.Join(states, ","); got != "active,next" {
		t.Errorf("after the runbook: states %s, want active,next (the next key may sign only in %v)", got, keyset.PublishDelay)
	}
	want := shortSHA(t, filepath.Join(keys, keyset.ManifestFile))
	deadline := time.Now().Add(fleetWait)
	for p.readyConfig(t)["keys"] != want {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz names keys %v, want %s after the runbook", p.readyConfig(t)["keys"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunbookRotateClientSecret runs docs/operations.md's "Rotate a client secret"
// on the clients file of a running replica: the replica reloads it by
// itself, and then gives tokens for the new secret and for the old one.
func TestRunbookRotateClientSecret(t *testing.T) {
	script := readmeRunbook(t, "Rotate a client secret")
	p := startIssuer(t, issuerOpts{ip: "127.0.0.43"})
	bin, creds := p.bin, p.creds

	out := runRunbook(t, bin, script, "CLIENTS="+creds.clientsPath, "CLIENT_ID="+creds.svc.id)
	m := regexp.MustCompile(`(?m)^client_secret: (\S+)$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "PREVIOUS SECRET EXPIRES") {
		t.Fatalf("the runbook printed:\n%s\nwant the new secret and the list", out)
	}
	p.waitClientsFile(t, creds.clientsPath)
	for name, c := range map[string]fleetClient{"new": {id: creds.svc.id, secret: m[1]}, "old": creds.svc} {
		if status, _, _, body := p.tryIssue(t, c, ""); status != http.StatusOK {
			t.Errorf("the %s secret after the rotation: %d %s, want 200", name, status, body)
		}
	}
}

// TestRunbookAddClient runs docs/operations.md's "Add a client" on the clients file
// of a running replica: the replica loads it by itself, and the new client
// gets a token with the secret the runbook printed.
func TestRunbookAddClient(t *testing.T) {
	script := readmeRunbook(t, "Add a client")
	p := startIssuer(t, issuerOpts{ip: "127.0.0.44"})
	bin, creds := p.bin, p.creds

	out := runRunbook(t, bin, script, "CLIENTS="+creds.clientsPath, "CLIENT_ID=reports")
	c := fleetClient{id: "reports", secret: secretIn(t, out)}
	p.waitClientsFile(t, creds.clientsPath)
	if status, _, _, body := p.tryIssue(t, c, ""); status != http.StatusOK {
		t.Errorf("the added client: %d %s, want 200", status, body)
	}
}

// waitClientsFile waits until p's /readyz names the clients file at path as
// the one in force.
func (p *issuer) waitClientsFile(tb testing.TB, path string) {
	tb.Helper()
	want := shortSHA(tb, path)
	deadline := time.Now().Add(fleetWait)
	for p.readyConfig(tb)["clients"] != want {
		if time.Now().After(deadline) {
			tb.Fatalf("/readyz names clients %v, want %s", p.readyConfig(tb)["clients"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
