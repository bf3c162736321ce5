package token_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// The opaque clients of every env: "osvc" is svc, "ogateway" is gateway,
// each with token_format opaque.
var opaqueClients = []clients.Client{
	{ID: "osvc", SecretSHA256: SHA256Hex("osvc"), Scopes: []string{"read", "write"}, TokenFormat: FormatOpaque},
	{ID: "ogateway", SecretSHA256: SHA256Hex("ogateway"), Scopes: []string{"read"}, MaySetSubject: true, TokenFormat: FormatOpaque},
}

// newOpaqueEnv is newEnv whose store takes a Cluster's paths (two round
// trips) on its single Redis if cluster is set.
func newOpaqueEnv(tb testing.TB, opts Options, cluster bool) *env {
	tb.Helper()
	e := newEnv(tb, opts)
	if cluster {
		e.takeClusterPaths(tb, opts)
	}
	return e
}

// takeClusterPaths gives e a store on its Redis that takes a Cluster's
// paths, and a service with opts on it.
func (e *env) takeClusterPaths(tb testing.TB, opts Options) {
	tb.Helper()
	e.store = newStore(tb, e.redis.Client, e.redis.Prefix, true)
	e.svc = e.newService(tb, e.keys, e.ids, opts)
}

// forLayouts runs test on a single Redis's paths and on a Cluster's.
func forLayouts(t *testing.T, test func(t *testing.T, cluster bool)) {
	for _, cluster := range []bool{false, true} {
		name := "single"
		if cluster {
			name = "cluster paths"
		}
		t.Run(name, func(t *testing.T) { test(t, cluster) })
	}
}

// opaqueKey is the Redis key of an opaque token's record, as the package doc writes it.
func (e *env) opaqueKey(id snowflakealg.ID) string { return e.redis.Prefix + "o:" + id.String() }

func TestOpaqueRoundTrip(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{Audience: "https://api.test"}, cluster)
		now := e.clock.Now()
		start := time.Now() // Redis counts the record's TTL down in real time
		iss := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice", ExpiresIn: 10 * time.Minute})
		raw := iss.AccessToken
		if len(raw) != 35 || !strings.HasPrefix(raw, "st_") || strings.Contains(raw, ".") {
			t.Fatalf("opaque token %q: want st_ and 32 base64url characters", raw)
		}
		b, err := base64.RawURLEncoding.DecodeString(raw[3:])
		if err != nil || len(b) != 24 {
			t.Fatalf("opaque token %q decodes to %d bytes, %v; want 24", raw, len(b), err)
		}
		if got := snowflakealg.ID(uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
			uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])); got != iss.ID {
			t.Errorf("the token's first 8 bytes are ID %v, want %v", got, iss.ID)
		}
		if got, want := iss.Scope, "read"; got != want || iss.ExpiresIn != 10*time.Minute {
			t.Errorf("Issued scope %q, lifetime %v; want %q, 10m", got, iss.ExpiresIn, want)
		}

		v := mustValidate(t, e.svc, raw)
		want := Claims{RegisteredClaims: jwt.RegisteredClaims{
			Issuer: testIssuer, Subject: "alice", Audience: jwt.ClaimStrings{"https://api.test"}, ID: iss.ID.String(),
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(10 * time.Minute)),
		}, ClientID: "ogateway", Scope: "read"}
		got := v.Claims()
		if got.Issuer != want.Issuer || got.Subject != want.Subject || !slices.Equal(got.Audience, want.Audience) ||
			got.ID != want.ID || !got.IssuedAt.Equal(want.IssuedAt.Time) || !got.ExpiresAt.Equal(want.ExpiresAt.Time) ||
			got.ClientID != want.ClientID || got.Scope != want.Scope {
			t.Errorf("claims = %+v, want %+v", got, want)
		}
		if v.ID() != iss.ID || v.Parts().Worker != 7 || !slices.Equal(v.Scopes(), []string{"read"}) {
			t.Errorf("Verified: ID %v, worker %d, scopes %q; want %v, 7, [read]", v.ID(), v.Parts().Worker, v.Scopes(), iss.ID)
		}

		// The record: under o:<jti>, living as long as the token, holding the
		// secret's hash and never the secret; the subject's marker outlives it.
		ctx := t.Context()
		rec, err := e.redis.Client.Get(ctx, e.opaqueKey(iss.ID)).Result()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b[8:])
		if !strings.Contains(rec, string(sum[:])) || strings.Contains(rec, string(b[8:])) {
			t.Errorf("record %q: want the secret's SHA-256 and not the secret", rec)
		}
		marker, err := e.redis.Client.PTTL(ctx, e.markerKey("alice")).Result() // first: both count down
		if err != nil {
			t.Fatal(err)
		}
		pttl, err := e.redis.Client.PTTL(ctx, e.opaqueKey(iss.ID)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d, ran := 10*time.Minute-pttl, time.Since(start); d < 0 || d >= time.Second+ran {
			t.Errorf("record PTTL = %v, want at most 10m and less than a second (plus the %v since the issue began) below it", pttl, ran)
		}
		// The marker gets a minute more than the record, in one script or
		// on a Cluster's two round trips, so that a record set a moment
		// later never outlives it.
		if least := pttl + 59*time.Second; marker < least {
			t.Errorf("marker PTTL = %v; want at least %v (the record's %v and a minute, less the test's time)", marker, least, pttl)
		}
	})
}

// TestOpaqueNoAudience: a token without aud reads back without one.
func TestOpaqueNoAudience(t *testing.T) {
	e := newOpaqueEnv(t, Options{}, false)
	v := mustValidate(t, e.svc, e.issue(t, e.svc, "osvc", IssueRequest{}).AccessToken)
	if v.Claims().Audience != nil || v.Claims().Scope != "read write" || v.Claims().Subject != "osvc" {
		t.Errorf("claims = %+v, want no aud, scope read write, sub osvc", v.Claims())
	}
}

// flipChar changes the character at i to another of the base64url alphabet.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestOpaqueValidateRejects(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		iss := e.issue(t, e.svc, "osvc", IssueRequest{})
		raw := iss.AccessToken
		id, secret, err := ParseOpaque(raw)
		if err != nil {
			t.Fatal(err)
		}
		otherSecret := secret
		otherSecret[0] ^= 1
		next, err := e.ids.NextID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// The ID is the first 11 characters after st_ (8 bytes, 64 bits of 66),
		// the secret the last 21.
		for _, tc := range []struct{ name, raw string }{
			{"ID part changed", flipChar(raw, 3+5)},
			{"the character across ID and secret changed", flipChar(raw, 3+10)},
			{"secret part changed", flipChar(raw, 3+20)},
			{"last character changed", flipChar(raw, len(raw)-1)},
			{"wrong secret", FormatOpaqueToken(id, otherSecret)},
			{"zero secret", FormatOpaqueToken(id, [OpaqueSecretLen]byte{})},
			{"a guessed ID, our secret", FormatOpaqueToken(next, secret)},
			{"trailing character", raw + "A"},
			{"padding", raw + "="},
			{"one character short", raw[:len(raw)-1]},
			{"standard base64", strings.NewReplacer("-", "+", "_", "/").Replace(raw[:3]) + strings.Repeat("+", 32)},
			{"prefix in capitals", "ST_" + raw[3:]},
			{"prefix alone", "st_"},
			{"space inside", raw[:10] + " " + raw[11:]},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if v, err := e.svc.Validate(t.Context(), tc.raw); !errors.Is(err, ErrInvalidToken) {
					t.Errorf("Validate(%q) = %+v, %v; want ErrInvalidToken", tc.raw, v, err)
				}
			})
		}
		mustValidate(t, e.svc, raw)

		// A wrong secret is told as no session: the answer does not tell
		// whether an ID (predictable) has one.
		_, wrong := e.svc.Validate(t.Context(), FormatOpaqueToken(id, otherSecret))
		_, none := e.svc.Validate(t.Context(), FormatOpaqueToken(next, secret))
		if wrong == nil || none == nil || wrong.Error() != none.Error() {
			t.Errorf("wrong secret: %v; no record: %v; want the same error", wrong, none)
		}
	})
}

func TestOpaqueRevoke(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		for _, tc := range []struct {
			name, owner, caller string
			wantErr             error
		}{
			{"own token", "osvc", "osvc", nil},
			{"another client's token", "osvc", "svc", ErrForbidden},
			{"admin", "osvc", "admin", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				iss := e.issue(t, e.svc, tc.owner, IssueRequest{})
				jti, err := e.svc.Revoke(ctx, e.clients[tc.caller], iss.AccessToken)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Revoke: %v, want %v", err, tc.wantErr)
				}
				if tc.wantErr != nil {
					mustValidate(t, e.svc, iss.AccessToken)
					return
				}
				wantRevoked(t, e.svc, iss.AccessToken)
				if jti != iss.ID.String() {
					t.Errorf("Revoke returned jti %q, want %q", jti, iss.ID)
				}
				if jti, err := e.svc.Revoke(ctx, e.clients[tc.caller], iss.AccessToken); err != nil || jti != "" {
					t.Errorf("Revoke of a revoked token: %q, %v; want \"\", nil", jti, err)
				}
			})
		}
		// A guessed ID revokes nothing: the secret must match first.
		t.Run("wrong secret", func(t *testing.T) {
			iss := e.issue(t, e.svc, "osvc", IssueRequest{})
			id, secret, err := ParseOpaque(iss.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			secret[len(secret)-1] ^= 0x80
			for _, caller := range []string{"osvc", "admin"} {
				if jti, err := e.svc.Revoke(ctx, e.clients[caller], FormatOpaqueToken(id, secret)); err != nil || jti != "" {
					t.Errorf("Revoke by %s with a wrong secret: %q, %v; want \"\", nil (RFC 7009)", caller, jti, err)
				}
			}
			mustValidate(t, e.svc, iss.AccessToken)
		})
		for _, garbage := range []string{"st_", "st_" + strings.Repeat("!", 32), "st_" + strings.Repeat("A", 32)} {
			if jti, err := e.svc.Revoke(ctx, e.clients["admin"], garbage); err != nil || jti != "" {
				t.Errorf("Revoke(%q): %q, %v; want \"\", nil", garbage, jti, err)
			}
		}
	})
}

// TestOpaqueRevokeSubjectAndClient: one subject revocation ends its tokens
// of both formats; a client revocation ends the client's opaque tokens.
func TestOpaqueRevokeSubjectAndClient(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 8, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		svc := e.newService(t, e.keys, ids, Options{})
		opaque := e.issue(t, svc, "ogateway", IssueRequest{Subject: "alice"}).AccessToken
		jwt := e.issue(t, svc, "gateway", IssueRequest{Subject: "alice"}).AccessToken
		bob := e.issue(t, svc, "ogateway", IssueRequest{Subject: "bob"}).AccessToken
		if err := svc.RevokeSubject(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, svc, opaque)
		wantRevoked(t, svc, jwt)
		mustValidate(t, svc, bob)
		after := e.issue(t, svc, "ogateway", IssueRequest{Subject: "alice"}).AccessToken
		mustValidate(t, svc, after)

		other := e.issue(t, svc, "osvc", IssueRequest{}).AccessToken
		if err := svc.RevokeClient(ctx, "ogateway"); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, svc, bob)
		wantRevoked(t, svc, after)
		mustValidate(t, svc, other)
		e.clock.Add(DefaultLeeway + time.Millisecond)
		mustValidate(t, svc, e.issue(t, svc, "ogateway", IssueRequest{Subject: "alice"}).AccessToken)
	})
}

// TestOpaqueKeyLoss: what happens when each key of an opaque token
// disappears, or holds what no issuer writes, as the package doc says: it
// fails closed every time.
func TestOpaqueKeyLoss(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		for _, tc := range []struct {
			name    string
			damage  func(t *testing.T, iss Issued)
			wantErr error
		}{
			{"record lost", func(t *testing.T, iss Issued) {
				if err := e.redis.Client.Del(ctx, e.opaqueKey(iss.ID)).Err(); err != nil {
					t.Fatal(err)
				}
			}, ErrRevoked},
			{"marker lost", func(t *testing.T, iss Issued) {
				if err := e.redis.Client.Del(ctx, e.markerKey("carol")).Err(); err != nil {
					t.Fatal(err)
				}
			}, ErrMarkerLost},
			{"record of another version", func(t *testing.T, iss Issued) { editRecord(t, e, iss, func(r string) string { return "2" + r[1:] }) }, ErrInvalidToken},
			{"record cut short", func(t *testing.T, iss Issued) { editRecord(t, e, iss, func(r string) string { return r[:40] }) }, ErrInvalidToken},
			{"record with a brace in sub", func(t *testing.T, iss Issued) {
				editRecord(t, e, iss, func(r string) string { return strings.Replace(r, "\ncarol\n", "\nca{rol\n", 1) })
			}, ErrInvalidToken},
			{"record's exp not a number", func(t *testing.T, iss Issued) {
				editRecord(t, e, iss, func(r string) string { return strings.Replace(r, "\nread\n", "x\nread\n", 1) })
			}, ErrInvalidToken},
		} {
			t.Run(tc.name, func(t *testing.T) {
				iss := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "carol"})
				mustValidate(t, e.svc, iss.AccessToken)
				tc.damage(t, iss)
				if v, err := e.svc.Validate(ctx, iss.AccessToken); !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrInvalidToken) {
					t.Errorf("Validate = %+v, %v; want ErrInvalidToken wrapping %v", v, err, tc.wantErr)
				}
				// A new token after the loss is valid.
				mustValidate(t, e.svc, e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "carol"}).AccessToken)
			})
		}
		t.Run("client key unreadable", func(t *testing.T) {
			iss := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "carol"})
			other := e.issue(t, e.svc, "osvc", IssueRequest{})
			if err := e.redis.Client.Set(ctx, e.redis.Prefix+"client:{ogateway}", "not a time", 0).Err(); err != nil {
				t.Fatal(err)
			}
			wantRevoked(t, e.svc, iss.AccessToken)
			mustValidate(t, e.svc, other.AccessToken)
		})
	})
}

// editRecord rewrites the record of iss with edit, keeping its TTL.
func editRecord(t *testing.T, e *env, iss Issued, edit func(string) string) {
	t.Helper()
	key := e.opaqueKey(iss.ID)
	rec, err := e.redis.Client.Get(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.Set(t.Context(), key, edit(rec), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestOpaqueExpiry(t *testing.T) {
	e := newOpaqueEnv(t, Options{Leeway: 5 * time.Second}, false)
	iss := e.issue(t, e.svc, "osvc", IssueRequest{ExpiresIn: time.Minute})
	mustValidate(t, e.svc, iss.AccessToken)
	e.clock.Add(time.Minute + 4*time.Second) // past exp, within the leeway
	mustValidate(t, e.svc, iss.AccessToken)
	e.clock.Add(time.Second)
	_, err := e.svc.Validate(t.Context(), iss.AccessToken)
	if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("Validate after exp + leeway: %v, want ErrInvalidToken wrapping jwt.ErrTokenExpired", err)
	}
	// A client hears what it hears of an expired JWT, not golang-jwt's words.
	if d, _ := refusal.Description(err); d != "the token has expired" {
		t.Errorf("description %q, want %q", d, "the token has expired")
	}
	if e.redis.Mini != nil { // and Redis drops the record at exp
		e.redis.Mini.FastForward(time.Minute)
		e.clock.Add(-2 * time.Minute)
		wantRevoked(t, e.svc, iss.AccessToken)
	}
}

// TestOpaqueRedisDown: issue, validate and revoke fail closed with
// ErrUnavailable, never a pass, never "invalid".
func TestOpaqueRedisDown(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		srv := redistest.NewServer(t)
		e := newOpaqueEnv(t, Options{}, cluster)
		e.store = newStore(t, srv.Client(), "", cluster)
		e.svc = e.newService(t, e.keys, e.ids, Options{})
		iss := e.issue(t, e.svc, "osvc", IssueRequest{})
		mustValidate(t, e.svc, iss.AccessToken)

		srv.Stop()
		ctx := t.Context()
		if v, err := e.svc.Validate(ctx, iss.AccessToken); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
			t.Errorf("Validate with Redis down = %v, %v; want ErrUnavailable only", v, err)
		}
		if _, err := e.svc.Issue(ctx, e.clients["osvc"], IssueRequest{}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Issue with Redis down: %v, want ErrUnavailable", err)
		}
		if _, err := e.svc.Revoke(ctx, e.clients["osvc"], iss.AccessToken); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Revoke with Redis down: %v, want ErrUnavailable", err)
		}
	})
}

func TestOpaqueIssueNeverOverwritesARecord(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		id, err := e.ids.NextID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		svc := e.newService(t, e.keys, sameIDs{id}, Options{})
		first := e.issue(t, svc, "osvc", IssueRequest{Scope: "read"})
		if _, err := svc.Issue(t.Context(), e.clients["ogateway"], IssueRequest{Subject: "alice"}); !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("second Issue with the same ID: %v, want ErrDuplicateID", err)
		}
		if v := mustValidate(t, svc, first.AccessToken); v.Claims().Subject != "osvc" || v.Claims().Scope != "read" {
			t.Errorf("the first token now reads %+v", v.Claims())
		}
	})
}

func TestLoadClientsTokenFormat(t *testing.T) {
	good := SHA256Hex("secret")
	for _, tc := range []struct{ format, want string }{{"", ""}, {`"jwt"`, FormatJWT}, {`"opaque"`, FormatOpaque}} {
		field := ""
		if tc.format != "" {
			field = `, "token_format": ` + tc.format
		}
		cs, err := clients.Load(WriteFile(t, "clients.json", []byte(`{"clients": [{"id": "svc", "secret_sha256": "`+good+`"`+field+`}]}`)))
		if err != nil {
			t.Fatalf("token_format %s: %v", tc.format, err)
		}
		if got := byID(cs, "svc").TokenFormat; got != tc.want {
			t.Errorf("token_format %s read as %q, want %q", tc.format, got, tc.want)
		}
	}
	for _, bad := range []string{`"JWT"`, `"opaq"`, `" opaque"`, `1`, `["opaque"]`} {
		_, err := clients.Load(WriteFile(t, "clients.json", []byte(`{"clients": [{"id": "svc", "secret_sha256": "`+good+`"}, {"id": "gw", "secret_sha256": "`+good+`", "token_format": `+bad+`}]}`)))
		if !errors.Is(err, clients.ErrFile) || !strings.Contains(err.Error(), `"gw"`) || !strings.Contains(err.Error(), "token_format") {
			t.Errorf("token_format %s: %v, want clients.ErrFile naming client \"gw\" and token_format", bad, err)
		}
	}
}

// byID is the client id of cs, or nil.
func byID(cs *clients.Registry, id string) *clients.Client {
	c, _ := cs.Lookup(id)
	return c
}
