package token

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// FuzzLoadClients feeds LoadClients arbitrary clients files. A refusal wraps
// ErrClientsFile; a file it accepts is exactly one JSON document of known
// fields, and every client in it is indexed with valid names and scopes.
func FuzzLoadClients(f *testing.F) {
	_, sum, err := NewClientSecret()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"clients":[{"id":"gateway","secret_sha256":"` + sum + `","scopes":["orders:read"],"may_set_subject":true,"max_ttl":"1h","admin":false}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","scopes":[]},{"id":"b","secret_sha256":"` + sum + `","scopes":["x"]}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","scopes":["x"],"admn":true}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","scopes":["x"]}]} {"clients":[]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","max_ttl":"-1h"}]}`,
		`{"clients":[{"id":"a{b}","secret_sha256":"` + sum + `"}]}`,
		`{"clients":[]}`, `{}`, `null`, ``, `[`, `{"clients":[{"id":"a","secret_sha256":"zz"}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","secret_expires":"2027-01-01T00:00:00Z","description":"d","owner":"o",` +
			`"previous_secret_sha256":"` + emptySHA256 + `","previous_secret_expires":"2026-12-01T00:00:00+01:00"}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","previous_secret_sha256":"` + emptySHA256 + `"}]}`,
		`{"clients":[{"id":"a","secret_sha256":"` + sum + `","secret_expires":"2027-01-01"}]}`,
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "clients.json") // one per fuzz worker process, which runs inputs one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cs, err := LoadClients(path)
		if err != nil {
			if !errors.Is(err, ErrClientsFile) {
				t.Fatalf("LoadClients: %v, which is not ErrClientsFile", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("LoadClients accepted %q, which is not one JSON document", data)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var file ClientsFile
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("LoadClients accepted %q, which does not decode strictly: %v", data, err)
		}
		if len(file.Clients) == 0 || len(cs.byID) != len(file.Clients) {
			t.Fatalf("LoadClients indexed %d clients of %d", len(cs.byID), len(file.Clients))
		}
		for _, c := range file.Clients {
			got := cs.byID[c.ID]
			if got == nil || CheckName(c.ID) != nil || !slices.Equal(got.Scopes, c.Scopes) || got.MaxTTL < 0 {
				t.Fatalf("client %q indexed as %+v", c.ID, got)
			}
			for _, s := range c.Scopes {
				if checkScopeToken(s) != nil {
					t.Fatalf("client %q accepted with scope %q", c.ID, s)
				}
			}
			if _, err := cs.Authenticate(c.ID, "", time.Now()); err == nil && c.SecretSHA256 != emptySHA256 && c.PreviousSecretSHA256 != emptySHA256 {
				t.Fatalf("client %q authenticated with an empty secret", c.ID)
			}
			if c.PreviousSecretSHA256 != "" && c.PreviousSecretExpires.IsZero() {
				t.Fatalf("client %q accepted with a previous secret that never expires", c.ID)
			}
			if !got.SecretExpires.Equal(c.SecretExpires) || !got.PreviousSecretExpires.Equal(c.PreviousSecretExpires) {
				t.Fatalf("client %q: expiries %v, %v; encoding/json reads %v, %v", c.ID,
					got.SecretExpires, got.PreviousSecretExpires, c.SecretExpires, c.PreviousSecretExpires)
			}
			if checkText(c.Description, maxDescriptionLen) != nil || checkText(c.Owner, maxOwnerLen) != nil {
				t.Fatalf("client %q accepted with description %q, owner %q", c.ID, c.Description, c.Owner)
			}
		}
	})
}

// emptySHA256 is the SHA-256 of the empty string, in hex.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// FuzzParseKeyPEM feeds ParseKeyPEM arbitrary bytes. A refusal wraps ErrKey;
// a key it accepts is an Ed25519 key whose kid is its thumbprint, whose
// private half (if any) signs what the public half verifies, and which
// survives MarshalPEM and ParseKeyPEM unchanged.
func FuzzParseKeyPEM(f *testing.F) {
	k := MustKey(f)
	priv, err := k.MarshalPEM()
	if err != nil {
		f.Fatal(err)
	}
	pub, err := Key{ID: k.ID, Public: k.Public}.MarshalPEM()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{priv, pub, append([]byte("junk\n"), priv...), append(pub, priv...), priv[:len(priv)/2]} {
		f.Add(s)
	}
	for _, s := range otherPEMs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeyPEM(data)
		if err != nil {
			if !errors.Is(err, ErrKey) {
				t.Fatalf("ParseKeyPEM: %v, which is not ErrKey", err)
			}
			return
		}
		if len(k.Public) != ed25519.PublicKeySize || k.ID != Thumbprint(k.Public) {
			t.Fatalf("key %q with a %d-byte public key", k.ID, len(k.Public))
		}
		if k.Private != nil {
			if !k.Public.Equal(k.Private.Public()) {
				t.Fatal("the public key is not the private key's")
			}
			msg := []byte("snowtoken")
			if !ed25519.Verify(k.Public, msg, ed25519.Sign(k.Private, msg)) {
				t.Fatal("the private key signs what the public key does not verify")
			}
		}
		out, err := k.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseKeyPEM(out)
		if err != nil || back.ID != k.ID || !back.Public.Equal(k.Public) || !bytes.Equal(back.Private, k.Private) {
			t.Fatalf("MarshalPEM and ParseKeyPEM: %+v, %v; want %+v", back, err, k)
		}
	})
}
