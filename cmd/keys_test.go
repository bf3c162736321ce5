package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// rotateAt runs `keys rotate` in dir at now and returns its output.
func rotateAt(tb testing.TB, dir string, now time.Time, flags ...string) string {
	tb.Helper()
	var out bytes.Buffer
	if err := keysStateCmd(append([]string{"rotate", "-dir", dir}, flags...), &out, func() time.Time { return now }); err != nil {
		tb.Fatalf("keys rotate at %s: %v\n%s", now, err, out.String())
	}
	return out.String()
}

// keyStates loads dir and returns its keys' states by kid.
func keyStates(tb testing.TB, dir string) map[string]keyset.State {
	tb.Helper()
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		tb.Fatalf("the directory keys rotate wrote does not load: %v", err)
	}
	out := map[string]keyset.State{}
	for _, k := range ks.Keys() {
		out[k.Kid] = k.State
	}
	return out
}

// TestKeysRotate walks a keys directory through a whole rotation on an
// injected clock: create, add next, wait (nothing changes), activate (the
// old key retired), then drop the old key once its tokens have expired.
// Every set written loads, and every file is 0600 with no temporary left.
func TestKeysRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	t0 := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	const maxTTL = time.Hour

	rotateAt(t, dir, t0)
	states := keyStates(t, dir)
	if len(states) != 1 {
		t.Fatalf("a new directory has %d keys, want 1 active", len(states))
	}
	var first string
	for kid := range states {
		first = kid
	}

	if out := rotateAt(t, dir, t0.Add(time.Minute)); !strings.Contains(out, "added") {
		t.Errorf("second step printed %q, want a next key added", out)
	}
	var next string
	for kid, st := range keyStates(t, dir) {
		if st == keyset.Next {
			next = kid
		}
	}
	if next == "" {
		t.Fatal("no next key after the second step")
	}

	manifest := filepath.Join(dir, keyset.ManifestFile)
	before, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	early := t0.Add(time.Minute + keyset.PublishDelay - time.Second)
	if out := rotateAt(t, dir, early, "-max-token-ttl", maxTTL.String()); !strings.Contains(out, "may sign from") {
		t.Errorf("a step before the publish delay printed %q, want when the next key may sign", out)
	}
	if after, _ := os.ReadFile(manifest); !bytes.Equal(before, after) {
		t.Errorf("a step before the publish delay changed %s:\n%s", keyset.ManifestFile, after)
	}

	promoted := early.Add(time.Second)
	rotateAt(t, dir, promoted, "-max-token-ttl", maxTTL.String())
	if got := keyStates(t, dir); got[next] != keyset.Active || got[first] != keyset.Retired {
		t.Fatalf("after the publish delay: states %v, want %s active and %s retired", got, next, first)
	}

	// The following step adds the next key of the following rotation; the
	// retired key stays until its tokens have expired.
	drop := promoted.Add(keyset.Propagation + maxTTL + token.DefaultLeeway)
	rotateAt(t, dir, drop.Add(-time.Second), "-max-token-ttl", maxTTL.String())
	if got := keyStates(t, dir); got[first] != keyset.Retired || len(got) != 3 {
		t.Fatalf("before the retired key's tokens expired: states %v, want it retired among 3", got)
	}
	out := rotateAt(t, dir, drop, "-max-token-ttl", maxTTL.String())
	if got := keyStates(t, dir); len(got) != 2 || got[first] != "" {
		t.Errorf("once its tokens expired: states %v, want the retired key dropped (%s)", got, out)
	}
	m, _, err := keyset.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Dropped) != 1 || m.Dropped[0].Kid != first || !m.Dropped[0].Dropped.Equal(drop) {
		t.Errorf("tombstones %+v, want the dropped key %s at %s", m.Dropped, first, drop)
	}
	if ks, err := keyset.LoadDir(dir); err != nil || !ks.Dropped(first) {
		t.Errorf("the set does not know the dropped key's tombstone (%v)", err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 || entries[0].Name() != ".keys.json.lock" {
		t.Errorf("%d files in the directory, want keys.json, 2 keys and the lock file: %v", len(entries), entries)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || strings.Contains(e.Name(), ".tmp") {
			t.Errorf("%s: mode %v, want 0600 and no temporary file", e.Name(), fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory's mode is %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

// TestKeysRotateAdopt starts a keys directory from the key a list signed
// with, which stays active, and refuses -adopt where a manifest exists.
func TestKeysRotateAdopt(t *testing.T) {
	tmp := t.TempDir()
	k := keysettest.MustKey(t)
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(tmp, "signing.pem")
	if err := os.WriteFile(old, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dir := filepath.Join(tmp, "keys")
	rotateAt(t, dir, time.Now(), "-adopt", old)
	if got := keyStates(t, dir); len(got) != 1 || got[k.ID] != keyset.Active {
		t.Errorf("after -adopt: states %v, want %s alone and active", got, k.ID)
	}
	err = keysStateCmd([]string{"rotate", "-dir", dir, "-adopt", old}, &out, time.Now)
	if err == nil || !strings.Contains(err.Error(), "-adopt") {
		t.Errorf("-adopt with a manifest: err = %v, want it refused", err)
	}
}

// TestKeysRotateRefusesBrokenSet leaves a directory whose set does not
// load as it is, and says why.
func TestKeysRotateRefusesBrokenSet(t *testing.T) {
	dir := t.TempDir()
	rotateAt(t, dir, time.Now())
	manifest := filepath.Join(dir, keyset.ManifestFile)
	if err := os.WriteFile(manifest, []byte(`{"keys": [], "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := keysStateCmd([]string{"rotate", "-dir", dir}, &out, time.Now)
	if err == nil || !strings.Contains(err.Error(), keyset.ManifestFile) {
		t.Errorf("keys rotate on a broken manifest: err = %v, want one naming %s", err, keyset.ManifestFile)
	}
	if got, _ := os.ReadFile(manifest); string(got) != `{"keys": [], "extra": 1}` {
		t.Errorf("keys rotate rewrote a manifest it could not read: %s", got)
	}
}

// TestKeysHelp: every keys subcommand answers -h with its usage and no
// error (exit 0); an unknown one is an error.
func TestKeysHelp(t *testing.T) {
	for _, args := range [][]string{{"keys", "-h"}, {"keys", "new", "-h"}, {"keys", "rotate", "-h"}, {"keys", "list", "-h"}} {
		var out, stderr bytes.Buffer
		if code := ExitCode(Run(t.Context(), args, nil, &out), &stderr); code != 0 || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", args, code, stderr.String())
		}
		if !strings.Contains(out.String(), "-") || out.Len() < 40 {
			t.Errorf("%v printed %q, want its usage", args, out.String())
		}
	}
	for _, args := range [][]string{{"keys"}, {"keys", "spin"}, {"keys", "rotate"}, {"keys", "list", "-dir", t.TempDir()}} {
		if err := Run(t.Context(), args, nil, new(bytes.Buffer)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestKeysList prints each key with its state and next step, and the
// set's version.
func TestKeysList(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	rotateAt(t, dir, now)
	rotateAt(t, dir, now)
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := keysStateCmd([]string{"list", "-dir", dir}, &out, func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"active", "next", "may sign from", ks.Version()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("keys list printed:\n%s\nwant %q in it", out.String(), want)
		}
	}
}

// TestKeysRotateKeyNeverWorldReadable: a new private key takes the
// manifest's owner and group but never its read bit for others (a manifest
// holds nothing secret and may be 0644).
func TestKeysRotateKeyNeverWorldReadable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	t0 := time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)
	rotateAt(t, dir, t0)
	manifest := filepath.Join(dir, keyset.ManifestFile)
	if err := os.Chmod(manifest, 0o664); err != nil {
		t.Fatal(err)
	}
	before := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		before[e.Name()] = true
	}
	rotateAt(t, dir, t0.Add(time.Minute))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	added := 0
	for _, e := range entries {
		if before[e.Name()] || !strings.HasSuffix(e.Name(), ".pem") {
			continue
		}
		added++
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o640 {
			t.Errorf("new key %s: mode %v beside a 0664 manifest, want 0640", e.Name(), got)
		}
	}
	if added != 1 {
		t.Fatalf("the second step added %d key files, want 1", added)
	}
}
