package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/syntax"
)

// FuzzLoad feeds Load arbitrary clients files. A refusal wraps
// ErrFile; a file it accepts is exactly one JSON document of known
// fields, and every client in it is indexed with valid names and scopes.
func FuzzLoad(f *testing.F) {
	_, sum, err := NewSecret()
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
		cs, err := Load(path)
		if err != nil {
			if !errors.Is(err, ErrFile) {
				t.Fatalf("Load: %v, which is not ErrFile", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Load accepted %q, which is not one JSON document", data)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var file File
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("Load accepted %q, which does not decode strictly: %v", data, err)
		}
		if len(file.Clients) == 0 || len(cs.byID) != len(file.Clients) {
			t.Fatalf("Load indexed %d clients of %d", len(cs.byID), len(file.Clients))
		}
		for _, c := range file.Clients {
			got := cs.byID[c.ID]
			if got == nil || syntax.CheckName(c.ID) != nil || !slices.Equal(got.Scopes, c.Scopes) || got.MaxTTL < 0 {
				t.Fatalf("client %q indexed as %+v", c.ID, got)
			}
			for _, s := range c.Scopes {
				if syntax.CheckScope(s) != nil {
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
