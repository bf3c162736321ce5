package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// runInit runs `snowtoken init ARGS` through run, as the binary would.
func runInit(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), append([]string{"init"}, args...), nil, &out)
	return out.String(), err
}

// readDir returns every file in dir with its contents.
func readDir(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	files := make(map[string]string, len(entries))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

func TestInitCreatesWhatProductionNeeds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets", "nested")
	out, err := runInit(t, "-dir", dir)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}

	files := readDir(t, dir)
	names := slices.Sorted(maps.Keys(files))
	if want := []string{"clients.json", "demo.secret", "redis.password", "signing-key.pem"}; !slices.Equal(names, want) {
		t.Fatalf("files = %v, want %v (no temporary files left)", names, want)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %v, want 0700", got)
	}
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %v, want 0600", n, got)
		}
	}

	// The secret is in its file, never on stdout; stdout names the files.
	secret := strings.TrimSpace(files["demo.secret"])
	if len(secret) < 40 {
		t.Fatalf("secret %q is too short", secret)
	}
	if strings.Contains(out, secret) {
		t.Errorf("stdout shows the secret:\n%s", out)
	}
	for _, n := range names {
		if !strings.Contains(out, filepath.Join(dir, n)) {
			t.Errorf("stdout does not name %s:\n%s", n, out)
		}
	}

	// The Redis password: random, one line, not printed.
	password := files["redis.password"]
	if !regexp.MustCompile(`^[A-Z2-7]{26}\n$`).MatchString(password) {
		t.Errorf("redis.password = %d bytes, want 26 base32 characters and a newline", len(password))
	}
	if p := strings.TrimSpace(password); p != "" && strings.Contains(out, p) {
		t.Errorf("stdout shows the Redis password:\n%s", out)
	}

	// The issuer accepts the files as production configuration.
	env := map[string]string{
		"SNOWTOKEN_ENV":                 "production",
		"SNOWTOKEN_REDIS_URL":           "redis://127.0.0.1:6379/0",
		"SNOWTOKEN_REDIS_PASSWORD_FILE": filepath.Join(dir, "redis.password"),
		"SNOWTOKEN_ISSUER":              "http://localhost:8080",
		"SNOWTOKEN_SIGNING_KEYS":        filepath.Join(dir, "signing-key.pem"),
		"SNOWTOKEN_CLIENTS_FILE":        filepath.Join(dir, "clients.json"),
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	ks, err := keyset.Load(cfg.SigningKeys...)
	if err != nil {
		t.Fatalf("LoadKeySet: %v", err)
	}
	if !strings.Contains(out, ks.SigningKeyID()) {
		t.Errorf("stdout does not name kid %s:\n%s", ks.SigningKeyID(), out)
	}
	clients, err := clients.Load(cfg.ClientsFile)
	if err != nil {
		t.Fatalf("LoadClients: %v", err)
	}
	c, err := clients.Authenticate("demo", secret, time.Now())
	if err != nil {
		t.Fatalf("the written secret does not authenticate client demo: %v", err)
	}
	if want := []string{"orders:read", "orders:write"}; !slices.Equal(c.Scopes, want) {
		t.Errorf("scopes = %v, want %v", c.Scopes, want)
	}
	if c.Admin || c.MaySetSubject {
		t.Errorf("demo client has admin=%v may_set_subject=%v, want neither", c.Admin, c.MaySetSubject)
	}
}

func TestInitSecondRunChangesNothing(t *testing.T) {
	dir := t.TempDir()
	if out, err := runInit(t, "-dir", dir, "-client-id", "shop", "-scopes", "a, b"); err != nil {
		t.Fatalf("first init: %v\n%s", err, out)
	}
	before := readDir(t, dir)
	if _, ok := before["shop.secret"]; !ok {
		t.Fatalf("no shop.secret in %v", before)
	}
	var f clients.File
	if err := json.Unmarshal([]byte(before["clients.json"]), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Clients) != 1 || f.Clients[0].ID != "shop" || !slices.Equal(f.Clients[0].Scopes, []string{"a", "b"}) {
		t.Fatalf("clients file = %+v, want client shop with scopes a b", f)
	}

	out, err := runInit(t, "-dir", dir, "-client-id", "other")
	if err != nil {
		t.Fatalf("second init: %v\n%s", err, out)
	}
	if !strings.Contains(out, "nothing to do") {
		t.Errorf("second run does not say it did nothing:\n%s", out)
	}
	if after := readDir(t, dir); !maps.Equal(after, before) {
		t.Errorf("second run changed the directory:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// TestInitRedisPasswordElsewhere: -redis-password-file puts the Redis
// password in a directory of its own (the Compose stack's Redis mounts only
// that one), 0700 and 0600, and nothing of it in DIR; a second run keeps it.
func TestInitRedisPasswordElsewhere(t *testing.T) {
	dir, redisDir := filepath.Join(t.TempDir(), "secrets"), filepath.Join(t.TempDir(), "redis")
	pwFile := filepath.Join(redisDir, "password")
	out, err := runInit(t, "-dir", dir, "-redis-password-file", pwFile)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	if names := slices.Sorted(maps.Keys(readDir(t, dir))); !slices.Equal(names, []string{"clients.json", "demo.secret", "signing-key.pem"}) {
		t.Errorf("%s holds %v, want no Redis password", dir, names)
	}
	before := readDir(t, redisDir)
	if len(before) != 1 || !regexp.MustCompile(`^[A-Z2-7]{26}\n$`).MatchString(before["password"]) {
		t.Fatalf("%s holds %d files, want only the password file with 26 base32 characters", redisDir, len(before))
	}
	for path, want := range map[string]os.FileMode{redisDir: 0o700, pwFile: 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %v", path, err, want)
		}
	}
	if !strings.Contains(out, pwFile) {
		t.Errorf("stdout does not name %s:\n%s", pwFile, out)
	}

	out, err = runInit(t, "-dir", dir, "-redis-password-file", pwFile)
	if err != nil || !strings.Contains(out, "nothing to do") {
		t.Errorf("second init: %v\n%s", err, out)
	}
	if after := readDir(t, redisDir); !maps.Equal(after, before) {
		t.Error("second run changed the Redis password")
	}
}

// TestInitFeedClient: -feed-client-id adds a second client to the new
// clients file, one that may follow the revocation feed and ask for no
// scope, whose secret goes to -feed-secret-file in a directory of its own
// (the Compose stack's following consumer mounts only that one), 0700 and
// 0600, never printed; a second run keeps both.
func TestInitFeedClient(t *testing.T) {
	dir, feedDir := filepath.Join(t.TempDir(), "secrets"), filepath.Join(t.TempDir(), "feed")
	feedFile := filepath.Join(feedDir, "orders-feed.secret")
	out, err := runInit(t, "-dir", dir, "-feed-client-id", "orders-feed", "-feed-secret-file", feedFile)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	if names := slices.Sorted(maps.Keys(readDir(t, dir))); !slices.Equal(names, []string{"clients.json", "demo.secret", "redis.password", "signing-key.pem"}) {
		t.Errorf("%s holds %v, want no feed secret", dir, names)
	}
	before, secret := secretAlone(t, feedFile, out)
	clients, err := clients.Load(filepath.Join(dir, "clients.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := clients.Authenticate("orders-feed", secret, time.Now())
	if err != nil {
		t.Fatalf("the feed secret does not authenticate client orders-feed: %v", err)
	}
	if !c.MayFollowRevocations() || c.Admin || len(c.Scopes) != 0 {
		t.Errorf("feed client revocation_feed=%v admin=%v scopes %v; want the feed alone", c.RevocationFeed, c.Admin, c.Scopes)
	}
	if _, err := clients.Authenticate("demo", strings.TrimSpace(readDir(t, dir)["demo.secret"]), time.Now()); err != nil {
		t.Errorf("demo beside the feed client: %v", err)
	}

	out, err = runInit(t, "-dir", dir, "-feed-client-id", "orders-feed", "-feed-secret-file", feedFile)
	if err != nil || !strings.Contains(out, "nothing to do") {
		t.Errorf("second init: %v\n%s", err, out)
	}
	if after := readDir(t, feedDir); !maps.Equal(after, before) {
		t.Error("second run changed the feed secret")
	}
}

// TestInitServiceClient: -service-client-id adds one more client to the new
// clients file, beside the feed client, with -service-scopes and neither
// admin nor the feed, whose secret goes to -service-secret-file in a
// directory of its own (the Compose stack's first hop mounts only that
// one), 0700 and 0600, never printed; a second run keeps it.
func TestInitServiceClient(t *testing.T) {
	dir, serviceDir := filepath.Join(t.TempDir(), "secrets"), filepath.Join(t.TempDir(), "service")
	serviceFile := filepath.Join(serviceDir, "orders-service.secret")
	args := []string{"-dir", dir, "-feed-client-id", "orders-feed", "-service-client-id", "orders-service",
		"-service-scopes", "invoices:read", "-service-secret-file", serviceFile}
	out, err := runInit(t, args...)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	if names := slices.Sorted(maps.Keys(readDir(t, dir))); !slices.Equal(names, []string{"clients.json", "demo.secret", "orders-feed.secret", "redis.password", "signing-key.pem"}) {
		t.Errorf("%s holds %v, want no service secret", dir, names)
	}
	before, secret := secretAlone(t, serviceFile, out)
	if !strings.Contains(out, `client "orders-service" (scopes invoices:read)`) {
		t.Errorf("stdout does not name the service client's scopes:\n%s", out)
	}
	clients, err := clients.Load(filepath.Join(dir, "clients.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := clients.Authenticate("orders-service", secret, time.Now())
	if err != nil {
		t.Fatalf("the service secret does not authenticate client orders-service: %v", err)
	}
	if !slices.Equal(c.Scopes, []string{"invoices:read"}) || c.Admin || c.MaySetSubject || c.MayFollowRevocations() {
		t.Errorf("service client scopes %v admin=%v may_set_subject=%v revocation_feed=%v; want invoices:read alone", c.Scopes, c.Admin, c.MaySetSubject, c.RevocationFeed)
	}
	for id, file := range map[string]string{"demo": "demo.secret", "orders-feed": "orders-feed.secret"} {
		if _, err := clients.Authenticate(id, strings.TrimSpace(readDir(t, dir)[file]), time.Now()); err != nil {
			t.Errorf("%s beside the service client: %v", id, err)
		}
	}

	out, err = runInit(t, args...)
	if err != nil || !strings.Contains(out, "nothing to do") {
		t.Errorf("second init: %v\n%s", err, out)
	}
	if after := readDir(t, serviceDir); !maps.Equal(after, before) {
		t.Error("second run changed the service secret")
	}
}

// secretAlone checks that file, a secret init wrote, is alone in its
// directory, 0700 and 0600, and named but not shown by init's stdout out;
// it returns the directory's files and the secret.
func secretAlone(tb testing.TB, file, out string) (map[string]string, string) {
	tb.Helper()
	dir := filepath.Dir(file)
	files := readDir(tb, dir)
	secret := strings.TrimSpace(files[filepath.Base(file)])
	if len(files) != 1 || len(secret) < 40 {
		tb.Fatalf("%s holds %d files, want only the secret %s", dir, len(files), filepath.Base(file))
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, file: 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			tb.Errorf("%s: %v, want mode %v", path, err, want)
		}
	}
	if strings.Contains(out, secret) || !strings.Contains(out, file) {
		tb.Errorf("stdout shows the secret of %s or does not name it:\n%s", file, out)
	}
	return files, secret
}

func TestInitKeepsAnExistingFile(t *testing.T) {
	for _, tc := range []struct{ name, other string }{
		{"signing-key.pem", "clients.json"},
		{"redis.password", "signing-key.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			const mine = "operator's own\n"
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runInit(t, "-dir", dir)
			if err != nil {
				t.Fatalf("init: %v\n%s", err, out)
			}
			files := readDir(t, dir)
			if files[tc.name] != mine {
				t.Errorf("the existing %s was replaced", tc.name)
			}
			if _, ok := files[tc.other]; !ok {
				t.Errorf("%s was not written beside an existing %s", tc.other, tc.name)
			}
			if !strings.Contains(out, "kept "+path) {
				t.Errorf("stdout does not say %s was kept:\n%s", tc.name, out)
			}
		})
	}
}

func TestInitRefusesAStaleSecret(t *testing.T) {
	dir := t.TempDir()
	const stale = "old secret\n"
	if err := os.WriteFile(filepath.Join(dir, "demo.secret"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runInit(t, "-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "demo.secret exists") {
		t.Fatalf("init = %v, want an error about the stale secret\n%s", err, out)
	}
	files := readDir(t, dir)
	if files["demo.secret"] != stale {
		t.Errorf("the stale secret was replaced")
	}
	if _, ok := files["clients.json"]; ok {
		t.Errorf("clients.json written although its secret could not be")
	}
}

func TestInitRejectsBadInputBeforeWriting(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no dir", nil},
		{"extra argument", []string{"-dir", "DIR", "extra"}},
		{"bad client id", []string{"-dir", "DIR", "-client-id", "has space"}},
		{"bad scope", []string{"-dir", "DIR", "-scopes", `a,"b"`}},
		{"unknown flag", []string{"-dir", "DIR", "-admin"}},
		{"feed client as the client", []string{"-dir", "DIR", "-feed-client-id", "demo"}},
		{"bad feed client id", []string{"-dir", "DIR", "-feed-client-id", "has space"}},
		{"feed secret file alone", []string{"-dir", "DIR", "-feed-secret-file", "DIR/f.secret"}},
		{"service client without scopes", []string{"-dir", "DIR", "-service-client-id", "orders-service"}},
		{"service scopes alone", []string{"-dir", "DIR", "-service-scopes", "invoices:read"}},
		{"service secret file alone", []string{"-dir", "DIR", "-service-secret-file", "DIR/s.secret"}},
		{"service client as the client", []string{"-dir", "DIR", "-service-client-id", "demo", "-service-scopes", "invoices:read"}},
		{"service client as the feed client", []string{"-dir", "DIR", "-feed-client-id", "x", "-service-client-id", "x", "-service-scopes", "invoices:read"}},
		{"bad service client id", []string{"-dir", "DIR", "-service-client-id", "has space", "-service-scopes", "invoices:read"}},
		{"bad service scope", []string{"-dir", "DIR", "-service-client-id", "orders-service", "-service-scopes", `a,"b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "secrets")
			args := slices.Clone(tc.args)
			for i := range args {
				if args[i] == "DIR" {
					args[i] = dir
				}
			}
			if _, err := runInit(t, args...); err == nil {
				t.Fatalf("init %q succeeded, want an error", args)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("init wrote %s before rejecting its input (stat: %v)", dir, err)
			}
		})
	}
}

func TestWriteNewFileNeverReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for i, tc := range []struct {
		write       func(string, []byte) (bool, error)
		data        string
		wantCreated bool
	}{
		{writeNewFile, "first", true},
		{writeNewFile, "second", false},
		{writeExclusive, "third", false},
	} {
		created, err := tc.write(path, []byte(tc.data))
		if err != nil || created != tc.wantCreated {
			t.Fatalf("write %d = %v, %v; want %v, nil", i, created, err, tc.wantCreated)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Errorf("file = %q, want %q", b, "first")
	}
	fresh := filepath.Join(t.TempDir(), "g")
	if created, err := writeExclusive(fresh, []byte("x")); err != nil || !created {
		t.Fatalf("writeExclusive on a new path = %v, %v", created, err)
	}
	st, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("writeExclusive mode = %v, want 0600", got)
	}
}
