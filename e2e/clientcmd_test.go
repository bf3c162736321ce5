package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/filetest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/redisstore"
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
// mode 0600 (as writeClients and client new make it) and alone in its
// directory but for its lock file (no temporary file left).
func (d *clientsDir) load(tb testing.TB) *clients.Registry {
	tb.Helper()
	if fi, err := os.Stat(d.path); err != nil || fi.Mode().Perm() != 0o600 {
		tb.Fatalf("%s: mode %v (%v), want 0600", d.path, fi.Mode().Perm(), err)
	}
	d.wantAlone(tb)
	cs, err := clients.Load(d.path)
	if err != nil {
		tb.Fatalf("the issuer refuses the file the CLI wrote: %v", err)
	}
	return cs
}

// wantAlone checks that the directory holds the clients file and nothing
// else but its lock file.
func (d *clientsDir) wantAlone(tb testing.TB) {
	tb.Helper()
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(d.path) && e.Name() != ".clients.json.lock" {
			tb.Errorf("%s holds %v, want the clients file alone, and its lock file", d.dir, entries)
		}
	}
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
func wantAuth(tb testing.TB, cs *clients.Registry, id, secret string, at time.Time, want bool) {
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
	if gw.ID != "gw" || strings.Join(gw.Scopes, " ") != "orders:read orders:write" || !gw.MaySetSubject || gw.MaxTTL != clients.Duration(15*time.Minute) ||
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
		{"id": "soon", "secret_sha256": "`+filetest.SHA256Hex("s")+`", "secret_expires": "`+soon.Format(time.RFC3339)+`"},
		{"id": "gone", "secret_sha256": "`+filetest.SHA256Hex("g")+`", "secret_expires": "`+past.Format(time.RFC3339)+`"}]}`)

	err := run(t.Context(), []string{"client", "rotate-secret", "-file", d.path, "-id", "soon"}, nil, io.Discard)
	if exitCode(err, io.Discard) != 2 || !strings.Contains(err.Error(), "-secret-valid-for") {
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
	good := filetest.SHA256Hex("x")
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
			d.wantAlone(t)
		})
	}
}

// TestClientList: a table of every client, with how it authenticates and
// the expiries of its secrets, expired ones marked.
func TestClientList(t *testing.T) {
	d := newClientsDir(t)
	writeClients(t, d.path, `{"clients": [
		{"id": "gw", "secret_sha256": "`+filetest.SHA256Hex("a")+`", "scopes": ["orders:read", "orders:write"], "owner": "platform team",
		 "secret_expires": "2099-01-01T00:00:00Z", "previous_secret_sha256": "`+filetest.SHA256Hex("b")+`", "previous_secret_expires": "2020-01-01T00:00:00Z"},
		{"id": "off", "secret_sha256": "`+filetest.SHA256Hex("c")+`", "disabled": true}]}`)
	out := d.client(t, "list", "-file", d.path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"ID", "AUTH METHOD", "SCOPES", "DISABLED", "SECRET EXPIRES", "PREVIOUS SECRET EXPIRES", "OWNER"},
		{"gw", "client_secret_basic", "orders:read orders:write", "false", "2099-01-01T00:00:00Z", "2020-01-01T00:00:00Z (expired)", "platform team"},
		{"off", "client_secret_basic", "-", "true", "-", "-", "-"},
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
		tok := p.issueForm(t, fleetClient{"svc", secret}, url.Values{"scope": {"b"}})
		if status, body := p.validateRaw(t, tok); status != http.StatusOK {
			t.Errorf("a token got with the %s secret: validate %d %s, want 200", name, status, body)
		}
	}
	if status, body := p.post(t, "/token", fleetClient{"off", offSecret}, url.Values{"grant_type": {"client_credentials"}}); status != http.StatusUnauthorized {
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
			file := `{"clients": [{"id": "gw", "secret_sha256": "` + filetest.SHA256Hex("a") + `"}, {"id": "svc", "secret_sha256": "` + filetest.SHA256Hex("b") + `"}]}`
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
			v, err := srv.Client().Get(t.Context(), redisstore.DefaultKeyPrefix+"client:{gw}").Int64()
			if err != nil {
				t.Fatalf("client %s -revoke wrote no revocation: %v", cmd, err)
			}
			if lo, hi := before.Add(token.DefaultLeeway).UnixMilli(), time.Now().Add(token.DefaultLeeway).UnixMilli(); v < lo || v > hi {
				t.Errorf("revoked up to %d, want now plus the leeway, in [%d, %d]", v, lo, hi)
			}
			if err := srv.Client().Del(t.Context(), redisstore.DefaultKeyPrefix+"client:{gw}").Err(); err != nil {
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
	v, err := srv.Client().Get(t.Context(), redisstore.DefaultKeyPrefix+"client:{gateway}").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(token.DefaultLeeway).UnixMilli(), time.Now().Add(token.DefaultLeeway).UnixMilli(); v < lo || v > hi {
		t.Errorf("revoked up to %d, want now plus the leeway, in [%d, %d]", v, lo, hi)
	}
	// It is logged as the replicas log it (TestRevocationLog).
	msgs, err := srv.Client().XRange(t.Context(), redisstore.DefaultKeyPrefix+"{revlog}", "-", "+").Result()
	if err != nil || len(msgs) != 1 || fmt.Sprint(msgs[0].Values) != fmt.Sprintf("map[i:gateway k:c v:%d]", v) {
		t.Errorf("revocation log %v, %v: want one entry for gateway up to %d", msgs, err, v)
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

// writeClients writes a clients file as an operator would, mode 0600.
func writeClients(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestClientEditKeepsOwner: an edit by root keeps the clients file's owner,
// group and mode, so the user the issuer runs as still reads it, and says
// who can read it (`client disable` as root once left 0:0 0600, the
// issuer's reload was refused and the client kept its tokens). Run as a user who can neither keep the owner nor is the owner,
// an edit is refused, naming the problem, and writes nothing.
func TestClientEditKeepsOwner(t *testing.T) {
	setpriv := needRoot(t)
	for _, tc := range []struct {
		name                string
		uid, gid            int
		mode                os.FileMode
		args                []string
		reader              []string // setpriv credentials of the issuer's user
		wantOut, wantClient string
	}{
		{"owner", 12345, 12345, 0o600, []string{"disable", "-id", "beta"}, []string{"--reuid", "12345", "--regid", "12345"},
			"kept its owner 12345:12345 and mode 0600: readable by uid 12345", "beta"},
		{"group", 0, 12345, 0o640, []string{"new", "-id", "delta"}, []string{"--reuid", "23456", "--regid", "12345"},
			"kept its owner 0:12345 and mode 0640: readable by root and group 12345", "delta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sharedClientsDir(t)
			writeClients(t, d.path, `{"clients": [{"id": "alpha", "secret_sha256": "`+filetest.SHA256Hex("a")+`"}, {"id": "beta", "secret_sha256": "`+filetest.SHA256Hex("b")+`"}]}`)
			chownFile(t, d.path, tc.uid, tc.gid, tc.mode)
			out := d.client(t, append(tc.args, "-file", d.path)...)
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("output:\n%s\nwant it to say %q", out, tc.wantOut)
			}
			if uid, gid, mode := fileOwner(t, d.path); uid != tc.uid || gid != tc.gid || mode != tc.mode {
				t.Errorf("after client %s: %d:%d %04o, want %d:%d %04o", tc.args[0], uid, gid, mode, tc.uid, tc.gid, tc.mode)
			}
			data, err := exec.Command(setpriv, append(append(tc.reader, "--clear-groups", "cat"), d.path)...).Output()
			if err != nil {
				t.Fatalf("the issuer's user %v cannot read the file: %v", tc.reader, err)
			}
			cf, err := clients.ParseFile(data, d.path)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(cf.Clients, func(c clients.Client) bool { return c.ID == tc.wantClient })
			if i < 0 || cf.Clients[i].Disabled != (tc.args[0] == "disable") {
				t.Errorf("the issuer's user reads %+v, want the change to %s", cf.Clients, tc.wantClient)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		d := sharedClientsDir(t)
		if err := os.Chmod(d.dir, 0o777); err != nil {
			t.Fatal(err)
		}
		file := `{"clients": [{"id": "alpha", "secret_sha256": "` + filetest.SHA256Hex("a") + `"}, {"id": "beta", "secret_sha256": "` + filetest.SHA256Hex("b") + `"}]}`
		writeClients(t, d.path, file)
		chownFile(t, d.path, 12345, 12345, 0o644)
		bin := sharedBinary(t)
		cmd := exec.Command(setpriv, "--reuid", "23456", "--regid", "23456", "--clear-groups", bin, "client", "disable", "-file", d.path, "-id", "beta")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "cannot keep the file's owner and group 12345:12345") {
			t.Errorf("client disable as another user: %v\n%s\nwant it refused, naming the owner", err, out)
		}
		if got, _ := os.ReadFile(d.path); string(got) != file {
			t.Errorf("the refused edit changed the file:\n%s", got)
		}
		if uid, gid, mode := fileOwner(t, d.path); uid != 12345 || gid != 12345 || mode != 0o644 {
			t.Errorf("after the refused edit: %d:%d %04o, want 12345:12345 0644", uid, gid, mode)
		}
		d.wantAlone(t)
	})
}

// TestClientEditsAtOnce: edits by two commands started together both land
// (in 50 rounds of disable and new at once, several of each were once
// lost while both said they succeeded). Each round runs the
// real binary twice: disable -id aN and new -id bN; then every aN is
// disabled and every bN is in the file.
func TestClientEditsAtOnce(t *testing.T) {
	const rounds = 50
	bin := fleetBinary(t)
	d := newClientsDir(t)
	var entries []string
	for i := range rounds {
		entries = append(entries, fmt.Sprintf(`{"id": "a%d", "secret_sha256": "%s"}`, i, filetest.SHA256Hex("a")))
	}
	writeClients(t, d.path, `{"clients": [`+strings.Join(entries, ", ")+`]}`)
	for i := range rounds {
		runAtOnce(t,
			exec.Command(bin, "client", "disable", "-file", d.path, "-id", fmt.Sprintf("a%d", i)),
			exec.Command(bin, "client", "new", "-file", d.path, "-id", fmt.Sprintf("b%d", i)))
	}
	byID := map[string]clients.Client{}
	for _, c := range d.load(t).All() {
		byID[c.ID] = c
	}
	var lostDisable, lostNew int
	for i := range rounds {
		if c, ok := byID[fmt.Sprintf("a%d", i)]; !ok || !c.Disabled {
			lostDisable++
		}
		if _, ok := byID[fmt.Sprintf("b%d", i)]; !ok {
			lostNew++
		}
	}
	if lostDisable+lostNew > 0 {
		t.Errorf("of %d rounds, %d disables and %d new clients were lost, though every command succeeded", rounds, lostDisable, lostNew)
	}
}

// runAtOnce starts cmds together and returns what each printed, once all
// have ended; it fails tb if one fails.
func runAtOnce(tb testing.TB, cmds ...*exec.Cmd) []string {
	tb.Helper()
	outs := make([]bytes.Buffer, len(cmds))
	for i, c := range cmds {
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := c.Start(); err != nil {
			tb.Fatal(err)
		}
	}
	var failed []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("%v: %v\n%s", c.Args[1:], err, outs[i].String()))
		}
	}
	if failed != nil {
		tb.Fatal(strings.Join(failed, "\n"))
	}
	printed := make([]string, len(outs))
	for i := range outs {
		printed[i] = outs[i].String()
	}
	return printed
}

// needRoot skips the test unless it runs as root with setpriv(1), which it
// returns: the test gives files to other users and runs as them.
func needRoot(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root, to give the clients file to another user (uid 12345)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		tb.Skip("needs setpriv (util-linux), to read the clients file as another user")
	}
	return setpriv
}

// sharedClientsDir is a clientsDir that every user may enter.
func sharedClientsDir(tb testing.TB) *clientsDir {
	tb.Helper()
	dir, err := os.MkdirTemp("", "snowtoken-clients-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return &clientsDir{dir: dir, path: filepath.Join(dir, "clients.json")}
}

// sharedBinary is a copy of the snowtoken binary that every user may run.
func sharedBinary(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile(fleetBinary(tb))
	if err != nil {
		tb.Fatal(err)
	}
	dir := sharedClientsDir(tb).dir
	path := filepath.Join(dir, "snowtoken")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// chownFile gives path an owner, a group and a mode.
func chownFile(tb testing.TB, path string, uid, gid int, mode os.FileMode) {
	tb.Helper()
	if err := os.Chown(path, uid, gid); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

// fileOwner returns path's owner, group and permission bits.
func fileOwner(tb testing.TB, path string) (uid, gid int, mode os.FileMode) {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode().Perm()
}

// TestClientEditReplicas: with -replicas, an edit waits until each named
// replica's /readyz shows the file it wrote, and names those that did not
// take it, exiting 0 since the file is written (the CLI warns when the
// running replicas did not take its change). Replica a
// reads the file; replica b reads a copy that the edit does not change;
// the third is not there. keys rotate does the same for keys.json.
func TestClientEditReplicas(t *testing.T) {
	srv := redistest.NewServer(t)
	keysDir := filepath.Join(t.TempDir(), "keys")
	if err := run(t.Context(), []string{"keys", "rotate", "-dir", keysDir}, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	d, stale := newClientsDir(t), newClientsDir(t)
	file := `{"clients": [{"id": "gw", "secret_sha256": "` + filetest.SHA256Hex("a") + `"}, {"id": "svc", "secret_sha256": "` + filetest.SHA256Hex("b") + `"}]}`
	writeClients(t, d.path, file)
	writeClients(t, stale.path, file)
	var urls []string
	for i, path := range []string{d.path, stale.path} {
		env := replicaEnv(srv.URL())
		env["SNOWTOKEN_ENV"] = "production"
		env["SNOWTOKEN_ADDR"] = "127.0.0.1:0"
		env["SNOWTOKEN_CLIENTS_FILE"] = path
		env["SNOWTOKEN_SIGNING_KEYS"] = keysDir
		env["SNOWTOKEN_WORKER_ID"] = fmt.Sprint(5 + i)
		env["SNOWTOKEN_WORKER_LEASE_TTL"] = "1s" // a first claim waits one lease TTL
		p := startProgram(t, env)
		waitReady(t, p.url("/readyz"), waitLimit)
		urls = append(urls, p.url(""))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()

	out := d.client(t, "disable", "-file", d.path, "-id", "gw", "-replicas", strings.Join(append(urls, gone), ","), "-replicas-wait", "2s")
	for _, want := range []string{
		"replica " + urls[0] + "/readyz loaded the change",
		"warning: replica " + urls[1] + "/readyz did not load the change within 2s: it serves clients " + filetest.SHA256Hex(file)[:12],
		"warning: replica " + gone + "/readyz did not load the change within 2s: unreachable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client disable -replicas printed:\n%s\nwant a line with %q", out, want)
		}
	}

	var rotated strings.Builder
	if err := run(t.Context(), []string{"keys", "rotate", "-dir", keysDir, "-replicas", urls[0], "-replicas-wait", "10s"}, nil, &rotated); err != nil {
		t.Fatalf("keys rotate: %v\n%s", err, rotated.String())
	}
	out = rotated.String()
	if want := "replica " + urls[0] + "/readyz loaded the change"; !strings.Contains(out, want) {
		t.Errorf("keys rotate -replicas printed:\n%s\nwant a line with %q", out, want)
	}

	for _, bad := range []string{"10.0.0.5:8080", "ftp://h", "http://h/?a=b"} {
		if err := run(t.Context(), []string{"client", "enable", "-file", d.path, "-id", "gw", "-replicas", bad}, nil, io.Discard); exitCode(err, io.Discard) != 2 {
			t.Errorf("-replicas %q: %v, want a usage error", bad, err)
		}
	}
}
