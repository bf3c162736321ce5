package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
)

// clientsDir is a directory for one clients file, clients.json.
type clientsDir struct {
	dir, path string
}

func newClientsDir(tb testing.TB) *clientsDir {
	tb.Helper()
	dir := tb.TempDir()
	return &clientsDir{dir: dir, path: filepath.Join(dir, "clients.json")}
}

// client runs `snowtoken client args...` and returns what it printed;
// it fails tb on an error.
func (d *clientsDir) client(tb testing.TB, args ...string) string {
	tb.Helper()
	var out bytes.Buffer
	if err := run(tb.Context(), append([]string{"client"}, args...), nil, &out); err != nil {
		tb.Fatalf("client %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// load loads the clients file as the issuer does, after checking that it is
// mode 0600 and alone in its directory (no temporary file left).
func (d *clientsDir) load(tb testing.TB) *token.Clients {
	tb.Helper()
	if fi, err := os.Stat(d.path); err != nil || fi.Mode().Perm() != 0o600 {
		tb.Fatalf("%s: mode %v (%v), want 0600", d.path, fi.Mode().Perm(), err)
	}
	if entries, err := os.ReadDir(d.dir); err != nil || len(entries) != 1 {
		tb.Errorf("%s holds %v (%v), want the clients file alone", d.dir, entries, err)
	}
	cs, err := token.LoadClients(d.path)
	if err != nil {
		tb.Fatalf("the issuer refuses the file the CLI wrote: %v", err)
	}
	return cs
}

// secretIn returns the secret a command printed.
func secretIn(tb testing.TB, out string) string {
	tb.Helper()
	m := regexp.MustCompile(`(?m)^client_secret: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("no client_secret in:\n%s", out)
	}
	return m[1]
}

// wantAuth checks whether secret authenticates client id at time at.
func wantAuth(tb testing.TB, cs *token.Clients, id, secret string, at time.Time, want bool) {
	tb.Helper()
	_, err := cs.Authenticate(id, secret, at)
	if got := err == nil; got != want {
		tb.Errorf("client %q at %v: authenticated %t (%v), want %t", id, at.Format(time.RFC3339), got, err, want)
	}
}

// TestClientFileLifecycle: every client subcommand that edits a file, in
// the order an operator uses them, each leaving a file the issuer loads.
func TestClientFileLifecycle(t *testing.T) {
	d := newClientsDir(t)
	before := time.Now()
	gwSecret := secretIn(t, d.client(t, "new", "-file", d.path, "-id", "gw", "-scopes", "orders:read, orders:write", "-audiences", "orders-api,https://billing.test/",
		"-may-set-subject", "-max-ttl", "15m", "-description", "the R&D gateway", "-owner", "platform@example.com", "-secret-valid-for", "2160h"))
	after := time.Now()
	svcSecret := secretIn(t, d.client(t, "new", "-file", d.path, "-id", "svc"))
	cs := d.load(t)
	wantAuth(t, cs, "gw", gwSecret, after, true)
	wantAuth(t, cs, "svc", svcSecret, after, true)
	gw := cs.All()[0]
	if gw.ID != "gw" || strings.Join(gw.Scopes, " ") != "orders:read orders:write" || !gw.MaySetSubject || gw.MaxTTL != token.Duration(15*time.Minute) ||
		gw.Description != "the R&D gateway" || gw.Owner != "platform@example.com" || strings.Join(gw.Audiences, " ") != "orders-api https://billing.test/" {
		t.Errorf("client new wrote %+v", gw)
	}
	if lo, hi := before.Add(2160*time.Hour).Truncate(time.Second), after.Add(2160*time.Hour); gw.SecretExpires.Before(lo) || gw.SecretExpires.After(hi) {
		t.Errorf("secret_expires %v, want 90 days from now", gw.SecretExpires)
	}
	if data, _ := os.ReadFile(d.path); !bytes.Contains(data, []byte(`"the R&D gateway"`)) {
		t.Errorf("the file escapes the description:\n%s", data)
	}

	// Rotation: both secrets work until the previous one's expiry, 24 h by default.
	before = time.Now()
	out := d.client(t, "rotate-secret", "-file", d.path, "-id", "svc")
	after = time.Now()
	newSecret := secretIn(t, out)
	cs = d.load(t)
	svc := cs.All()[1]
	if lo, hi := before.Add(24*time.Hour).Truncate(time.Second), after.Add(24*time.Hour); svc.PreviousSecretExpires.Before(lo) || svc.PreviousSecretExpires.After(hi) {
		t.Errorf("previous_secret_expires %v, want 24 h from now", svc.PreviousSecretExpires)
	}
	if !strings.Contains(out, "works until "+svc.PreviousSecretExpires.Format(time.RFC3339)) {
		t.Errorf("rotate-secret printed:\n%s\nwant the previous secret's expiry", out)
	}
	wantAuth(t, cs, "svc", svcSecret, after, true)
	wantAuth(t, cs, "svc", newSecret, after, true)
	wantAuth(t, cs, "svc", svcSecret, svc.PreviousSecretExpires, false)
	wantAuth(t, cs, "svc", newSecret, svc.PreviousSecretExpires, true)

	// A third secret while the first still works would end it: refused.
	var buf bytes.Buffer
	err := run(t.Context(), []string{"client", "rotate-secret", "-file", d.path, "-id", "svc"}, nil, &buf)
	if err == nil || !strings.Contains(err.Error(), "previous secret until") {
		t.Errorf("a second rotation within the window: %v, want a refusal naming the previous secret's expiry", err)
	}
	// ... unless the operator ends both now, as for a leaked secret.
	leaked := secretIn(t, d.client(t, "rotate-secret", "-file", d.path, "-id", "svc", "-old-valid-for", "0"))
	cs = d.load(t)
	wantAuth(t, cs, "svc", leaked, time.Now(), true)
	wantAuth(t, cs, "svc", newSecret, time.Now(), false)
	wantAuth(t, cs, "svc", svcSecret, time.Now(), false)

	// disable, enable, remove.
	d.client(t, "disable", "-file", d.path, "-id", "gw")
	wantAuth(t, d.load(t), "gw", gwSecret, time.Now(), false)
	d.client(t, "enable", "-file", d.path, "-id", "gw")
	wantAuth(t, d.load(t), "gw", gwSecret, time.Now(), true)
	d.client(t, "remove", "-file", d.path, "-id", "svc")
	cs = d.load(t)
	if all := cs.All(); len(all) != 1 || all[0].ID != "gw" {
		t.Errorf("after remove: %+v, want gw alone", all)
	}
}

// TestClientRotateSecretExpiry: a client whose secret has an expiry must be
// told the new secret's; the previous secret never outlives its own expiry;
// an expired secret is not kept as the previous one.
func TestClientRotateSecretExpiry(t *testing.T) {
	d := newClientsDir(t)
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	writeClients(t, d.path, `{"clients": [
		{"id": "soon", "secret_sha256": "`+sha256Hex("s")+`", "secret_expires": "`+soon.Format(time.RFC3339)+`"},
		{"id": "gone", "secret_sha256": "`+sha256Hex("g")+`", "secret_expires": "`+past.Format(time.RFC3339)+`"}]}`)

	err := run(t.Context(), []string{"client", "rotate-secret", "-file", d.path, "-id", "soon"}, nil, io.Discard)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-secret-valid-for") {
		t.Errorf("rotating an expiring secret without -secret-valid-for: %v, want a usage error naming it", err)
	}
	d.client(t, "rotate-secret", "-file", d.path, "-id", "soon", "-secret-valid-for", "720h")
	d.client(t, "rotate-secret", "-file", d.path, "-id", "gone", "-secret-valid-for", "0")
	all := d.load(t).All()
	gone, soonC := all[0], all[1]
	if !soonC.PreviousSecretExpires.Equal(soon) {
		t.Errorf("previous_secret_expires %v, want the old secret's own expiry %v, not 24 h", soonC.PreviousSecretExpires, soon)
	}
	if d := time.Until(soonC.SecretExpires); d < 719*time.Hour || d > 720*time.Hour {
		t.Errorf("the new secret expires in %v, want 720h", d)
	}
	if gone.PreviousSecretSHA256 != "" || !gone.SecretExpires.IsZero() {
		t.Errorf("rotating an expired secret kept it as the previous one, or an expiry: %+v", gone)
	}
}

// TestClientEditRefusesABadFile: an edit that would leave a file the issuer
// refuses, or an edit of a file it refuses already, writes nothing and says
// why, naming the client and the field.
func TestClientEditRefusesABadFile(t *testing.T) {
	good := sha256Hex("x")
	for _, tc := range []struct {
		name, file string
		args       []string
		want       []string
	}{
		{"unknown field", `{"clients": [{"id": "a", "secret_sha256": "` + good + `", "admn": true}]}`,
			[]string{"rotate-secret", "-id", "a"}, []string{`client 0 ("a")`, `"admn"`}},
		{"malformed hash", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}, {"id": "b", "secret_sha256": "abc"}]}`,
			[]string{"disable", "-id", "a"}, []string{`client "b"`, "secret_sha256"}},
		{"duplicate id", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}, {"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"enable", "-id", "a"}, []string{`client "a" listed twice`}},
		{"the last client", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"remove", "-id", "a"}, []string{"no clients"}},
		{"an id the file has", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"new", "-id", "a"}, []string{`already has a client "a"`}},
		{"a bad scope", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"new", "-id", "b", "-scopes", `x"y`}, []string{`client "b"`, "scope"}},
		{"a bad owner", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"new", "-id", "b", "-owner", "two\nlines"}, []string{`client "b"`, "owner"}},
		{"an id the file lacks", `{"clients": [{"id": "a", "secret_sha256": "` + good + `"}]}`,
			[]string{"disable", "-id", "b"}, []string{`no client "b"`}},
		{"not JSON", `clients: a`, []string{"list"}, []string{"clients.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newClientsDir(t)
			writeClients(t, d.path, tc.file)
			args := append([]string{"client", tc.args[0], "-file", d.path}, tc.args[1:]...)
			var out bytes.Buffer
			err := run(t.Context(), args, nil, &out)
			if err == nil {
				t.Fatalf("%q succeeded:\n%s", args, out.String())
			}
			for _, want := range append(tc.want, "client "+tc.args[0]+":") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to name %s", err, want)
				}
			}
			if strings.Contains(out.String(), "client_secret") {
				t.Errorf("printed a secret that was not written:\n%s", out.String())
			}
			if got, _ := os.ReadFile(d.path); string(got) != tc.file {
				t.Errorf("the file changed to:\n%s", got)
			}
			if entries, _ := os.ReadDir(d.dir); len(entries) != 1 {
				t.Errorf("%s holds %v, want the clients file alone", d.dir, entries)
			}
		})
	}
}

// TestClientList: a table of every client, with the expiries of its
// secrets, expired ones marked.
func TestClientList(t *testing.T) {
	d := newClientsDir(t)
	writeClients(t, d.path, `{"clients": [
		{"id": "gw", "secret_sha256": "`+sha256Hex("a")+`", "scopes": ["orders:read", "orders:write"], "owner": "platform team",
		 "secret_expires": "2099-01-01T00:00:00Z", "previous_secret_sha256": "`+sha256Hex("b")+`", "previous_secret_expires": "2020-01-01T00:00:00Z"},
		{"id": "off", "secret_sha256": "`+sha256Hex("c")+`", "disabled": true}]}`)
	out := d.client(t, "list", "-file", d.path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"ID", "SCOPES", "DISABLED", "SECRET EXPIRES", "PREVIOUS SECRET EXPIRES", "OWNER"},
		{"gw", "orders:read orders:write", "false", "2099-01-01T00:00:00Z", "2020-01-01T00:00:00Z (expired)", "platform team"},
		{"off", "-", "true", "-", "-", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("client list printed:\n%s", out)
	}
	for i, cells := range want {
		if got := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[i]), -1); strings.Join(got, "|") != strings.Join(cells, "|") {
			t.Errorf("line %d: %q, want %q", i, got, cells)
		}
	}
}

// TestRotatedClientsFileServes: the issuer, started on a clients file the
// commands made and rotated, gives tokens over HTTP for the new secret and
// the previous one, and none for a client they disabled.
func TestRotatedClientsFileServes(t *testing.T) {
	srv := redistest.NewServer(t)
	keyPath := filepath.Join(t.TempDir(), "signing.pem")
	if err := run(t.Context(), []string{"keys", "new", "-out", keyPath}, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	d := newClientsDir(t)
	oldSecret := secretIn(t, d.client(t, "new", "-file", d.path, "-id", "svc", "-scopes", "a,b", "-owner", "team a"))
	newSecret := secretIn(t, d.client(t, "rotate-secret", "-file", d.path, "-id", "svc"))
	offSecret := secretIn(t, d.client(t, "new", "-file", d.path, "-id", "off"))
	d.client(t, "disable", "-file", d.path, "-id", "off")

	env := replicaEnv(srv.URL())
	env["SNOWTOKEN_ENV"] = "production"
	env["SNOWTOKEN_ADDR"] = "127.0.0.1:0"
	env["SNOWTOKEN_CLIENTS_FILE"] = d.path
	env["SNOWTOKEN_SIGNING_KEYS"] = keyPath
	env["SNOWTOKEN_WORKER_ID"] = "5"
	env["SNOWTOKEN_WORKER_LEASE_TTL"] = "1s" // a first claim waits one lease TTL
	p := startProgram(t, env)
	waitReady(t, p.url("/readyz"), waitLimit)
	for name, secret := range map[string]string{"new": newSecret, "previous": oldSecret} {
		tok := issueToken(t, p, "svc", secret, url.Values{"scope": {"b"}})
		if status, body := validateToken(t, p, tok); status != http.StatusOK {
			t.Errorf("a token got with the %s secret: validate %d %s, want 200", name, status, body)
		}
	}
	if status, body := postClientForm(t, p, "/token", "off", offSecret, url.Values{"grant_type": {"client_credentials"}}); status != http.StatusUnauthorized {
		t.Errorf("the disabled client: %d %s, want 401", status, body)
	}
	if err := p.stop(t); err != nil {
		t.Errorf("run after its context ended = %v, want nil", err)
	}
}

// TestClientDisableRevoke: disable -revoke disables the client in the file
// and revokes its tokens in the replicas' Redis; without the Redis
// variables it stops before it changes the file.
func TestClientDisableRevoke(t *testing.T) {
	srv := redistest.NewServer(t)
	env := replicaEnv(srv.URL())
	for _, cmd := range []string{"disable", "remove"} {
		t.Run(cmd, func(t *testing.T) {
			d := newClientsDir(t)
			file := `{"clients": [{"id": "gw", "secret_sha256": "` + sha256Hex("a") + `"}, {"id": "svc", "secret_sha256": "` + sha256Hex("b") + `"}]}`
			writeClients(t, d.path, file)
			if err := run(t.Context(), []string{"client", cmd, "-file", d.path, "-id", "gw", "-revoke"}, nil, io.Discard); err == nil ||
				!strings.Contains(err.Error(), "SNOWTOKEN_REDIS_") {
				t.Errorf("client %s -revoke without Redis: %v, want an error naming SNOWTOKEN_REDIS_*", cmd, err)
			}
			if got, _ := os.ReadFile(d.path); string(got) != file {
				t.Errorf("client %s -revoke without Redis changed the file:\n%s", cmd, got)
			}

			before := time.Now()
			var out bytes.Buffer
			if err := run(t.Context(), []string{"client", cmd, "-file", d.path, "-id", "gw", "-revoke"}, env, &out); err != nil {
				t.Fatalf("client %s -revoke: %v\n%s", cmd, err, out.String())
			}
			for _, c := range d.load(t).All() {
				if c.ID == "gw" && !c.Disabled {
					t.Errorf("client %s: gw is still live", cmd)
				}
			}
			v, err := srv.Client().Get(t.Context(), token.DefaultKeyPrefix+"client:{gw}").Int64()
			if err != nil {
				t.Fatalf("client %s -revoke wrote no revocation: %v", cmd, err)
			}
			if lo, hi := before.Add(token.DefaultLeeway).UnixMilli(), time.Now().Add(token.DefaultLeeway).UnixMilli(); v < lo || v > hi {
				t.Errorf("revoked up to %d, want now plus the leeway, in [%d, %d]", v, lo, hi)
			}
			if err := srv.Client().Del(t.Context(), token.DefaultKeyPrefix+"client:{gw}").Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClientRevokeCommand: `snowtoken client revoke` writes the client's
// revocation time where the replicas read it, from their own environment.
func TestClientRevokeCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	env := replicaEnv(srv.URL())
	before := time.Now()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"client", "revoke", "-id", "gateway"}, env, &out); err != nil {
		t.Fatalf("client revoke: %v\n%s", err, out.String())
	}
	v, err := srv.Client().Get(t.Context(), token.DefaultKeyPrefix+"client:{gateway}").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(token.DefaultLeeway).UnixMilli(), time.Now().Add(token.DefaultLeeway).UnixMilli(); v < lo || v > hi {
		t.Errorf("revoked up to %d, want now plus the leeway, in [%d, %d]", v, lo, hi)
	}
	for name, args := range map[string][]string{"no id": {"client", "revoke"}, "bad id": {"client", "revoke", "-id", "a}b"}} {
		if err := run(t.Context(), args, env, io.Discard); err == nil {
			t.Errorf("%s: client revoke succeeded", name)
		}
	}
	if err := run(t.Context(), []string{"client", "revoke", "-id", "gateway"}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "SNOWTOKEN_REDIS_") {
		t.Errorf("client revoke without Redis: %v, want an error naming SNOWTOKEN_REDIS_*", err)
	}
}

// replicaEnv is the environment of a replica whose Redis is at redisURL, as
// the commands that write to the replicas' Redis read it.
func replicaEnv(redisURL string) map[string]string {
	return map[string]string{
		"SNOWTOKEN_REDIS_URL":    redisURL,
		"SNOWTOKEN_SIGNING_KEYS": "/run/secrets/signing.pem",
		"SNOWTOKEN_CLIENTS_FILE": "/run/secrets/clients.json",
		"SNOWTOKEN_ISSUER":       "https://auth.example.test",
	}
}

// writeClients writes a clients file as an operator would, mode 0644.
func writeClients(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// sha256Hex is a clients file's hash of secret.
func sha256Hex(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
