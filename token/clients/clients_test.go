package clients

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/syntax"
)

func TestLoad(t *testing.T) {
	path := WriteFile(t, "clients.json", []byte(`{"clients": [
		{"id": "svc", "secret_sha256": "`+SHA256Hex("svc-secret")+`", "scopes": ["read", "write"]},
		{"id": "gateway.prod@eu-1", "secret_sha256": "`+strings.ToUpper(SHA256Hex("gw-secret"))+`", "scopes": ["read"],
		 "may_set_subject": true, "may_introspect": true, "max_ttl": "90m", "admin": true,
		 "audiences": ["orders-api", "https://billing.test/api"],
		 "description": "the EU gateway – Zürich", "owner": "platform@example.com",
		 "secret_expires": "2027-03-01T00:00:00Z",
		 "previous_secret_sha256": "`+SHA256Hex("gw-old")+`", "previous_secret_expires": "2026-11-24T08:30:00+01:00"}
	]}`))
	cs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gw := cs.byID["gateway.prod@eu-1"]
	if got, want := gw.Description, "the EU gateway – Zürich"; got != want {
		t.Errorf("description %q, want %q", got, want)
	}
	if got, want := gw.Owner, "platform@example.com"; got != want {
		t.Errorf("owner %q, want %q", got, want)
	}
	if got, want := gw.SecretExpires, time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("secret_expires %v, want %v", got, want)
	}
	if got, want := gw.PreviousSecretExpires, time.Date(2026, 11, 24, 7, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("previous_secret_expires %v, want %v", got, want)
	}
	if _, err := cs.Authenticate(gw.ID, "gw-old", time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)); err != nil {
		t.Errorf("the previous secret before its expiry: %v", err)
	}
	for _, tc := range []struct {
		id, secret string
		want       Client
	}{
		{"svc", "svc-secret", Client{ID: "svc", Scopes: []string{"read", "write"}}},
		{"gateway.prod@eu-1", "gw-secret", Client{
			ID: "gateway.prod@eu-1", Scopes: []string{"read"}, MaySetSubject: true, MayIntrospect: true,
			MaxTTL: Duration(90 * time.Minute), Admin: true, Audiences: []string{"orders-api", "https://billing.test/api"},
		}},
	} {
		c, err := cs.Authenticate(tc.id, tc.secret, time.Now())
		if err != nil {
			t.Fatalf("Authenticate(%q): %v", tc.id, err)
		}
		if c.ID != tc.want.ID || !slices.Equal(c.Scopes, tc.want.Scopes) || c.MaySetSubject != tc.want.MaySetSubject ||
			c.MayIntrospect != tc.want.MayIntrospect || c.MaxTTL != tc.want.MaxTTL || c.Admin != tc.want.Admin ||
			!slices.Equal(c.Audiences, tc.want.Audiences) {
			t.Errorf("client %q = %+v, want %+v", tc.id, *c, tc.want)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	good := SHA256Hex("secret")
	for _, tc := range []struct {
		name, file string
	}{
		{"unknown field", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "scopes": ["a"], "admn": true}]}`},
		{"unknown top-level field", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `"}], "extra": 1}`},
		{"bad hex", `{"clients": [{"id": "svc", "secret_sha256": "` + strings.Repeat("zz", 32) + `"}]}`},
		{"short hash", `{"clients": [{"id": "svc", "secret_sha256": "` + good[:62] + `"}]}`},
		{"no hash", `{"clients": [{"id": "svc"}]}`},
		{"duplicate id", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `"}, {"id": "svc", "secret_sha256": "` + good + `"}]}`},
		{"id with a brace", `{"clients": [{"id": "svc{x}", "secret_sha256": "` + good + `"}]}`},
		{"id with a space", `{"clients": [{"id": "svc x", "secret_sha256": "` + good + `"}]}`},
		{"empty id", `{"clients": [{"id": "", "secret_sha256": "` + good + `"}]}`},
		{"id too long", `{"clients": [{"id": "` + strings.Repeat("a", syntax.MaxNameLen+1) + `", "secret_sha256": "` + good + `"}]}`},
		{"empty list", `{"clients": []}`},
		{"no list", `{}`},
		{"bad max_ttl", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "max_ttl": "soon"}]}`},
		{"numeric max_ttl", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "max_ttl": 3600}]}`},
		{"negative max_ttl", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "max_ttl": "-1h"}]}`},
		{"bad scope", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "scopes": ["a b"]}]}`},
		{"audience with a space", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "audiences": ["orders api"]}]}`},
		{"empty audience", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "audiences": [""]}]}`},
		{"audience too long", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "audiences": ["` + strings.Repeat("a", syntax.MaxAudienceLen+1) + `"]}]}`},
		{"audience twice", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "audiences": ["a", "b", "a"]}]}`},
		{"audiences not a list", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `", "audiences": "a"}]}`},
		{"not JSON", `clients: svc`},
		{"a second document", `{"clients": [{"id": "svc", "secret_sha256": "` + good + `"}]} {"clients": []}`},
		{"invalid UTF-8", "{\"clients\": [{\"id\": \"svc\", \"secret_sha256\": \"" + good + "\", \"scopes\": [\"a\xff\"]}]}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := Load(WriteFile(t, "clients.json", []byte(tc.file)))
			if !errors.Is(err, ErrFile) {
				t.Errorf("Load: clients %v, err = %v, want ErrFile", cs, err)
			}
		})
	}
	// The fields of secret rotation, expiry, description and owner: the
	// error names the client and the field.
	other := SHA256Hex("other")
	for _, tc := range []struct {
		name, fields, want string
	}{
		{"previous secret without its expiry", `"previous_secret_sha256": "` + other + `"`, "previous_secret_expires"},
		{"previous expiry without a secret", `"previous_secret_expires": "2026-12-01T00:00:00Z"`, "previous_secret_sha256"},
		{"previous secret not hex", `"previous_secret_sha256": "` + strings.Repeat("zz", 32) + `", "previous_secret_expires": "2026-12-01T00:00:00Z"`, "previous_secret_sha256"},
		{"previous secret short", `"previous_secret_sha256": "` + other[:62] + `", "previous_secret_expires": "2026-12-01T00:00:00Z"`, "previous_secret_sha256"},
		{"previous secret the current one", `"previous_secret_sha256": "` + good + `", "previous_secret_expires": "2026-12-01T00:00:00Z"`, "previous_secret_sha256"},
		{"previous expiry not RFC 3339", `"previous_secret_sha256": "` + other + `", "previous_secret_expires": "tomorrow"`, "previous_secret_expires"},
		{"secret_expires a date alone", `"secret_expires": "2027-01-01"`, "secret_expires"},
		{"secret_expires without a zone", `"secret_expires": "2027-01-01T00:00:00"`, "secret_expires"},
		{"secret_expires a number", `"secret_expires": 1798761600`, "secret_expires"},
		{"description of two lines", `"description": "a\nb"`, "description"},
		{"description with a tab", `"description": "a\tb"`, "description"},
		{"description too long", `"description": "` + strings.Repeat("d", maxDescriptionLen+1) + `"`, "description"},
		{"owner with an escape", `"owner": "\u001b[31mroot"`, "owner"},
		{"owner with a right-to-left override", `"owner": "team\u202Etxt.exe"`, "owner"},
		{"description with a zero-width space", `"description": "a\u200Bb"`, "description"},
		{"owner too long", `"owner": "` + strings.Repeat("o", maxOwnerLen+1) + `"`, "owner"},
		{"impersonation without token_exchange", `"impersonation": true`, "impersonation needs token_exchange"},
		{"token_exchange a string", `"token_exchange": "yes"`, "token_exchange"},
		{"subject_token_issuers without token_exchange", `"subject_token_issuers": [{"issuer": "https://k8s.example"}]`, "subject_token_issuers needs token_exchange"},
		{"subject token issuer over http", `"token_exchange": true, "subject_token_issuers": [{"issuer": "http://k8s.example"}]`, "subject_token_issuers 0"},
		{"subject token issuer at the metadata address", `"token_exchange": true, "subject_token_issuers": [{"issuer": "https://k8s.example", "jwks_uri": "https://169.254.169.254/jwks"}]`, "jwks_uri"},
		{"subject token issuer twice", `"token_exchange": true, "subject_token_issuers": [{"issuer": "https://a.example"}, {"issuer": "https://a.example", "jwks_uri": "https://a.example/k"}]`, "listed twice"},
		{"subject token issuer with a subject", `"token_exchange": true, "subject_token_issuers": [{"issuer": "https://k8s.example", "subject": "x"}]`, "subject"},
		{"subject token issuers past the bound", `"token_exchange": true, "subject_token_issuers": [` + issuerList(MaxSubjectTokenIssuers+1) + `]`, "at most"},
		{"owner a list", `"owner": ["a"]`, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := `{"clients": [{"id": "ok", "secret_sha256": "` + good + `"}, {"id": "svc", "secret_sha256": "` + good + `", ` + tc.fields + `}]}`
			cs, err := Load(WriteFile(t, "clients.json", []byte(file)))
			if !errors.Is(err, ErrFile) {
				t.Fatalf("Load: clients %v, err = %v, want ErrFile", cs, err)
			}
			for _, want := range []string{`"svc"`, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Load: err = %q, want it to name %s", err, want)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "clients.json")
		_, err := Load(missing)
		if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), missing) {
			t.Errorf("Load: err = %v, want ErrFile naming %s", err, missing)
		}
	})
}

// issuerList is n subject token issuers' entries, each its own.
func issuerList(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"issuer": "https://k8s-%d.example"}`, i)
	}
	return strings.Join(out, ", ")
}

// TestLoadSubjectTokenIssuers: a client that may exchange lists the
// issuers of the JWTs it may exchange, read as written.
func TestLoadSubjectTokenIssuers(t *testing.T) {
	cs, err := Load(WriteFile(t, "clients.json", []byte(`{"clients": [{"id": "svc", "secret_sha256": "`+SHA256Hex("s")+`",
		"token_exchange": true, "subject_token_issuers": [{"issuer": "https://kubernetes.default.svc.cluster.local",
		"jwks_uri": "https://kubernetes.default.svc/openid/v1/jwks"}, {"issuer": "https://token.actions.example"}]}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cs.Lookup("svc")
	want := []clientauth.TrustedIssuer{{Issuer: "https://kubernetes.default.svc.cluster.local", JWKSURI: "https://kubernetes.default.svc/openid/v1/jwks"},
		{Issuer: "https://token.actions.example"}}
	if !slices.Equal(c.SubjectTokenIssuers, want) {
		t.Errorf("SubjectTokenIssuers = %+v, want %+v", c.SubjectTokenIssuers, want)
	}
}

// TestLoadOneMeaning refuses a clients file whose keys a reader such
// as jq could read otherwise than the issuer: keys in another case, and a key
// given twice. The error names the client and the key.
func TestLoadOneMeaning(t *testing.T) {
	good := SHA256Hex("secret")
	svc := `{"id": "svc", "secret_sha256": "` + good + `", "scopes": ["a"]}`
	for _, tc := range []struct {
		name, file string
		want       []string // what the error must name
	}{
		{"admin in capitals after admin false", `{"clients": [` + svc + `, {"id": "gw", "secret_sha256": "` + good + `", "admin": false, "ADMIN": true}]}`,
			[]string{`client 1 ("gw")`, `"ADMIN"`}},
		{"admin twice", `{"clients": [{"id": "gw", "secret_sha256": "` + good + `", "admin": false, "admin": true}]}`,
			[]string{`client 0 ("gw")`, `"admin"`}},
		{"id twice", `{"clients": [` + svc + `, {"id": "gw", "secret_sha256": "` + good + `", "id": "svc"}]}`,
			[]string{`client 1 ("gw")`, `"id"`}},
		{"scopes in another case", `{"clients": [{"id": "gw", "secret_sha256": "` + good + `", "Scopes": ["a"]}]}`,
			[]string{`client 0 ("gw")`, `"Scopes"`}},
		{"max_ttl in another case", `{"clients": [{"id": "gw", "secret_sha256": "` + good + `", "Max_TTL": "1h"}]}`,
			[]string{`client 0 ("gw")`, `"Max_TTL"`}},
		{"clients in capitals", `{"Clients": [` + svc + `]}`, []string{`"Clients"`}},
		{"clients twice", `{"clients": [` + svc + `], "clients": []}`, []string{`"clients"`}},
		{"a bad value", `{"clients": [` + svc + `, {"id": "gw", "secret_sha256": "` + good + `", "admin": "yes"}]}`,
			[]string{`client 1 ("gw")`, `"admin"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := WriteFile(t, "clients.json", []byte(tc.file))
			cs, err := Load(path)
			if !errors.Is(err, ErrFile) {
				t.Fatalf("Load: clients %v, err = %v, want ErrFile", cs, err)
			}
			for _, want := range append(tc.want, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Load: err = %q, want it to name %s", err, want)
				}
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	secret, sum, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := New([]Client{
		{ID: "svc", SecretSHA256: sum, Scopes: []string{"read"}},
		{ID: "other", SecretSHA256: SHA256Hex("other-secret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, secret string
		wantErr          error
	}{
		{"right secret", "svc", secret, nil},
		{"wrong secret", "svc", secret + "x", ErrInvalidClient},
		{"another client's secret", "svc", "other-secret", ErrInvalidClient},
		{"empty secret", "svc", "", ErrInvalidClient},
		{"unknown id", "nobody", secret, ErrInvalidClient},
		{"empty id", "", "", ErrInvalidClient},
		{"the hash as the secret", "svc", sum, ErrInvalidClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cs.Authenticate(tc.id, tc.secret, time.Now())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Authenticate(%q): err = %v, want %v", tc.id, err, tc.wantErr)
			}
			if tc.wantErr == nil && c.ID != tc.id {
				t.Errorf("Authenticate(%q) = client %q", tc.id, c.ID)
			}
			if tc.wantErr != nil && c != nil {
				t.Errorf("Authenticate(%q) failed but returned client %q", tc.id, c.ID)
			}
		})
	}
}

// TestAuthenticateSecretRotation: a client holds a current and a previous
// secret; each works until its own expiry, and never after, to the second.
// A right secret past its expiry is refused saying so; a wrong one is not
// told anything of the kind.
func TestAuthenticateSecretRotation(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	previousExpires, currentExpires := base.Add(24*time.Hour), base.Add(90*24*time.Hour)
	cs, err := New([]Client{
		{ID: "rotating", SecretSHA256: SHA256Hex("new"), SecretExpires: currentExpires,
			PreviousSecretSHA256: SHA256Hex("old"), PreviousSecretExpires: previousExpires},
		{ID: "plain", SecretSHA256: SHA256Hex("plain")},
		{ID: "off", SecretSHA256: SHA256Hex("off-new"), PreviousSecretSHA256: SHA256Hex("off-old"),
			PreviousSecretExpires: previousExpires, Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, secret string
		at               time.Time
		wantErr          error // nil, ErrInvalidClient or errSecretExpired
	}{
		{"new secret", "rotating", "new", base, nil},
		{"old secret before its expiry", "rotating", "old", base, nil},
		{"old secret a second before its expiry", "rotating", "old", previousExpires.Add(-time.Second), nil},
		{"old secret at its expiry", "rotating", "old", previousExpires, errSecretExpired},
		{"old secret after its expiry", "rotating", "old", previousExpires.Add(time.Hour), errSecretExpired},
		{"new secret after the old one's expiry", "rotating", "new", previousExpires.Add(time.Hour), nil},
		{"new secret a second before its expiry", "rotating", "new", currentExpires.Add(-time.Second), nil},
		{"new secret at its expiry", "rotating", "new", currentExpires, errSecretExpired},
		{"wrong secret", "rotating", "neither", base, ErrInvalidClient},
		{"wrong secret after both expiries", "rotating", "neither", currentExpires.Add(time.Hour), ErrInvalidClient},
		{"another client's secret", "rotating", "plain", base, ErrInvalidClient},
		{"no expiry, years on", "plain", "plain", base.AddDate(30, 0, 0), nil},
		{"disabled, new secret", "off", "off-new", base, ErrInvalidClient},
		{"disabled, old secret", "off", "off-old", base, ErrInvalidClient},
		{"unknown id", "nobody", "new", base, ErrInvalidClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cs.Authenticate(tc.id, tc.secret, tc.at)
			if tc.wantErr == nil {
				if err != nil || c.ID != tc.id {
					t.Fatalf("Authenticate(%q, %q) at %v = %v, %v; want the client", tc.id, tc.secret, tc.at, c, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidClient) || c != nil {
				t.Fatalf("Authenticate(%q, %q) at %v = %v, %v; want ErrInvalidClient", tc.id, tc.secret, tc.at, c, err)
			}
			if expired := err == errSecretExpired; expired != (tc.wantErr == errSecretExpired) {
				t.Errorf("Authenticate(%q, %q) at %v: err = %q, want %q", tc.id, tc.secret, tc.at, err, tc.wantErr)
			}
		})
	}
}

// TestSecretExpiry: the expiry of the secret that authenticated a client
// is that of its current secret or of its previous one, whichever it is,
// and none for a client whose secrets do not expire.
func TestSecretExpiry(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	previousExpires, currentExpires := base.Add(24*time.Hour), base.Add(90*24*time.Hour)
	cs, err := New([]Client{
		{ID: "rotating", SecretSHA256: SHA256Hex("new"), SecretExpires: currentExpires,
			PreviousSecretSHA256: SHA256Hex("old"), PreviousSecretExpires: previousExpires},
		{ID: "overlap", SecretSHA256: SHA256Hex("new"), PreviousSecretSHA256: SHA256Hex("old"), PreviousSecretExpires: previousExpires},
		{ID: "plain", SecretSHA256: SHA256Hex("plain")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, secret string
		want       time.Time
	}{
		{"rotating", "new", currentExpires},
		{"rotating", "old", previousExpires},
		{"overlap", "new", time.Time{}},
		{"overlap", "old", previousExpires},
		{"plain", "plain", time.Time{}},
	} {
		c, err := cs.Authenticate(tc.id, tc.secret, base)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.SecretExpiry(tc.secret); !got.Equal(tc.want) {
			t.Errorf("%s with %q: SecretExpiry %v, want %v", tc.id, tc.secret, got, tc.want)
		}
	}
}

func TestNewSecret(t *testing.T) {
	secret, sum, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sum, SHA256Hex(secret); got != want {
		t.Errorf("hash = %s, want SHA-256 of the secret %s", got, want)
	}
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil {
		t.Fatalf("secret %q is not base64url: %v", secret, err)
	}
	if got, want := len(raw), 32; got != want {
		t.Errorf("secret has %d random bytes, want %d", got, want)
	}
	again, _, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if again == secret {
		t.Error("two secrets are equal")
	}
}

func TestClientHasScopes(t *testing.T) {
	c := &Client{Scopes: []string{"read", "write"}}
	for _, tc := range []struct {
		want []string
		ok   bool
	}{
		{nil, true},
		{[]string{"read"}, true},
		{[]string{"write", "read"}, true},
		{[]string{"admin"}, false},
		{[]string{"read", "admin"}, false},
	} {
		if got := c.HasScopes(tc.want); got != tc.ok {
			t.Errorf("HasScopes(%q) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

// TestMayFollowRevocations checks the clients file's revocation_feed: a
// client with it may follow the feed, an admin may without it, any other
// client may not.
func TestMayFollowRevocations(t *testing.T) {
	path := WriteFile(t, "clients.json", []byte(`{"clients": [
		{"id": "api", "secret_sha256": "`+SHA256Hex("a")+`", "scopes": [], "revocation_feed": true},
		{"id": "ops", "secret_sha256": "`+SHA256Hex("o")+`", "scopes": [], "admin": true},
		{"id": "svc", "secret_sha256": "`+SHA256Hex("s")+`", "scopes": ["read"]}
	]}`))
	cs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"api": true, "ops": true, "svc": false} {
		if got := cs.byID[id].MayFollowRevocations(); got != want {
			t.Errorf("%s: MayFollowRevocations() = %v, want %v", id, got, want)
		}
	}
}

// TestRegistryDropped: the clients a new set removes or disables, and only
// those enabled before.
func TestRegistryDropped(t *testing.T) {
	mk := func(cs ...Client) *Registry {
		for i := range cs {
			cs[i].SecretSHA256 = SHA256Hex(cs[i].ID)
		}
		c, err := New(cs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := mk(Client{ID: "a"}, Client{ID: "b"}, Client{ID: "c", Disabled: true}, Client{ID: "d"})
	after := mk(Client{ID: "a"}, Client{ID: "b", Disabled: true}, Client{ID: "c"})
	if got := before.Dropped(after); !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("Dropped = %v, want [b d]", got)
	}
	if got := after.Dropped(after); len(got) != 0 {
		t.Errorf("Dropped of the same set = %v, want none", got)
	}
}

// TestRegistryKeysChanged: the clients whose fetched keys a reload drops:
// those with a jwks_uri, a workload identity or subject token issuers
// that the new set removes or changes in any way (keys_refreshed alone
// too); never one with inline keys or a secret alone, nor one left as it
// was.
func TestRegistryKeysChanged(t *testing.T) {
	uri := func(id, u string) Client {
		return Client{ID: id, TokenEndpointAuthMethod: AuthPrivateKeyJWT, JWKSURI: u}
	}
	workload := func(id, sub string) Client {
		return Client{ID: id, WorkloadIdentity: &clientauth.WorkloadIdentity{TrustedIssuer: clientauth.TrustedIssuer{Issuer: "https://k8s.example"}, Subject: sub}}
	}
	exchanging := func(id, iss string) Client {
		return Client{ID: id, SecretSHA256: SHA256Hex("s"), TokenExchange: true, SubjectTokenIssuers: []clientauth.TrustedIssuer{{Issuer: iss}}}
	}
	mk := func(cs ...Client) *Registry {
		c, err := New(cs)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	refreshed := uri("refreshed", "https://keys.example/r")
	refreshed.KeysRefreshed = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	scoped := uri("scoped", "https://keys.example/s")
	scoped.Scopes = []string{"a"}
	before := mk(uri("same", "https://keys.example/same"), uri("moved", "https://keys.example/m"), uri("refreshed", "https://keys.example/r"),
		uri("scoped", "https://keys.example/s"), uri("removed", "https://keys.example/x"), workload("wl", "system:serviceaccount:a:b"),
		workload("wl-same", "s"), Client{ID: "inline", TokenEndpointAuthMethod: AuthPrivateKeyJWT, JWKS: json.RawMessage(testJWKS)},
		Client{ID: "secret", SecretSHA256: SHA256Hex("s")}, exchanging("exchanging", "https://a.example"), exchanging("exchanging-same", "https://a.example"))
	after := mk(uri("same", "https://keys.example/same"), uri("moved", "https://keys.example/m2"), refreshed, scoped,
		workload("wl", "system:serviceaccount:a:c"), workload("wl-same", "s"),
		Client{ID: "inline", TokenEndpointAuthMethod: AuthPrivateKeyJWT, JWKS: json.RawMessage(testJWKS), Scopes: []string{"b"}},
		Client{ID: "secret", SecretSHA256: SHA256Hex("t")}, exchanging("exchanging", "https://b.example"), exchanging("exchanging-same", "https://a.example"))
	var got []string
	for _, reg := range before.KeysChanged(after) {
		got = append(got, reg.ClientID+" "+reg.JWKSURI)
	}
	want := []string{"exchanging ", "moved https://keys.example/m", "refreshed https://keys.example/r", "removed https://keys.example/x",
		"scoped https://keys.example/s", "wl "}
	if !slices.Equal(got, want) {
		t.Errorf("KeysChanged = %q, want %q (the registrations before)", got, want)
	}
	if got := after.KeysChanged(after); len(got) != 0 {
		t.Errorf("KeysChanged of the same set = %v, want none", got)
	}
}
