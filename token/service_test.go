package token_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

const testIssuer = "https://issuer.test"

// waitLimit bounds a wait that must not hang; it is a deadline for a hung
// test, never a timing the test depends on.
const waitLimit = 10 * time.Second

// env is a Service on a Redis of its own, with its clients and clock.
type env struct {
	svc     *Service
	redis   *redistest.Redis
	store   *redisstore.Store
	clock   *clocktest.Clock
	keys    *keyset.Set
	ids     IDs
	clients map[string]*clients.Client
}

// newEnv returns a Service on redistest.New, signing with a new key. opts
// may set anything but Now, which is the env's clock.
func newEnv(tb testing.TB, opts Options) *env {
	tb.Helper()
	return newEnvOn(tb, redistest.New(tb), opts)
}

// newEnvOn is newEnv on the given Redis.
func newEnvOn(tb testing.TB, r *redistest.Redis, opts Options) *env {
	tb.Helper()
	ks, err := keyset.New(MustKey(tb))
	if err != nil {
		tb.Fatal(err)
	}
	gen, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 7})
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{
		redis: r,
		store: newStore(tb, r.Client, r.Prefix, false),
		clock: clocktest.New(time.Now().Truncate(time.Second)),
		keys:  ks,
		ids:   gen,
	}
	cs, err := clients.New(append([]clients.Client{
		{ID: "svc", SecretSHA256: SHA256Hex("svc"), Scopes: []string{"read", "write"}},
		{ID: "other", SecretSHA256: SHA256Hex("other"), Scopes: []string{"read"}},
		{ID: "short", SecretSHA256: SHA256Hex("short"), Scopes: []string{"read"}, MaxTTL: clients.Duration(30 * time.Minute)},
		{ID: "gateway", SecretSHA256: SHA256Hex("gateway"), Scopes: []string{"read"}, MaySetSubject: true},
		{ID: "admin", SecretSHA256: SHA256Hex("admin"), Admin: true},
	}, opaqueClients...))
	if err != nil {
		tb.Fatal(err)
	}
	e.clients = make(map[string]*clients.Client)
	for _, id := range []string{"svc", "other", "short", "gateway", "admin", "osvc", "ogateway"} {
		if e.clients[id], err = cs.Authenticate(id, id, time.Now()); err != nil {
			tb.Fatal(err)
		}
	}
	e.svc = e.newService(tb, ks, gen, opts)
	return e
}

// newStore returns a Store closed when tb ends, which takes a Cluster's
// paths on rdb if cluster is set (redisstore.Options.ClusterPaths).
func newStore(tb testing.TB, rdb redis.UniversalClient, prefix string, cluster bool) *redisstore.Store {
	tb.Helper()
	s, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix, ClusterPaths: cluster})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// newService returns another Service on the env's store and clock.
func (e *env) newService(tb testing.TB, ks *keyset.Set, ids IDs, opts Options) *Service {
	tb.Helper()
	if opts.Issuer == "" {
		opts.Issuer = testIssuer
	}
	opts.Now = e.clock.Now
	svc, err := NewService(ks, e.store, ids, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

// issue issues a token for client id or fails the test.
func (e *env) issue(tb testing.TB, svc *Service, client string, req IssueRequest) Issued {
	tb.Helper()
	c, ok := e.clients[client]
	if !ok {
		tb.Fatalf("no client %q", client)
	}
	iss, err := svc.Issue(tb.Context(), c, req)
	if err != nil {
		tb.Fatalf("Issue for %q: %v", client, err)
	}
	return iss
}

// sessionKey is the Redis key of a token's session record, as the package doc writes it.
func (e *env) sessionKey(subject string, id snowflakealg.ID) string {
	return e.redis.Prefix + "{" + subject + "}:" + id.String()
}

// mustValidate validates raw or fails the test.
func mustValidate(tb testing.TB, svc *Service, raw string) *Verified {
	tb.Helper()
	v, err := svc.Validate(tb.Context(), raw)
	if err != nil {
		tb.Fatalf("Validate: %v", err)
	}
	return v
}

// wantRevoked checks that raw fails as revoked: ErrRevoked and ErrInvalidToken.
func wantRevoked(tb testing.TB, svc *Service, raw string) {
	tb.Helper()
	v, err := svc.Validate(tb.Context(), raw)
	if !errors.Is(err, ErrRevoked) || !errors.Is(err, ErrInvalidToken) {
		tb.Fatalf("Validate = %v, %v; want ErrRevoked and ErrInvalidToken", v, err)
	}
}

// decodeSegment decodes the JSON of one base64url segment of a JWT.
func decodeSegment(tb testing.TB, raw string, i int) map[string]any {
	tb.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		tb.Fatalf("token has %d segments, want 3", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		tb.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestIssueValidateRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		audience string
	}{
		{"no audience", ""},
		{"audience", "https://api.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{Audience: tc.audience})
			now := e.clock.Now()
			iss := e.issue(t, e.svc, "svc", IssueRequest{Scope: "read"})
			if got, want := iss.ExpiresIn, DefaultTTL; got != want {
				t.Errorf("ExpiresIn = %v, want %v", got, want)
			}
			if got, want := iss.Scope, "read"; got != want {
				t.Errorf("Scope = %q, want %q", got, want)
			}

			header := decodeSegment(t, iss.AccessToken, 0)
			wantHeader := map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": e.keys.SigningKeyID()}
			if !maps.Equal(header, wantHeader) {
				t.Errorf("header = %v, want %v", header, wantHeader)
			}

			claims := decodeSegment(t, iss.AccessToken, 1)
			wantClaims := map[string]any{
				"iss": testIssuer, "sub": "svc", "client_id": "svc", "scope": "read",
				"iat": float64(now.Unix()), "exp": float64(now.Add(DefaultTTL).Unix()), "jti": iss.ID.String(),
			}
			if tc.audience != "" {
				wantClaims["aud"] = []any{tc.audience}
			}
			if len(claims) != len(wantClaims) {
				t.Errorf("claims = %v, want %v", claims, wantClaims)
			}
			for k, want := range wantClaims {
				got := claims[k]
				if gs, ok := got.([]any); ok {
					if ws, _ := want.([]any); !slices.Equal(gs, ws) {
						t.Errorf("claim %s = %v, want %v", k, got, want)
					}
					continue
				}
				if got != want {
					t.Errorf("claim %s = %v (%T), want %v (%T)", k, got, got, want, want)
				}
			}

			v := mustValidate(t, e.svc, iss.AccessToken)
			if v.ID() != iss.ID || v.Claims().ID != iss.ID.String() {
				t.Errorf("Validate: ID %v, jti %q; want %v", v.ID(), v.Claims().ID, iss.ID)
			}
			if v.Claims().Subject != "svc" || v.Claims().ClientID != "svc" || v.Claims().Issuer != testIssuer {
				t.Errorf("Validate: sub %q client_id %q iss %q", v.Claims().Subject, v.Claims().ClientID, v.Claims().Issuer)
			}
			if got, want := v.Parts().Worker, int64(7); got != want {
				t.Errorf("Validate: worker %d, want %d", got, want)
			}
			if !slices.Equal(v.Scopes(), []string{"read"}) || !v.HasScopes([]string{"read"}) || v.HasScopes([]string{"write"}) {
				t.Errorf("Validate: scopes %q, want [read]", v.Scopes())
			}
		})
	}
}

func TestIssueScopesAndSubject(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct {
		name      string
		client    string
		req       IssueRequest
		wantScope string
		wantSub   string
		wantErr   error
	}{
		{name: "all of the client's scopes", client: "svc", wantScope: "read write", wantSub: "svc"},
		{name: "a subset", client: "svc", req: IssueRequest{Scope: "write"}, wantScope: "write", wantSub: "svc"},
		{name: "repeats dropped", client: "svc", req: IssueRequest{Scope: "write read write"}, wantScope: "write read", wantSub: "svc"},
		{name: "a scope the client lacks", client: "other", req: IssueRequest{Scope: "write"}, wantErr: ErrInvalidScope},
		{name: "malformed scope", client: "svc", req: IssueRequest{Scope: "read  write"}, wantErr: ErrInvalidScope},
		{name: "own subject", client: "svc", req: IssueRequest{Subject: "svc"}, wantScope: "read write", wantSub: "svc"},
		{name: "subject without permission", client: "svc", req: IssueRequest{Subject: "alice"}, wantErr: ErrInvalidRequest},
		{name: "subject with permission", client: "gateway", req: IssueRequest{Subject: "alice"}, wantScope: "read", wantSub: "alice"},
		{name: "subject with a brace", client: "gateway", req: IssueRequest{Subject: "al{ice}"}, wantErr: ErrInvalidRequest},
		{name: "negative lifetime", client: "svc", req: IssueRequest{ExpiresIn: -time.Second}, wantErr: ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss, err := e.svc.Issue(t.Context(), e.clients[tc.client], tc.req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Issue: err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			v := mustValidate(t, e.svc, iss.AccessToken)
			if got := v.Claims().Subject; got != tc.wantSub {
				t.Errorf("sub = %q, want %q", got, tc.wantSub)
			}
			if got := v.Claims().Scope; got != tc.wantScope || iss.Scope != tc.wantScope {
				t.Errorf("scope = %q (Issued %q), want %q", got, iss.Scope, tc.wantScope)
			}
			if got := v.Claims().ClientID; got != tc.client {
				t.Errorf("client_id = %q, want %q", got, tc.client)
			}
		})
	}
}

// TestIssueTTL checks the lifetime caps, and that the Redis record lives as
// long as the token.
func TestIssueTTL(t *testing.T) {
	e := newEnv(t, Options{TTL: time.Hour, MaxTTL: 2 * time.Hour})
	for _, tc := range []struct {
		name   string
		client string
		ask    time.Duration
		want   time.Duration
	}{
		{"default", "svc", 0, time.Hour},
		{"asked, under the maximum", "svc", 90 * time.Minute, 90 * time.Minute},
		{"asked, over the maximum", "svc", 5 * time.Hour, 2 * time.Hour},
		{"client maximum caps the default", "short", 0, 30 * time.Minute},
		{"client maximum caps the asked", "short", time.Hour, 30 * time.Minute},
		{"asked, under the client maximum", "short", 10 * time.Minute, 10 * time.Minute},
		{"fractions of a second dropped", "svc", 90*time.Second + 900*time.Millisecond, 90 * time.Second},
		{"at least a second", "svc", 300 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now() // Redis counts the record's TTL down in real time
			iss := e.issue(t, e.svc, tc.client, IssueRequest{ExpiresIn: tc.ask})
			if iss.ExpiresIn != tc.want {
				t.Errorf("ExpiresIn = %v, want %v", iss.ExpiresIn, tc.want)
			}
			v := mustValidate(t, e.svc, iss.AccessToken)
			lifetime := v.Claims().ExpiresAt.Sub(v.Claims().IssuedAt.Time)
			if lifetime != tc.want {
				t.Errorf("exp - iat = %v, want %v", lifetime, tc.want)
			}
			pttl, err := e.redis.Client.PTTL(t.Context(), e.sessionKey(tc.client, iss.ID)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if d, ran := lifetime-pttl, time.Since(start); d < 0 || d >= time.Second+ran {
				t.Errorf("record PTTL = %v, want at most the token's lifetime %v and less than a second (plus the %v since the issue began) below it", pttl, lifetime, ran)
			}
		})
	}
}

// sameIDs hands out the same ID every time: a generator gone wrong.
type sameIDs struct{ id snowflakealg.ID }

func (s sameIDs) NextID(context.Context) (snowflakealg.ID, error) { return s.id, nil }

func (s sameIDs) Decompose(id snowflakealg.ID) (snowflakealg.Parts, error) {
	return id.Parts(bitsalloc.Default(), snowflakealg.DefaultEpoch)
}

func TestIssueNeverOverwritesARecord(t *testing.T) {
	e := newEnv(t, Options{})
	id, err := e.ids.NextID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	svc := e.newService(t, e.keys, sameIDs{id}, Options{})
	first := e.issue(t, svc, "svc", IssueRequest{Scope: "read", ExpiresIn: time.Hour})

	// The second record would differ in TTL; it must not replace the first.
	second, err := svc.Issue(t.Context(), e.clients["svc"], IssueRequest{Scope: "write", ExpiresIn: time.Minute})
	if !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("second Issue with the same ID = %+v, %v; want ErrDuplicateID", second, err)
	}
	if second.AccessToken != "" {
		t.Error("a failed Issue returned a token")
	}
	mustValidate(t, svc, first.AccessToken)
	pttl, err := e.redis.Client.PTTL(t.Context(), e.sessionKey("svc", id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= time.Minute {
		t.Errorf("record PTTL = %v after the failed Issue, want the first token's hour", pttl)
	}

	// The same ID for another subject is another record.
	if _, err := svc.Issue(t.Context(), e.clients["other"], IssueRequest{}); err != nil {
		t.Errorf("Issue of the same ID for another subject: %v", err)
	}
}

// failingIDs fails as a generator whose clock went backwards does.
type failingIDs struct{ sameIDs }

func (failingIDs) NextID(context.Context) (snowflakealg.ID, error) {
	return 0, &snowflakealg.RollbackError{Behind: time.Second}
}

func TestIssueIDGeneratorFails(t *testing.T) {
	e := newEnv(t, Options{})
	svc := e.newService(t, e.keys, failingIDs{}, Options{})
	_, err := svc.Issue(t.Context(), e.clients["svc"], IssueRequest{})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, snowflakealg.ErrClockRollback) {
		t.Errorf("Issue = %v, want ErrUnavailable wrapping ErrClockRollback", err)
	}
}

func TestRevoke(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct {
		name    string
		owner   string
		caller  string
		wantErr error
	}{
		{"own token", "svc", "svc", nil},
		{"another client's token", "svc", "other", ErrForbidden},
		{"admin", "svc", "admin", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss := e.issue(t, e.svc, tc.owner, IssueRequest{})
			mustValidate(t, e.svc, iss.AccessToken)
			jti, err := e.svc.Revoke(t.Context(), e.clients[tc.caller], iss.AccessToken)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Revoke: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				mustValidate(t, e.svc, iss.AccessToken)
				return
			}
			wantRevoked(t, e.svc, iss.AccessToken)
			if got, want := jti, iss.ID.String(); got != want {
				t.Errorf("Revoke returned jti %q, want %q", got, want)
			}
			// Revoking again, and revoking what is no token, are not errors (RFC 7009).
			if _, err := e.svc.Revoke(t.Context(), e.clients[tc.caller], iss.AccessToken); err != nil {
				t.Errorf("Revoke of a revoked token: %v", err)
			}
		})
	}
	if _, err := e.svc.Revoke(t.Context(), e.clients["svc"], "not.a.token"); err != nil {
		t.Errorf("Revoke of garbage: %v", err)
	}
}

func TestRevokeSubject(t *testing.T) {
	e := newEnv(t, Options{})
	var alice []Issued
	for range 3 {
		alice = append(alice, e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"}))
	}
	bob := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "bob"})
	gateway := e.issue(t, e.svc, "gateway", IssueRequest{})
	for _, iss := range append(alice, bob, gateway) {
		mustValidate(t, e.svc, iss.AccessToken)
	}

	if err := e.svc.RevokeSubject(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, iss := range alice {
		wantRevoked(t, e.svc, iss.AccessToken)
	}
	mustValidate(t, e.svc, bob.AccessToken)
	mustValidate(t, e.svc, gateway.AccessToken)

	after := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	mustValidate(t, e.svc, after.AccessToken)

	// A second revocation ends the tokens issued after the first.
	if err := e.svc.RevokeSubject(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, e.svc, after.AccessToken)
	mustValidate(t, e.svc, e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"}).AccessToken)

	// The marker outlives every record of the subject, the longest included.
	long := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice", ExpiresIn: 3 * time.Hour})
	if err := e.svc.RevokeSubject(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	marker, err := e.redis.Client.PTTL(t.Context(), e.markerKey("alice")).Result()
	if err != nil {
		t.Fatal(err)
	}
	record, err := e.redis.Client.PTTL(t.Context(), e.sessionKey("alice", long.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if marker < record+59*time.Second { // a minute more than the record, less the test's time
		t.Errorf("marker PTTL = %v, want at least the longest record's %v and a minute", marker, record)
	}

	if err := e.svc.RevokeSubject(t.Context(), "al{ice}"); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("RevokeSubject of a bad name: err = %v, want ErrInvalidRequest", err)
	}
}

func TestKeyRotation(t *testing.T) {
	e := newEnv(t, Options{})
	oldKey, newKey := MustKey(t), MustKey(t)
	oldSet, err := keyset.New(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		old  keyset.Key
	}{
		{"old key pair kept", oldKey},
		{"old public key kept", PublicOnly(t, oldKey)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rotated, err := keyset.New(newKey, tc.old)
			if err != nil {
				t.Fatal(err)
			}
			before := e.newService(t, oldSet, e.ids, Options{})
			after := e.newService(t, rotated, e.ids, Options{})

			oldToken := e.issue(t, before, "svc", IssueRequest{})
			mustValidate(t, after, oldToken.AccessToken)

			newToken := e.issue(t, after, "svc", IssueRequest{})
			if got, want := decodeSegment(t, newToken.AccessToken, 0)["kid"], newKey.ID; got != want {
				t.Errorf("kid after rotation = %v, want the new key's %v", got, want)
			}
			mustValidate(t, after, newToken.AccessToken)
			if _, err := before.Validate(t.Context(), newToken.AccessToken); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("a service without the new key validated its token: err = %v", err)
			}
		})
	}
}

// signed signs claims with k under header, bypassing Issue.
func signed(tb testing.TB, k keyset.Key, header map[string]any, claims jwt.Claims) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodEdDSA, k.Private, header, claims)
}

func TestValidateRejects(t *testing.T) {
	e := newEnv(t, Options{Audience: "https://api.test"})
	signer := e.keys.Signer()
	now := e.clock.Now()
	good := e.issue(t, e.svc, "svc", IssueRequest{})
	v := mustValidate(t, e.svc, good.AccessToken)
	claims := func(edit func(*Claims)) Claims {
		c := v.Claims()
		edit(&c)
		return c
	}
	hdr := map[string]any{"kid": signer.ID, "typ": "at+jwt"}
	parts := strings.Split(good.AccessToken, ".")

	// Every case but the first is signed by our key with a live record, so
	// only the flaw named fails it.
	for _, tc := range []struct {
		name string
		raw  string
	}{
		{"stranger's key", signed(t, MustKey(t), hdr, v.Claims())},
		{"unknown kid", signed(t, signer, map[string]any{"kid": "nope", "typ": "at+jwt"}, v.Claims())},
		{"no kid", signed(t, signer, map[string]any{"typ": "at+jwt"}, v.Claims())},
		{"typ JWT", signed(t, signer, map[string]any{"kid": signer.ID, "typ": "JWT"}, v.Claims())},
		{"no typ", signed(t, signer, map[string]any{"kid": signer.ID, "typ": nil}, v.Claims())},
		{"alg none", jwttest.Sign(t, jwt.SigningMethodNone, nil, hdr, v.Claims())},
		{"wrong issuer", signed(t, signer, hdr, claims(func(c *Claims) { c.Issuer = "https://evil.test" }))},
		{"expired", signed(t, signer, hdr, claims(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute)) }))},
		{"no exp", signed(t, signer, hdr, claims(func(c *Claims) { c.ExpiresAt = nil }))},
		{"issued in the future", signed(t, signer, hdr, claims(func(c *Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute)) }))},
		{"no client_id", signed(t, signer, hdr, claims(func(c *Claims) { c.ClientID = "" }))},
		{"jti not an id", signed(t, signer, hdr, claims(func(c *Claims) { c.ID = "x" + c.ID }))},
		{"bad scope", signed(t, signer, hdr, claims(func(c *Claims) { c.Scope = "read  write" }))},
		{"payload swapped", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin"}`)) + "." + parts[2]},
		{"signature cut", parts[0] + "." + parts[1] + "." + parts[2][:40]},
		{"too long", good.AccessToken + strings.Repeat("A", MaxTokenLen)},
		{"empty", ""},
		{"garbage", "not a token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := e.svc.Validate(t.Context(), tc.raw); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Validate = %+v, %v; want ErrInvalidToken", v, err)
			}
		})
	}

	// A token whose record was never written is not live, however well signed.
	t.Run("no record", func(t *testing.T) {
		id, err := e.ids.NextID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		raw := signed(t, signer, hdr, claims(func(c *Claims) { c.ID = id.String() }))
		wantRevoked(t, e.svc, raw)
	})
}

func TestValidateExpiry(t *testing.T) {
	e := newEnv(t, Options{Leeway: 5 * time.Second})
	iss := e.issue(t, e.svc, "svc", IssueRequest{ExpiresIn: time.Minute})
	mustValidate(t, e.svc, iss.AccessToken) // now cached

	e.clock.Add(time.Minute + 4*time.Second) // past exp, within the leeway
	mustValidate(t, e.svc, iss.AccessToken)

	e.clock.Add(time.Second) // exp + leeway: the cached entry must not outlive it
	if _, err := e.svc.Validate(t.Context(), iss.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Validate after exp + leeway: err = %v, want ErrInvalidToken", err)
	}
}

func TestValidateRedisDown(t *testing.T) {
	srv := redistest.NewServer(t)
	e := newEnv(t, Options{})
	e.store = newStore(t, srv.Client(), "", false)
	e.svc = e.newService(t, e.keys, e.ids, Options{})
	iss := e.issue(t, e.svc, "svc", IssueRequest{})
	mustValidate(t, e.svc, iss.AccessToken)

	srv.Stop()
	ctx := t.Context()
	if v, err := e.svc.Validate(ctx, iss.AccessToken); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
		t.Errorf("Validate with Redis down = %v, %v; want ErrUnavailable only", v, err)
	}
	if _, err := e.svc.Issue(ctx, e.clients["svc"], IssueRequest{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Issue with Redis down: err = %v, want ErrUnavailable", err)
	}
	if err := e.svc.Ready(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Ready with Redis down: err = %v, want ErrUnavailable", err)
	}
}

func TestCacheNeverSkipsRedis(t *testing.T) {
	e := newEnv(t, Options{})
	iss := e.issue(t, e.svc, "svc", IssueRequest{})
	mustValidate(t, e.svc, iss.AccessToken)
	sum := sha256.Sum256([]byte(iss.AccessToken))
	if e.svc.Cached(&sum, e.clock.Now()) == nil {
		t.Fatal("a validated token is not in the cache")
	}
	if _, err := e.svc.Revoke(t.Context(), e.clients["svc"], iss.AccessToken); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, e.svc, iss.AccessToken)
}

func TestCacheRejectsTamperedCopy(t *testing.T) {
	e := newEnv(t, Options{})
	iss := e.issue(t, e.svc, "svc", IssueRequest{})
	mustValidate(t, e.svc, iss.AccessToken)
	sum := sha256.Sum256([]byte(iss.AccessToken))
	if e.svc.Cached(&sum, e.clock.Now()) == nil {
		t.Fatal("a validated token is not in the cache")
	}
	parts := strings.Split(iss.AccessToken, ".")
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for _, tc := range []struct{ name, raw string }{
		{"signature", parts[0] + "." + parts[1] + "." + flip(parts[2], len(parts[2])/2)},
		{"payload", parts[0] + "." + flip(parts[1], len(parts[1])/2) + "." + parts[2]},
		{"header", flip(parts[0], len(parts[0])/2) + "." + parts[1] + "." + parts[2]},
		{"trailing byte", iss.AccessToken + "A"},
		{"padding", iss.AccessToken + "="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := e.svc.Validate(t.Context(), tc.raw); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Validate of a tampered copy = %+v, %v; want ErrInvalidToken", v, err)
			}
		})
	}
	mustValidate(t, e.svc, iss.AccessToken)
}

func TestCacheOff(t *testing.T) {
	e := newEnv(t, Options{CacheSize: CacheOff})
	if e.svc.HasCache() {
		t.Fatal("CacheSize CacheOff made a cache")
	}
	iss := e.issue(t, e.svc, "svc", IssueRequest{})
	mustValidate(t, e.svc, iss.AccessToken)
	mustValidate(t, e.svc, iss.AccessToken)
}

// TestOptionsNegative: zero means the default and off is a named value
// (CacheOff, NoLeeway); any other negative CacheSize or Leeway is an
// error, not a silent "none".
func TestOptionsNegative(t *testing.T) {
	e := newEnv(t, Options{})
	for _, opts := range []Options{
		{CacheSize: -2}, {CacheSize: -100_000}, {Leeway: -time.Second}, {Leeway: -2},
	} {
		opts.Issuer = testIssuer
		if _, err := NewService(e.keys, e.store, e.ids, opts); !errors.Is(err, ErrOptions) {
			t.Errorf("CacheSize %d, Leeway %v: err = %v, want ErrOptions", opts.CacheSize, opts.Leeway, err)
		}
	}
	for _, opts := range []Options{{}, {CacheSize: CacheOff}, {Leeway: NoLeeway}, {CacheSize: 1, Leeway: time.Second}} {
		opts.Issuer = testIssuer
		if _, err := NewService(e.keys, e.store, e.ids, opts); err != nil {
			t.Errorf("CacheSize %d, Leeway %v: %v", opts.CacheSize, opts.Leeway, err)
		}
	}
}

// seenKey is the dedupe key of the revocation of the token jti, as
// redisstore's package doc writes it.
func (e *env) seenKey(jti string) string { return e.store.LogKey() + ":r:" + jti }

// markerKey is the Redis key of a subject's revocation marker, as the package doc writes it.
func (e *env) markerKey(subject string) string {
	return e.redis.Prefix + "{" + subject + "}:gen"
}
