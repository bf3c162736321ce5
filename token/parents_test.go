package token_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/refusal"
	. "github.com/snowtoken/snowtoken/token"
)

// parentOf is the parents entry of the token raw, as an exchange writes
// it: read from the token as it validates (which costs a round trip).
func parentOf(tb testing.TB, svc *Service, raw string) jwtpolicy.Parent {
	tb.Helper()
	c := mustValidate(tb, svc, raw).Claims()
	return jwtpolicy.Parent{ID: c.ID, ClientID: c.ClientID, IssuedAt: c.IssuedAt.Unix(), Opaque: strings.HasPrefix(raw, OpaquePrefix)}
}

// exchanged is the JWT child (issued by e, with its session) signed again
// by e's key with parents: an exchanged token as the issuer would mint it.
func exchanged(tb testing.TB, e *env, child string, parents ...jwtpolicy.Parent) string {
	tb.Helper()
	c := mustValidate(tb, e.svc, child).Claims()
	c.Parents = parents
	k := e.keys.Signer()
	return signed(tb, k, map[string]any{"kid": k.ID, "typ": "at+jwt"}, c)
}

// wantParentRevoked checks that raw is refused as revoked for a parent's
// sake: ErrRevoked, ErrInvalidToken, and a client told so.
func wantParentRevoked(tb testing.TB, svc *Service, raw string) {
	tb.Helper()
	v, err := svc.Validate(tb.Context(), raw)
	if !errors.Is(err, ErrRevoked) || !errors.Is(err, ErrInvalidToken) {
		tb.Fatalf("Validate = %v, %v; want ErrRevoked and ErrInvalidToken", v, err)
	}
	if d, _ := refusal.Description(err); !strings.Contains(d, "exchanged from") {
		tb.Errorf("told %q (%v), want that a token it was exchanged from was revoked", d, err)
	}
}

// TestValidateExchanged: with no log, an exchanged token is live while it
// and every parent (a JWT's session, an opaque token's record) are, read
// in one round trip on both layouts; it is revoked when any parent is:
// revoked by jti, by its client, by the subject on the parent's own time
// (the revocation between an exchange's check and the child's minting),
// its record gone, or an opaque record of another subject. The same
// child without parents stays live throughout.
func TestValidateExchanged(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e, r, rt := countedEnv(t, cluster)
		loadScripts(t, r)
		ctx := t.Context()
		alice := IssueRequest{Subject: "alice"}

		// family is a child of gateway's and its parents, a JWT of
		// gateway's and an opaque token of ogateway's, all alice's.
		family := func() (child, plain string, jwtParent, opaqueParent Issued) {
			jwtParent, opaqueParent = e.issue(t, e.svc, "gateway", alice), e.issue(t, e.svc, "ogateway", alice)
			plain = e.issue(t, e.svc, "gateway", alice).AccessToken
			child = exchanged(t, e, plain, parentOf(t, e.svc, jwtParent.AccessToken), parentOf(t, e.svc, opaqueParent.AccessToken))
			return child, plain, jwtParent, opaqueParent
		}

		child, _, jwtParent, opaqueParent := family()
		rt.take()
		v := mustValidate(t, e.svc, child)
		wantTrips(t, rt, "an exchanged token, cold", 1)
		want := []jwtpolicy.Parent{parentOf(t, e.svc, jwtParent.AccessToken), parentOf(t, e.svc, opaqueParent.AccessToken)}
		if got := v.Claims().Parents; !reflect.DeepEqual(got, want) {
			t.Errorf("parents %+v, want %+v", got, want)
		}
		rt.take()
		mustValidate(t, e.svc, child)
		wantTrips(t, rt, "an exchanged token, cached, no log", 1)

		for _, c := range []struct {
			name   string
			revoke func(jwtParent, opaqueParent Issued)
		}{
			{"its JWT parent revoked", func(p, _ Issued) {
				if _, err := e.svc.Revoke(ctx, e.clients["gateway"], p.AccessToken); err != nil {
					t.Fatal(err)
				}
			}},
			{"its opaque parent revoked", func(_, p Issued) {
				if _, err := e.svc.Revoke(ctx, e.clients["ogateway"], p.AccessToken); err != nil {
					t.Fatal(err)
				}
			}},
			{"its parent's record gone", func(p, _ Issued) {
				if err := r.Client.Del(ctx, e.sessionKey("alice", p.ID)).Err(); err != nil {
					t.Fatal(err)
				}
			}},
			{"its opaque parent's record gone", func(_, p Issued) {
				if err := r.Client.Del(ctx, e.opaqueKey(p.ID)).Err(); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			child, plain, jwtParent, opaqueParent := family()
			c.revoke(jwtParent, opaqueParent)
			t.Run(c.name, func(t *testing.T) {
				wantParentRevoked(t, e.svc, child)
				mustValidate(t, e.svc, plain)
			})
		}

		// The subject revoked after the parent was issued and before the
		// child was: the child's own record holds the new marker.
		t.Run("the subject revoked between the parent and the child", func(t *testing.T) {
			p := e.issue(t, e.svc, "gateway", alice)
			parent := parentOf(t, e.svc, p.AccessToken)
			if err := e.svc.RevokeSubject(ctx, "alice"); err != nil {
				t.Fatal(err)
			}
			plain := e.issue(t, e.svc, "gateway", alice).AccessToken
			child := exchanged(t, e, plain, parent)
			wantParentRevoked(t, e.svc, child)
			mustValidate(t, e.svc, plain)
		})

		t.Run("an opaque parent of another subject", func(t *testing.T) {
			bobs := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "bob"})
			plain := e.issue(t, e.svc, "gateway", alice).AccessToken
			child := exchanged(t, e, plain, parentOf(t, e.svc, bobs.AccessToken))
			wantParentRevoked(t, e.svc, child)
		})

		t.Run("a parent whose client_id is no name", func(t *testing.T) {
			plain := e.issue(t, e.svc, "gateway", alice).AccessToken
			p := parentOf(t, e.svc, e.issue(t, e.svc, "gateway", alice).AccessToken)
			p.ClientID = "gate way"
			_, err := e.svc.Validate(ctx, exchanged(t, e, plain, p))
			if !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrRevoked) {
				t.Errorf("Validate: %v, want ErrInvalidToken, not ErrRevoked", err)
			}
		})
		// Last: no token of ogateway's can be issued for a while after.
		t.Run("its opaque parent's client revoked", func(t *testing.T) {
			child, plain, _, _ := family()
			if err := e.svc.RevokeClient(ctx, "ogateway"); err != nil {
				t.Fatal(err)
			}
			wantParentRevoked(t, e.svc, child)
			mustValidate(t, e.svc, plain)
		})
	})
}

// coreLog is a LocalRevocations on the revocation core's State itself,
// fresh for an hour from its making, whose horizon is an hour before: the
// issuer's rule (revocation.State.DecideLog) as a Follower, or dev mode's
// Local, decides, with this replica's revocations noted at once.
type coreLog struct {
	mu  sync.RWMutex
	st  *revocation.State
	now func() time.Time
}

func newCoreLog(tb testing.TB, now func() time.Time) *coreLog {
	tb.Helper()
	st, err := revocation.NewState(revocation.Options{Leeway: DefaultLeeway, Retention: LogRetention(DefaultMaxTTL, DefaultLeeway)},
		"0123456789abcdef0123456789abcdef.1", now().Add(-time.Hour).UnixMilli())
	if err != nil {
		tb.Fatal(err)
	}
	st.Adopt(nil, now())
	st.Heard(now(), time.Hour)
	return &coreLog{st: st, now: now}
}

func (l *coreLog) Mark() LogMark {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.Mark()
}

func (l *coreLog) Decide(now time.Time, q LogQuery) LogVerdict {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.DecideLog(now, q)
}

func (l *coreLog) TokenRevokedHere(jti string, exp int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.NoteToken(jti, exp, l.now())
}

func (l *coreLog) SubjectRevokedHere(subject string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.NoteSubject(subject, l.now())
}

func (l *coreLog) ClientRevokedHere(client string, cutoff int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.NoteClient(client, cutoff, l.now())
}

// TestValidateExchangedFromLog: with a log, an exchanged token whose
// parents the log says live validates with no Redis command at all, cold
// or hot; revoking a parent here (by jti, or its client) refuses it at
// once with none either, while the same child without parents stays
// live. Revoking the subject sends it to Redis, whose markers refuse it.
func TestValidateExchangedFromLog(t *testing.T) {
	r := redistest.New(t)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	e := newEnvOn(t, r, Options{})
	e.svc = e.newService(t, e.keys, e.ids, Options{Revocations: newCoreLog(t, e.clock.Now)})
	loadScripts(t, r)
	ctx := t.Context()
	alice := IssueRequest{Subject: "alice"}

	jwtParent, opaqueParent := e.issue(t, e.svc, "gateway", alice), e.issue(t, e.svc, "ogateway", alice)
	parents := []jwtpolicy.Parent{parentOf(t, e.svc, jwtParent.AccessToken), parentOf(t, e.svc, opaqueParent.AccessToken)}
	plain := e.issue(t, e.svc, "gateway", alice).AccessToken
	child := exchanged(t, e, plain, parents...)
	rt.take()
	for range 3 {
		mustValidate(t, e.svc, child)
	}
	wantTrips(t, rt, "an exchanged token the log says live", 0)

	if _, err := e.svc.Revoke(ctx, e.clients["gateway"], jwtParent.AccessToken); err != nil {
		t.Fatal(err)
	}
	rt.take()
	wantRevoked(t, e.svc, child)
	mustValidate(t, e.svc, plain)
	wantTrips(t, rt, "its parent revoked here", 0)

	other := exchanged(t, e, plain, parents[1])
	mustValidate(t, e.svc, other)
	if err := e.svc.RevokeClient(ctx, "ogateway"); err != nil {
		t.Fatal(err)
	}
	rt.take()
	wantRevoked(t, e.svc, other)
	mustValidate(t, e.svc, plain)
	wantTrips(t, rt, "its opaque parent's client revoked here", 0)

	// The subject: only Redis's markers tell which tokens are before it.
	p := e.issue(t, e.svc, "gateway", alice)
	parent := parentOf(t, e.svc, p.AccessToken)
	if err := e.svc.RevokeSubject(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	plain = e.issue(t, e.svc, "gateway", alice).AccessToken
	rt.take()
	wantParentRevoked(t, e.svc, exchanged(t, e, plain, parent))
	if _, names := rt.take(); len(names) == 0 {
		t.Error("the subject's revocation: no Redis command; only its markers can tell")
	}
}

// countedEnv is an env on a Redis of its own whose round trips rt
// counts, taking a Cluster's paths if cluster is set.
func countedEnv(tb testing.TB, cluster bool) (*env, *redistest.Redis, *roundTrips) {
	tb.Helper()
	r := redistest.New(tb)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	e := newEnvOn(tb, r, Options{})
	if cluster {
		e.takeClusterPaths(tb, Options{})
	}
	return e, r, rt
}

// TestValidateExchangedOpaque: an opaque exchanged token (its parents in
// its record) is revoked with its parent, whether Redis is read (no log)
// or the log decides on the cached token (the parents reach its query).
func TestValidateExchangedOpaque(t *testing.T) {
	for _, withLog := range []bool{false, true} {
		t.Run(map[bool]string{false: "no log", true: "log"}[withLog], func(t *testing.T) {
			e := newEnv(t, Options{})
			if withLog {
				e.svc = e.newService(t, e.keys, e.ids, Options{Revocations: newCoreLog(t, e.clock.Now)})
			}
			ctx := t.Context()
			parent := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
			p := parentOf(t, e.svc, parent.AccessToken)
			chain := `"parents":[{"jti":"` + p.ID + `","client_id":"gateway","iat":` + strconv.FormatInt(p.IssuedAt, 10) + `}]`
			child, err := e.svc.IssueWithChain(ctx, e.clients["ogateway"], "alice", chain, 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(child.AccessToken, OpaquePrefix) {
				t.Fatalf("ogateway's token %q is not opaque", child.AccessToken)
			}
			v := mustValidate(t, e.svc, child.AccessToken)
			if got := v.Claims().Parents; len(got) != 1 || got[0].ID != p.ID {
				t.Fatalf("parents %+v, want %s", got, p.ID)
			}
			if _, err := e.svc.Revoke(ctx, e.clients["gateway"], parent.AccessToken); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Validate(ctx, child.AccessToken); !errors.Is(err, ErrRevoked) {
				t.Fatalf("the parent revoked: Validate(child) = %v, want ErrRevoked", err)
			}
		})
	}
}
