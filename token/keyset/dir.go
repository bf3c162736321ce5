package keyset

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// A keys directory holds the signing keys and the manifest that says the
// state of each, the one file a rotation step rewrites (keys.json):
//
//	{"keys": [
//	  {"file": "k-20261101T0800Z.pem", "kid": "…", "state": "retired",
//	   "published": "2026-11-01T08:00:00Z", "activated": "…", "retired": "2026-11-23T06:10:00Z"},
//	  {"file": "k-20261123T0600Z.pem", "kid": "…", "state": "active",
//	   "published": "2026-11-23T06:00:00Z", "activated": "2026-11-23T06:10:00Z"},
//	  {"file": "k-20261124T0600Z.pem", "kid": "…", "state": "next",
//	   "published": "2026-11-24T06:00:00Z"}
//	 ],
//	 "dropped": [{"kid": "…", "dropped": "2026-10-02T06:00:00Z"}]}
//
// dropped keeps a tombstone of every key ID that left the set once every
// token it signed had expired (snowtoken keys rotate writes it): a token
// under such a kid, whether the key signed it or not, validates nowhere
// (the key's tokens have expired, and it verifies no other), so revoking it
// answers 200 (RFC 7009) whatever else the replica knows, and validating
// it says it has expired.
//
// The states and times live in the files the deployment mounts (a
// Kubernetes Secret, a Compose bind mount), never in Redis: they are part
// of the configuration, reviewed and rolled out with it. They are in one
// manifest rather than in each PEM file's headers because a step changes
// two keys at once (next becomes active, active becomes retired) and one
// file is replaced in one rename, so no replica ever reads a set with two
// active keys or none; and because OpenSSL refuses a PKCS #8 PEM block with
// headers. The kid in the manifest must be the key file's own, so a key
// file swapped under the manifest is refused, and the manifest alone names
// the whole set: its SHA-256 is the set's Version.

// ManifestFile is the name of the manifest in a keys directory.
const ManifestFile = "keys.json"

// Times of a rotation.
const (
	// JWKSMaxAge is how long consumers may cache the JWKS: its
	// Cache-Control max-age. Five minutes is the client package's own
	// default, keeps a consumer to one fetch per five minutes, and is short
	// enough that a rotation takes minutes.
	JWKSMaxAge = 5 * time.Minute
	// Propagation allows for every replica to load changed key files:
	// a Kubernetes kubelet takes up to about two minutes to update a
	// mounted Secret.
	Propagation = 5 * time.Minute
	// PublishDelay is how long a key must be published before it signs:
	// every replica publishes it, then every cached JWKS has expired. A key
	// activated sooner would sign tokens that a consumer holding an older
	// JWKS cannot verify.
	PublishDelay = Propagation + JWKSMaxAge
)

// Manifest is the document of ManifestFile.
type Manifest struct {
	Keys []Entry `json:"keys"`
	// Dropped are the tombstones of the keys dropped from Keys.
	Dropped []DroppedKey `json:"dropped,omitempty"`
}

// DroppedKey is the tombstone of a key dropped from a Manifest.
type DroppedKey struct {
	Kid string `json:"kid"`
	// Dropped is when it left the set. Required.
	Dropped time.Time `json:"dropped"`
}

// Entry is one key of a Manifest.
type Entry struct {
	// File is the PEM file's name in the directory.
	File string `json:"file"`
	// Kid is the key's RFC 7638 thumbprint, which the file must match.
	Kid   string `json:"kid"`
	State State  `json:"state"`
	// Published is when the key entered the set, and so the JWKS. Required.
	Published time.Time `json:"published"`
	// Activated is when the key began to sign: at least PublishDelay
	// after Published, or equal to it for a key that was the first of its
	// set (a new deployment, or the emergency replacement of a compromised
	// key, which cannot wait). Required of the active key.
	Activated time.Time `json:"activated,omitzero"`
	// Retired is when the key stopped signing. Required of a retired key.
	Retired time.Time `json:"retired,omitzero"`
}

// ReadManifest reads dir's ManifestFile strictly, as clients.Load reads
// the clients file: exact member names, no unknown or repeated ones, and
// nothing after the document. It returns the file's bytes too.
func ReadManifest(dir string) (Manifest, []byte, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	var m Manifest
	if err := jsonv2.Unmarshal(data, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Manifest{}, nil, fmt.Errorf("%w: %s: %w", ErrKey, path, err)
	}
	return m, data, nil
}

// LoadDir reads a keys directory: its manifest and every key file it
// names. The set is refused, with an error naming the file and the key,
// unless every key file parses and matches its kid, exactly one key is
// active, the active and next keys hold private keys, and the active key
// was published PublishDelay before it was activated (or is a first
// key, activated when published).
func LoadDir(dir string) (*Set, error) {
	m, data, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ManifestFile)
	keys := make([]*Member, 0, len(m.Keys))
	for i, e := range m.Keys {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: %s: key %d (%s): %w", ErrKey, path, i, e.File, err)
		}
		k, _, err := readKeyFile(filepath.Join(dir, e.File))
		if err != nil {
			return nil, err
		}
		if k.ID != e.Kid {
			return nil, fmt.Errorf("%w: %s: key %d: %s holds the key %s, not %s", ErrKey, path, i, e.File, k.ID, e.Kid)
		}
		if e.State != Retired && k.Private == nil {
			return nil, fmt.Errorf("%w: %s: key %d: %s: a %s key must be a PRIVATE KEY", ErrKey, path, i, e.File, e.State)
		}
		keys = append(keys, &Member{Key: k, State: e.State, Retired: e.Retired, Published: e.Published, Activated: e.Activated})
	}
	ks, err := fromMembers(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ks.dropped = make(map[string]bool, len(m.Dropped))
	for i, d := range m.Dropped {
		_, listed := ks.byID[d.Kid]
		switch {
		case d.Kid == "" || d.Dropped.IsZero():
			return nil, fmt.Errorf("%w: %s: dropped %d: a kid and its dropped time are required", ErrKey, path, i)
		case listed:
			return nil, fmt.Errorf("%w: %s: dropped %d: the key %s is listed in keys too", ErrKey, path, i, d.Kid)
		case ks.dropped[d.Kid]:
			return nil, fmt.Errorf("%w: %s: dropped %d: the key %s is dropped twice", ErrKey, path, i, d.Kid)
		}
		ks.dropped[d.Kid] = true
	}
	ks.dir, ks.sum = dir, sha256.Sum256(data)
	ks.version = shortSum(ks.sum[:])
	return ks, nil
}

// Current returns nil when the set is known to be current, so that a kid
// it does not hold is no key of this issuer's: the set was read from a keys
// directory, whose rotation publishes every key as next for
// PublishDelay before it signs (longer than Propagation, the time
// every replica takes to load it), and the directory's ManifestFile is now
// the very file the set was read from (its SHA-256), so that no change is
// waiting to be loaded or was refused. It reads the manifest each time:
// what it tells depends on the file now. Otherwise it says why it cannot
// tell: a plain list of key files or a set made in memory (a key could be
// added to another replica's list at any time, and signs at once), a
// manifest that changed since (a reload pending or refused), or one that
// does not read.
func (ks *Set) Current() error {
	if ks.dir == "" {
		return errors.New("the keys are not a keys directory with a manifest")
	}
	data, err := os.ReadFile(filepath.Join(ks.dir, ManifestFile))
	if err != nil {
		return err
	}
	if sha256.Sum256(data) != ks.sum {
		return fmt.Errorf("%s changed since the set in force was loaded from it: a reload is pending or was refused", ManifestFile)
	}
	return nil
}

// check checks one entry on its own.
func (e Entry) check() error {
	if e.File == "" || e.File != filepath.Base(e.File) || strings.HasPrefix(e.File, ".") {
		return fmt.Errorf("file %q must be a file name in the directory, not a path or a hidden name", e.File)
	}
	if e.Published.IsZero() {
		return fmt.Errorf("published is required")
	}
	switch e.State {
	case Next:
		if !e.Activated.IsZero() || !e.Retired.IsZero() {
			return fmt.Errorf("a next key has no activated or retired time")
		}
	case Active:
		if e.Activated.IsZero() || !e.Retired.IsZero() {
			return fmt.Errorf("an active key has an activated time and no retired time")
		}
		if !e.Activated.Equal(e.Published) && e.Activated.Before(e.Published.Add(PublishDelay)) {
			return fmt.Errorf("activated at %s, less than %v after it was published (%s): consumers holding an older JWKS would reject its tokens; "+
				"keep it next until %s (snowtoken keys rotate does)", e.Activated.Format(time.RFC3339), PublishDelay,
				e.Published.Format(time.RFC3339), e.Published.Add(PublishDelay).Format(time.RFC3339))
		}
	case Retired:
		if e.Retired.IsZero() {
			return fmt.Errorf("a retired key needs its retired time")
		}
		if e.Retired.Before(e.Published) {
			return fmt.Errorf("retired before it was published")
		}
	default:
		return fmt.Errorf("state %q, want next, active or retired", e.State)
	}
	return nil
}
