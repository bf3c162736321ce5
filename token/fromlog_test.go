package token_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// logStandIn is a Revocations whose state the test sets: a stand-in for
// revlog.Follower, which imports this package. It keeps the contract's
// rules in the small: LogUnknown while not fresh; LogRevoked for a jti it
// was told of; LogLive for a token checked at a mark no older than its
// subject's last entry; else LogUnknown. It records every query.
type logStandIn struct {
	mu       sync.Mutex
	fresh    bool
	mark     LogMark
	tokens   map[string]bool
	subjects map[string]LogMark // the mark at the subject's last entry
	queries  []LogQuery
}

func newLogStandIn() *logStandIn {
	return &logStandIn{fresh: true, mark: 1, tokens: map[string]bool{}, subjects: map[string]LogMark{}}
}

func (l *logStandIn) Mark() LogMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mark
}

func (l *logStandIn) Decide(_ time.Time, q LogQuery) LogVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, q)
	switch {
	case !l.fresh:
		return LogUnknown
	case l.tokens[q.JTI]:
		return LogRevoked
	case q.Checked != 0 && q.Checked >= l.subjects[q.Subject]:
		return LogLive
	}
	return LogUnknown
}

// apply moves the mark on, as an entry applied does.
func (l *logStandIn) apply() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark++
}

func (l *logStandIn) set(f func(l *logStandIn)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l)
}

// last is the last query Decide was asked.
func (l *logStandIn) last(tb testing.TB) LogQuery {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queries) == 0 {
		tb.Fatal("Decide was not asked")
	}
	return l.queries[len(l.queries)-1]
}

// beforeSend calls f before each command or pipeline a Redis client sends:
// an entry that the follower applies while a check is on its way.
type beforeSend struct{ f func() }

func (b beforeSend) DialHook(next redis.DialHook) redis.DialHook { return next }
func (b beforeSend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { b.f(); return next(ctx, cmd) }
}
func (b beforeSend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { b.f(); return next(ctx, cmds) }
}

// logEnv is an env whose service decides from log, with rt counting what
// its Redis client sends and every send moving log's mark on.
func logEnv(t *testing.T, log Revocations) (*env, *roundTrips) {
	t.Helper()
	r := redistest.New(t)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	e := newEnvOn(t, r, Options{Revocations: log})
	if l, ok := log.(*logStandIn); ok {
		r.Client.AddHook(beforeSend{l.apply})
	}
	loadScripts(t, r)
	return e, rt
}

// loadScripts loads the scripts of validation and revocation, so that
// their first EVALSHA is not a NOSCRIPT and a second round trip.
func loadScripts(tb testing.TB, r *redistest.Redis) {
	tb.Helper()
	if err := redisstore.LoadScripts(tb.Context(), r.Client); err != nil {
		tb.Fatal(err)
	}
}

// wantTrips checks that rt counted n round trips since the last take.
func wantTrips(tb testing.TB, rt *roundTrips, what string, n int) {
	tb.Helper()
	if got, names := rt.take(); got != n {
		tb.Errorf("%s: %d Redis round trips %v, want %d", what, got, names, n)
	}
}

// wantStats checks the service's LogStats.
func wantStats(tb testing.TB, svc *Service, want LogStats) {
	tb.Helper()
	if got := svc.LogStats(); got != want {
		tb.Errorf("LogStats %+v, want %+v", got, want)
	}
}

// TestValidateFromLog: with Options.Revocations, a JWT the log cannot tell
// of is checked in Redis, and the mark taken before the check (not after:
// an entry applied meanwhile is not vouched for) is what the next Decide
// gets, which then decides in memory: no Redis command for a live token,
// none for a revoked one, refused as Redis refuses (ErrInvalidToken,
// ErrRevoked). A token Redis found revoked stays refused with no command,
// whatever the log says later (its follower may not have applied the
// entry). LogStats counts each way, across WithKeys copies.
func TestValidateFromLog(t *testing.T) {
	log := newLogStandIn()
	e, rt := logEnv(t, log)
	ctx := t.Context()
	iss := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	rt.take()

	before := log.Mark()
	v := mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "unknown", 1)
	q := log.last(t)
	if want := (LogQuery{JTI: iss.ID.String(), Subject: "alice", Client: "gateway", Issued: v.Parts().Time.UnixMilli()}); !reflect.DeepEqual(q, want) {
		t.Errorf("first query %+v, want %+v", q, want)
	}
	if log.Mark() == before {
		t.Fatal("the stand-in's mark did not move with the check")
	}

	if got := mustValidate(t, e.svc, iss.AccessToken); got != v {
		t.Errorf("a token decided from the log is not the cached one")
	}
	wantTrips(t, rt, "live", 0)
	if q := log.last(t); q.Checked != before {
		t.Errorf("second query checked at %d, want %d: the mark taken before the Redis check", q.Checked, before)
	}
	wantStats(t, e.svc, LogStats{Live: 1, Unknown: 1})

	// An entry of the subject after the mark: Redis again, a new mark.
	log.set(func(l *logStandIn) { l.subjects["alice"] = l.mark })
	mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "subject entry after the mark", 1)
	mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "checked again", 0)

	log.set(func(l *logStandIn) { l.tokens[iss.ID.String()] = true })
	wantRevoked(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "revoked", 0)

	// Revoked here: refused here at once, before the log says so (read
	// your own writes).
	mine := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "dave"})
	mustValidate(t, e.svc, mine.AccessToken)
	if _, err := e.svc.Revoke(ctx, e.clients["gateway"], mine.AccessToken); err != nil {
		t.Fatal(err)
	}
	rt.take()
	wantRevoked(t, e.svc, mine.AccessToken)
	wantTrips(t, rt, "revoked here, the log not yet", 0)

	// Redis says revoked (at another replica) before the log does: refused
	// for good.
	replica := e.newService(t, e.keys, e.ids, Options{Revocations: newLogStandIn()})
	other := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "bob"})
	mustValidate(t, e.svc, other.AccessToken)
	if _, err := replica.Revoke(ctx, e.clients["gateway"], other.AccessToken); err != nil {
		t.Fatal(err)
	}
	log.set(func(l *logStandIn) { l.fresh = false })
	rt.take()
	wantRevoked(t, e.svc, other.AccessToken)
	wantTrips(t, rt, "not fresh", 1)
	log.set(func(l *logStandIn) { l.fresh = true }) // the entry not applied: it would say live
	wantRevoked(t, e.svc, other.AccessToken)
	wantTrips(t, rt, "revoked in Redis", 0)

	reloaded, err := e.svc.WithKeys(e.keys)
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, reloaded, e.issue(t, e.svc, "svc", IssueRequest{}).AccessToken)
	wantStats(t, e.svc, LogStats{Live: 2, Revoked: 3, Unknown: 6})
}

// TestValidateWithoutLog: with no Options.Revocations every validation
// reads Redis, cached or not, and counts as NoLog; a revoked token, opaque
// or not, is refused at once.
func TestValidateWithoutLog(t *testing.T) {
	r := redistest.New(t)
	rt := &roundTrips{}
	r.Client.AddHook(rt)
	e := newEnvOn(t, r, Options{})
	loadScripts(t, r)
	jwt := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	opaque := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
	rt.take()
	for range 2 {
		mustValidate(t, e.svc, jwt.AccessToken)
		wantTrips(t, rt, "jwt", 1)
		mustValidate(t, e.svc, opaque.AccessToken)
		wantTrips(t, rt, "opaque", 1)
	}
	wantStats(t, e.svc, LogStats{NoLog: 4})
	for _, c := range []struct{ client, raw string }{{"gateway", jwt.AccessToken}, {"ogateway", opaque.AccessToken}} {
		if _, err := e.svc.Revoke(t.Context(), e.clients[c.client], c.raw); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, e.svc, c.raw)
	}
}

// TestValidateOpaqueFromLog: with Options.Revocations, an opaque token's
// first validation reads its record (it is not in the cache: Uncached),
// the next is decided in memory, with no Redis command while the log says
// live; when it cannot tell, the record is read again and the mark
// refreshed; a revocation the log applies refuses it with no command. A
// token with the same ID and another secret never finds the entry. The
// entry ends at exp and the leeway.
func TestValidateOpaqueFromLog(t *testing.T) {
	log := newLogStandIn()
	e, rt := logEnv(t, log)
	ctx := t.Context()
	iss := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice", ExpiresIn: 10 * time.Minute})
	rt.take()

	before := log.Mark()
	v := mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "first", 1)
	if v.Claims().Subject != "alice" || v.Claims().ClientID != "ogateway" || v.ID() != iss.ID {
		t.Fatalf("claims %+v, ID %v", v.Claims(), v.ID())
	}
	if got := mustValidate(t, e.svc, iss.AccessToken); got != v {
		t.Error("the second validation is not the cached token")
	}
	wantTrips(t, rt, "live", 0)
	if q := log.last(t); q.Checked != before || q.JTI != iss.ID.String() || q.Subject != "alice" || q.Client != "ogateway" {
		t.Errorf("query %+v, want the token's, checked at %d", q, before)
	}
	wantStats(t, e.svc, LogStats{Live: 1, Uncached: 1})

	// Another secret, the same ID: not the entry; Redis refuses it.
	id, secret, err := ParseOpaque(iss.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	secret[0] ^= 1
	wantRevoked(t, e.svc, FormatOpaqueToken(id, secret))
	wantTrips(t, rt, "another secret", 1)

	log.set(func(l *logStandIn) { l.fresh = false })
	before = log.Mark()
	mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "unknown", 1)
	log.set(func(l *logStandIn) { l.fresh = true; l.subjects["alice"] = before })
	mustValidate(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "refreshed mark", 0)

	if _, err := e.svc.Revoke(ctx, e.clients["ogateway"], iss.AccessToken); err != nil {
		t.Fatal(err)
	}
	if got := len(logEntries(t, e)); got != 1 {
		t.Errorf("log has %d entries after a revoke, want 1", got)
	}
	log.set(func(l *logStandIn) { l.tokens[iss.ID.String()] = true })
	rt.take()
	wantRevoked(t, e.svc, iss.AccessToken)
	wantTrips(t, rt, "revoked", 0)

	// The entry lives until exp and the leeway, not after.
	late := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "carol", ExpiresIn: time.Minute})
	mustValidate(t, e.svc, late.AccessToken)
	e.clock.Add(time.Minute + DefaultLeeway - time.Second)
	rt.take()
	mustValidate(t, e.svc, late.AccessToken)
	wantTrips(t, rt, "before exp and the leeway", 0)
	e.clock.Add(time.Second)
	if _, err := e.svc.Validate(ctx, late.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Validate at exp and the leeway: %v, want ErrInvalidToken", err)
	}
}

// TestRevokeOpaqueWithoutRecord: an opaque token whose record is gone is
// revoked, and logged, by a replica that has it in its cache (its secret
// matched when it was cached); one that has not cannot tell it from a
// guess and revokes nothing.
func TestRevokeOpaqueWithoutRecord(t *testing.T) {
	e, _ := logEnv(t, newLogStandIn())
	ctx := t.Context()
	cold := e.newService(t, e.keys, e.ids, Options{Revocations: newLogStandIn()})
	iss := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
	exp := strconv.FormatInt(e.clock.Now().Add(iss.ExpiresIn).Unix(), 10)
	mustValidate(t, e.svc, iss.AccessToken)
	if err := e.redis.Client.Del(ctx, e.opaqueKey(iss.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	if jti, err := cold.Revoke(ctx, e.clients["ogateway"], iss.AccessToken); jti != "" || err != nil {
		t.Errorf("Revoke where it is not cached: %q, %v; want nothing", jti, err)
	}
	if got := len(logEntries(t, e)); got != 0 {
		t.Fatalf("log has %d entries, want 0", got)
	}
	if _, err := e.svc.Revoke(ctx, e.clients["other"], iss.AccessToken); !errors.Is(err, ErrForbidden) {
		t.Errorf("Revoke by another client: %v, want ErrForbidden", err)
	}
	jti, err := e.svc.Revoke(ctx, e.clients["ogateway"], iss.AccessToken)
	if err != nil || jti != iss.ID.String() {
		t.Fatalf("Revoke where it is cached: %q, %v; want its jti", jti, err)
	}
	wantLogged(t, e, 0, map[string]any{"k": "t", "i": jti, "v": exp})
}

// TestValidateFromLogConcurrent: validations of the same JWT and opaque
// token in many goroutines share the cached token and its mark while the
// log goes stale and fresh again (run with -race); none fails, and once
// Redis has refused a revoked token every later validation refuses it,
// whatever the log says.
func TestValidateFromLogConcurrent(t *testing.T) {
	log := newLogStandIn()
	e, _ := logEnv(t, log)
	ctx := t.Context()
	jwt := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	opaque := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
	run := func(check func(raw string) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := range 200 {
					if w == 0 && i%20 == 0 {
						log.set(func(l *logStandIn) { l.fresh = !l.fresh })
					}
					for _, raw := range []string{jwt.AccessToken, opaque.AccessToken} {
						if err := check(raw); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(func(raw string) error { _, err := e.svc.Validate(ctx, raw); return err })
	if s := e.svc.LogStats(); s.Live == 0 || s.Unknown == 0 {
		t.Errorf("LogStats %+v: want validations decided both ways", s)
	}

	log.set(func(l *logStandIn) { l.fresh = false })
	for client, raw := range map[string]string{"gateway": jwt.AccessToken, "ogateway": opaque.AccessToken} {
		if _, err := e.svc.Revoke(ctx, e.clients[client], raw); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, e.svc, raw)
	}
	run(func(raw string) error {
		if _, err := e.svc.Validate(ctx, raw); !errors.Is(err, ErrRevoked) {
			return fmt.Errorf("a token Redis refused: %v, want ErrRevoked", err)
		}
		return nil
	})
}
