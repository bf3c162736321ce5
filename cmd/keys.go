package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// keysUsage is the usage of the keys subcommands.
var keysUsage = fmt.Sprintf(`usage: snowtoken keys new -out FILE
       snowtoken keys rotate -dir DIR [-max-token-ttl 24h] [-adopt FILE] [-replicas URL,URL] [-replicas-wait 5s]
       snowtoken keys list -dir DIR

A keys directory (SNOWTOKEN_SIGNING_KEYS=DIR) holds the signing keys and
keys.json, which says the state of each: next (published, not signing yet),
active (signs) or retired (verifies until its tokens have expired). Each
"keys rotate" takes one step, and is safe to run at any time (from cron):

  - it drops the retired keys whose tokens have all expired: retired at
    least -max-token-ttl plus %v (the leeway, and time for every replica
    to load the set that retired it) ago, keeping each one's key ID in
    keys.json ("dropped"), so that revoking its tokens answers 200;
  - then, if a next key has been published for %v (time for every
    replica to load it, then the JWKS max-age of %v), it makes it active
    and retires the active key;
  - else, if there is no next key, it adds one;
  - in a directory without keys.json, it creates the first key, active at
    once (or -adopt FILE's key: the key a list used to sign with).

Files are written whole (a new file renamed over the old, keeping its
owner, group and mode; a new key file takes keys.json's), the key files
before the manifest that names them, so that a replica reading the
directory at any moment sees a complete set. A rotation holds the lock
file .keys.json.lock in DIR throughout, so two at once run one after the
other. -replicas URL,URL waits until each running replica's /readyz shows
the new keys.json and warns about those that do not.
`, token.DefaultLeeway+keyset.Propagation, keyset.PublishDelay, keyset.JWKSMaxAge)

// keysStateCmd runs the keys subcommands of a keys directory: rotate, list.
func keysStateCmd(args []string, stdout io.Writer, now func() time.Time) error {
	if len(args) == 0 {
		return usageErrorf("keys", "a subcommand is required: new, rotate or list")
	}
	// Times to the second: the manifest is read by people too.
	at := now().UTC().Truncate(time.Second)
	switch args[0] {
	case "rotate":
		return keysRotateCmd(args[1:], stdout, at)
	case "list":
		return keysListCmd(args[1:], stdout, at)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, keysUsage)
		return nil
	default:
		return usageErrorf("keys", "unknown subcommand %q", args[0])
	}
}

// keysRotateCmd takes one rotation step in a keys directory (keysUsage).
func keysRotateCmd(args []string, stdout io.Writer, now time.Time) error {
	fs := newCmdFlags("keys rotate", "-dir DIR [-max-token-ttl 24h] [-adopt FILE]"+replicasSynopsis, keysUsage, stdout)
	dir := fs.String("dir", "", "the keys directory (SNOWTOKEN_SIGNING_KEYS)")
	maxTTL := fs.Duration("max-token-ttl", token.DefaultMaxTTL, "the replicas' SNOWTOKEN_MAX_TOKEN_TTL: a retired key is dropped once its tokens have expired")
	adopt := fs.String("adopt", "", "for the first key of a new directory: the PEM file of the key in use, which stays active")
	replicas := addReplicaFlags(fs)
	if err := fs.parse(args, "dir"); err != nil {
		return err
	}
	ctx := context.Background()
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	manifest := filepath.Join(*dir, keyset.ManifestFile)
	unlock, err := atomicfile.Lock(ctx, manifest)
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	defer unlock()
	m, _, err := keyset.ReadManifest(*dir)
	if errors.Is(err, os.ErrNotExist) {
		w, err := keysCreate(*dir, *adopt, stdout, now)
		if err != nil {
			return err
		}
		unlock() // the wait for the replicas holds up no other rotation
		w.report(ctx, stdout, replicas)
		return nil
	}
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	if *adopt != "" {
		return fmt.Errorf("keys rotate: -adopt is for a directory without %s", keyset.ManifestFile)
	}
	if _, err := keyset.LoadDir(*dir); err != nil {
		return fmt.Errorf("keys rotate: the set does not load; fix it first: %w", err)
	}

	var dropped []string
	m.Keys = slices.DeleteFunc(m.Keys, func(e keyset.Entry) bool {
		if e.State == keyset.Retired && !now.Before(dropTime(e, *maxTTL)) {
			dropped = append(dropped, e.File)
			// Its tombstone: a revocation of its tokens answers 200 on
			// every replica, whatever else it knows (keyset.Manifest).
			m.Dropped = append(m.Dropped, keyset.DroppedKey{Kid: e.Kid, Dropped: now})
			fmt.Fprintf(stdout, "dropped %s (kid %s): every token it signed has expired\n", e.File, e.Kid)
			return true
		}
		return false
	})
	var newFile []byte
	var newEntry keyset.Entry
	switch i := nextKey(m); {
	case i >= 0 && !now.Before(m.Keys[i].Published.Add(keyset.PublishDelay)):
		for j := range m.Keys {
			if m.Keys[j].State == keyset.Active {
				m.Keys[j].State, m.Keys[j].Retired = keyset.Retired, now
				fmt.Fprintf(stdout, "retired %s (kid %s): it verifies until %s\n", m.Keys[j].File, m.Keys[j].Kid, stamp(dropTime(m.Keys[j], *maxTTL)))
			}
		}
		m.Keys[i].State, m.Keys[i].Activated = keyset.Active, now
		fmt.Fprintf(stdout, "activated %s (kid %s): it signs from now\n", m.Keys[i].File, m.Keys[i].Kid)
	case i >= 0:
		fmt.Fprintf(stdout, "next key %s (kid %s) may sign from %s; run keys rotate again then\n",
			m.Keys[i].File, m.Keys[i].Kid, stamp(m.Keys[i].Published.Add(keyset.PublishDelay)))
		if len(dropped) == 0 {
			return nil // nothing to write
		}
	default:
		if newFile, newEntry, err = newKeyFile(keyset.Next, now); err != nil {
			return err
		}
		m.Keys = append(m.Keys, newEntry)
		fmt.Fprintf(stdout, "added %s (kid %s) as next: it may sign from %s, once every consumer has seen it\n",
			newEntry.File, newEntry.Kid, stamp(now.Add(keyset.PublishDelay)))
	}
	if newFile != nil {
		// A new key file gets the manifest's owner and group, so that
		// whoever reads the manifest reads it too, but never more than
		// SecretMode: a manifest holds nothing secret and may be 0644.
		if err := atomicfile.ReplaceSecretLike(filepath.Join(*dir, newEntry.File), newFile, manifest); err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
	}
	if err := writeManifest(*dir, m); err != nil {
		return err
	}
	w, err := manifestWritten(*dir)
	if err != nil {
		return err
	}
	for _, f := range dropped {
		if err := os.Remove(filepath.Join(*dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keys rotate: %w", err)
		}
	}
	unlock()
	w.report(ctx, stdout, replicas)
	return nil
}

// keysCreate starts the keys directory dir, which exists, with one active
// key: a new one, or the key of the PEM file adopt.
func keysCreate(dir, adopt string, stdout io.Writer, now time.Time) (*written, error) {
	pemBytes, e, err := newKeyFile(keyset.Active, now)
	if adopt != "" {
		pemBytes, e, err = adoptKeyFile(adopt, now)
	}
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Replace(filepath.Join(dir, e.File), pemBytes); err != nil {
		return nil, fmt.Errorf("keys rotate: %w", err)
	}
	if err := writeManifest(dir, keyset.Manifest{Keys: []keyset.Entry{e}}); err != nil {
		return nil, err
	}
	w, err := manifestWritten(dir)
	if err != nil {
		return nil, err
	}
	w.created = true
	fmt.Fprintf(stdout, "created %s with %s (kid %s), active\n", filepath.Join(dir, keyset.ManifestFile), e.File, e.Kid)
	return w, nil
}

// newKeyFile generates a key in state st, published (and, when active,
// activated) at now.
func newKeyFile(st keyset.State, now time.Time) ([]byte, keyset.Entry, error) {
	k, err := keyset.Generate()
	if err != nil {
		return nil, keyset.Entry{}, err
	}
	return keyFile(k, st, now)
}

// adoptKeyFile reads the private key of path as the active key of a new
// directory.
func adoptKeyFile(path string, now time.Time) ([]byte, keyset.Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, keyset.Entry{}, fmt.Errorf("keys rotate: -adopt: %w", err)
	}
	k, err := keyset.ParsePEM(data)
	if err == nil && k.Private == nil {
		err = errors.New("a public key cannot sign")
	}
	if err != nil {
		return nil, keyset.Entry{}, fmt.Errorf("keys rotate: -adopt %s: %w", path, err)
	}
	return keyFile(k, keyset.Active, now)
}

// keyFile is k's PEM and its manifest entry in state st at now. A key
// created active is activated when published: the first of its set.
func keyFile(k keyset.Key, st keyset.State, now time.Time) ([]byte, keyset.Entry, error) {
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		return nil, keyset.Entry{}, err
	}
	e := keyset.Entry{File: "key-" + k.ID + ".pem", Kid: k.ID, State: st, Published: now}
	if st == keyset.Active {
		e.Activated = now
	}
	return pemBytes, e, nil
}

// nextKey returns the index of the next key published first, or -1.
func nextKey(m keyset.Manifest) int {
	best := -1
	for i, e := range m.Keys {
		if e.State == keyset.Next && (best < 0 || e.Published.Before(m.Keys[best].Published)) {
			best = i
		}
	}
	return best
}

// dropTime is when a retired key's tokens have all expired, as the replicas
// reckon it (token.Service drops it then) with maxTTL their longest token
// lifetime and the default leeway.
func dropTime(e keyset.Entry, maxTTL time.Duration) time.Time {
	return e.Retired.Add(keyset.Propagation + maxTTL + token.DefaultLeeway)
}

// stamp writes t for an operator: RFC 3339 in UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// writeManifest writes m as dir's keys.json, keeping the file's owner,
// group and mode.
func writeManifest(dir string, m keyset.Manifest) error {
	for i := range m.Keys {
		e := &m.Keys[i]
		e.Published, e.Activated, e.Retired = e.Published.UTC(), e.Activated.UTC(), e.Retired.UTC()
	}
	for i := range m.Dropped {
		m.Dropped[i].Dropped = m.Dropped[i].Dropped.UTC()
	}
	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(filepath.Join(dir, keyset.ManifestFile), append(doc, '\n')); err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	return nil
}

// manifestWritten is dir's keys.json as a rotation wrote it, for its
// report; it is read back while the rotation still holds the lock.
func manifestWritten(dir string) (*written, error) {
	path := filepath.Join(dir, keyset.ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys rotate: %w", err)
	}
	return &written{path: path, source: "keys", taken: fileVersion(path, data)}, nil
}

// keysListCmd prints the keys of a keys directory, their states and what
// comes next for each, and whether the set loads.
func keysListCmd(args []string, stdout io.Writer, now time.Time) error {
	fs := newCmdFlags("keys list", "-dir DIR", keysUsage, stdout)
	dir := fs.String("dir", "", "the keys directory (SNOWTOKEN_SIGNING_KEYS)")
	maxTTL := fs.Duration("max-token-ttl", token.DefaultMaxTTL, "the replicas' SNOWTOKEN_MAX_TOKEN_TTL, for when retired keys are dropped")
	if err := fs.parse(args, "dir"); err != nil {
		return err
	}
	m, _, err := keyset.ReadManifest(*dir)
	if err != nil {
		return fmt.Errorf("keys list: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tSTATE\tPUBLISHED\tFILE\tNEXT")
	for _, e := range m.Keys {
		var next string
		switch e.State {
		case keyset.Next:
			at := e.Published.Add(keyset.PublishDelay)
			next = "may sign from " + stamp(at)
			if !now.Before(at) {
				next = "ready: keys rotate activates it"
			}
		case keyset.Active:
			next = "signs since " + stamp(e.Activated)
		case keyset.Retired:
			at := dropTime(e, *maxTTL)
			next = "verifies until " + stamp(at)
			if !now.Before(at) {
				next = "expired: keys rotate drops it"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kid, e.State, stamp(e.Published), e.File, next)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(m.Dropped); n > 0 {
		fmt.Fprintf(stdout, "%d dropped key IDs kept as tombstones: their tokens revoke with 200\n", n)
	}
	ks, err := keyset.LoadDir(*dir)
	if err != nil {
		return fmt.Errorf("keys list: the set does not load: %w", err)
	}
	fmt.Fprintf(stdout, "the set loads; version %s (as /readyz and snowtoken_config_info show it)\n", ks.Version())
	return nil
}

// keysCmd writes a new signing key, never over an existing file; the
// subcommands of a keys directory are keysStateCmd's.
func keysCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return keysStateCmd(args, stdout, time.Now)
	}
	fs := newCmdFlags("keys new", "-out FILE", "Write a new Ed25519 signing key (PEM), never over an existing file.", stdout)
	out := fs.String("out", "", "file to write the PEM private key to (must not exist)")
	if err := fs.parse(args[1:], "out"); err != nil {
		return err
	}
	k, err := keyset.Generate()
	if err != nil {
		return err
	}
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keys new: %w", err)
	}
	if _, err := f.Write(pemBytes); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (kid %s)\n", *out, k.ID)
	return nil
}
