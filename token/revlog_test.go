package token_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// logEntries returns the revocation log of e's store, oldest first, each
// entry as its fields.
func logEntries(tb testing.TB, e *env) []redis.XMessage {
	tb.Helper()
	msgs, err := e.redis.Client.XRange(tb.Context(), e.store.LogKey(), "-", "+").Result()
	if err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// wantLogged checks that the log holds after entries one more than before,
// with exactly the fields k, i, v of want.
func wantLogged(tb testing.TB, e *env, before int, want map[string]any) {
	tb.Helper()
	msgs := logEntries(tb, e)
	if len(msgs) != before+1 {
		tb.Fatalf("log has %d entries, want %d: %v", len(msgs), before+1, msgs)
	}
	got := msgs[len(msgs)-1].Values
	if fmt.Sprint(got) != fmt.Sprint(want) {
		tb.Errorf("log entry %v, want %v", got, want)
	}
}

// TestRevocationLog: every kind of revocation (a JWT, an opaque token, a
// subject, a client) appends exactly one entry that says what was revoked,
// on a single Redis's paths and on a Cluster's; a token revoked again and
// a client's earlier time append none; a subject without a marker appends
// one.
func TestRevocationLog(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		if e.store.LogKey() != e.redis.Prefix+"{revlog}" {
			t.Fatalf("log key %q, want the prefix and {revlog}", e.store.LogKey())
		}
		n := 0
		for _, client := range []string{"gateway", "ogateway"} {
			iss := e.issue(t, e.svc, client, IssueRequest{Subject: "alice", ExpiresIn: 30 * time.Minute})
			exp := e.clock.Now().Add(30 * time.Minute).Unix()
			for i := range 2 { // the second finds no record: nothing to log
				jti, err := e.svc.Revoke(ctx, e.clients[client], iss.AccessToken)
				if err != nil || i == 0 && jti != iss.ID.String() {
					t.Fatalf("%s: Revoke %d: %q, %v", client, i+1, jti, err)
				}
			}
			wantLogged(t, e, n, map[string]any{"k": "t", "i": iss.ID.String(), "v": strconv.FormatInt(exp, 10)})
			wantRevoked(t, e.svc, iss.AccessToken)
			n++
		}

		// A subject without a marker is logged all the same (a validator
		// that decides from the log never read the marker), and gets none.
		if err := e.svc.RevokeSubject(ctx, "nobody"); err != nil {
			t.Fatal(err)
		}
		if msgs := logEntries(t, e); len(msgs) != n+1 || msgs[n].Values["k"] != "s" || msgs[n].Values["i"] != "nobody" {
			t.Fatalf("revoking a subject without a marker: log %v, want an entry for nobody", msgs[n:])
		}
		if got := e.redis.Client.Exists(ctx, e.redis.Prefix+"{nobody}:gen").Val(); got != 0 {
			t.Errorf("revoking a subject without a marker wrote one")
		}
		n++
		iss := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "bob"})
		if err := e.svc.RevokeSubject(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		marker, err := e.redis.Client.Get(ctx, e.redis.Prefix+"{bob}:gen").Result()
		if err != nil {
			t.Fatal(err)
		}
		wantLogged(t, e, n, map[string]any{"k": "s", "i": "bob", "v": marker})
		wantRevoked(t, e.svc, iss.AccessToken)
		n++

		iss = e.issue(t, e.svc, "svc", IssueRequest{})
		if err := e.svc.RevokeClient(ctx, "svc"); err != nil {
			t.Fatal(err)
		}
		cut := e.clock.Now().Add(DefaultLeeway).UnixMilli()
		wantLogged(t, e, n, map[string]any{"k": "c", "i": "svc", "v": strconv.FormatInt(cut, 10)})
		wantRevoked(t, e.svc, iss.AccessToken)
		n++
		if err := e.store.RevokeClient(ctx, "svc", e.clock.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := len(logEntries(t, e)); got != n {
			t.Fatalf("an earlier client revocation time logged: %d entries, want %d", got, n)
		}
	})
}

// TestRevocationLogFailure: a revocation whose log entry cannot be written
// (the log key holds a string) writes no record either and is
// ErrUnavailable, on both layouts; on a Cluster's paths, where the entry is
// appended first, a record that cannot be written after it is
// ErrUnavailable too, and leaves the entry: a reader of the log refuses a
// token Redis still holds valid (closed), never the reverse.
func TestRevocationLogFailure(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		jwt := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
		opaque := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
		marker := e.redis.Client.Get(ctx, e.redis.Prefix+"{alice}:gen").Val()
		if err := e.redis.Client.Set(ctx, e.store.LogKey(), "not a stream", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for name, revoke := range map[string]func() error{
			"jwt":     func() error { _, err := e.svc.Revoke(ctx, e.clients["gateway"], jwt.AccessToken); return err },
			"opaque":  func() error { _, err := e.svc.Revoke(ctx, e.clients["ogateway"], opaque.AccessToken); return err },
			"subject": func() error { return e.svc.RevokeSubject(ctx, "alice") },
			"client":  func() error { return e.svc.RevokeClient(ctx, "gateway") },
		} {
			if err := revoke(); !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: revoke with the log unwritable: %v, want ErrUnavailable", name, err)
			}
		}
		mustValidate(t, e.svc, jwt.AccessToken)
		mustValidate(t, e.svc, opaque.AccessToken)
		if got := e.redis.Client.Get(ctx, e.redis.Prefix+"{alice}:gen").Val(); got != marker {
			t.Errorf("marker %q after a failed revocation, want %q", got, marker)
		}
		if n := e.redis.Client.Exists(ctx, e.redis.Prefix+"client:{gateway}").Val(); n != 0 {
			t.Errorf("the client's revocation time was written by a failed revocation")
		}

		if !cluster {
			return
		}
		// A record that cannot be written after its entry: another writer
		// leaves a client's time that does not read (TestClientKeyUnreadable)
		// between the XADD and the script, which then fails.
		if err := e.redis.Client.Del(ctx, e.store.LogKey()).Err(); err != nil {
			t.Fatal(err)
		}
		key := e.redis.Prefix + "client:{svc}"
		e.redis.Client.AddHook(&afterXAdd{log: e.store.LogKey(), do: func(ctx context.Context) error {
			return e.redis.Client.Set(ctx, key, "not a time", 0).Err()
		}})
		if err := e.svc.RevokeClient(ctx, "svc"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("revoke whose script fails after its entry: %v, want ErrUnavailable", err)
		}
		if msgs := logEntries(t, e); len(msgs) != 1 || msgs[0].Values["i"] != "svc" {
			t.Errorf("log %v after a failed record write, want the entry for svc", msgs)
		}
		if v := e.redis.Client.Get(ctx, key).Val(); v != "not a time" {
			t.Errorf("client key %q after a failed script", v)
		}
	})
}

// isLogAppend reports whether cmd runs the Cluster's append of an entry
// to the log key log: a script (EVALSHA, or EVAL after NOSCRIPT) whose one
// key is the log (a token's entry has its dedupe key too; the other
// scripts of a Cluster's revocation have the key they write).
func isLogAppend(cmd redis.Cmder, log string) bool {
	args := cmd.Args()
	if name := cmd.Name(); len(args) < 4 || name != "evalsha" && name != "eval" {
		return false
	}
	return fmt.Sprint(args[2]) == "1" && args[3] == log
}

// afterXAdd runs do once, right after the first pipeline that appends an
// entry to the log key log.
type afterXAdd struct {
	once sync.Once
	log  string
	do   func(context.Context) error
}

func (a *afterXAdd) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (a *afterXAdd) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (a *afterXAdd) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil && isLogAppend(cmds[0], a.log) {
			a.once.Do(func() { err = a.do(ctx) })
		}
		return err
	}
}

// TestRevocationLogTrimmed: each revocation trims the entries older than
// its own entry's ID (Redis's clock) less LogRetention, and keeps every
// newer one, whatever the service's clock says. The entries around the
// floor are written with IDs of their own, either side of it. A real Redis (MINID ~) drops
// whole listpack nodes, so at most one node's entries older than the floor
// may remain, in the node of a newer one (300 entries fill three nodes of
// stream-node-max-entries' default, 100, and none does); the embedded Redis
// trims exactly.
func TestRevocationLogTrimmed(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		retention := LogRetention(DefaultMaxTTL, DefaultLeeway)
		if e.store.LogRetention() != retention {
			t.Fatalf("store's retention %v, want LogRetention's default %v", e.store.LogRetention(), retention)
		}
		// The floor is Redis's clock less the retention, read off the new
		// entry's ID: kept is a minute above it, as long as the test takes
		// less than a minute.
		redisNow, err := e.redis.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		floor := redisNow.Add(-retention).UnixMilli()
		const old = 300 // three nodes of stream-node-max-entries' default
		for i := range old {
			id := fmt.Sprintf("%d-%d", floor-time.Second.Milliseconds(), i)
			if err := e.redis.Client.XAdd(ctx, &redis.XAddArgs{Stream: e.store.LogKey(), ID: id, Values: []any{"k", "c", "i", "x", "v", "1"}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		kept := fmt.Sprintf("%d-0", floor+time.Minute.Milliseconds())
		if err := e.redis.Client.XAdd(ctx, &redis.XAddArgs{Stream: e.store.LogKey(), ID: kept, Values: []any{"k", "c", "i", "y", "v", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
		// The service's clock, far ahead of Redis's, must not move the
		// floor: it once trimmed every entry, the new one too.
		e.clock.Add(2 * retention)
		if err := e.svc.RevokeClient(ctx, "svc"); err != nil {
			t.Fatal(err)
		}
		msgs := logEntries(t, e)
		var older int
		for _, m := range msgs {
			if m.ID < kept {
				older++
			}
		}
		switch {
		case len(msgs)-older != 2 || msgs[older].ID != kept || msgs[older+1].Values["i"] != "svc":
			t.Errorf("entries from the floor on: %v, want the kept one and the new one", msgs[older:])
		case e.redis.Mini != nil && older != 0:
			t.Errorf("%d entries older than the floor remain, want 0 (exact trimming)", older)
		case older > 100:
			t.Errorf("%d of %d entries older than the floor remain: not trimmed", older, old)
		}
		t.Logf("%d of %d entries older than the floor remain", older, old)
	})
}

// roundTrips counts what a Redis client sends: each pipeline is one round
// trip, and the names of its commands.
type roundTrips struct {
	mu    sync.Mutex
	trips int
	names []string
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.add(cmds...)
		return next(ctx, cmds)
	}
}

func (r *roundTrips) add(cmds ...redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cmds[0].Name() {
	case "hello", "client", "info": // a new connection's handshake, the test's INFO
		return
	}
	r.trips++
	for _, c := range cmds {
		r.names = append(r.names, c.Name())
	}
}

// take returns what was counted since the last take.
func (r *roundTrips) take() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, names := r.trips, r.names
	r.trips, r.names = 0, nil
	return n, names
}

// TestRevocationRoundTrips: appending to the log costs a single Redis or
// Sentinel no round trip: a token's revocation is one script (a DEL
// before the log), an opaque token's the GET of its record and the script,
// a subject's one script (a SET), a client's one script, as before. On a
// Cluster the entry is a round trip of its own, before the write: a
// token's is the entry's script (deduplicated in the {revlog} slot) and a
// DEL, a subject's the entry and the script, a client's the script's check
// that the revocation changes anything (so that an earlier time logs
// nothing), the entry and the script.
func TestRevocationRoundTrips(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e, r, rt := countedEnv(t, cluster)
		ctx := t.Context()
		jwt := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
		opaque := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
		// Load the scripts: a first EVALSHA may answer NOSCRIPT on a
		// real Redis that never ran them.
		if err := redisstore.LoadScripts(ctx, r.Client); err != nil {
			t.Fatal(err)
		}
		rt.take()
		want := map[string]int{"jwt": 1, "opaque": 2, "subject": 1, "client": 1}
		if cluster {
			want = map[string]int{"jwt": 2, "opaque": 3, "subject": 2, "client": 3}
		}
		for _, c := range []struct {
			name   string
			revoke func() error
		}{
			{"jwt", func() error { _, err := e.svc.Revoke(ctx, e.clients["gateway"], jwt.AccessToken); return err }},
			{"opaque", func() error { _, err := e.svc.Revoke(ctx, e.clients["ogateway"], opaque.AccessToken); return err }},
			{"subject", func() error { return e.svc.RevokeSubject(ctx, "alice") }},
			{"client", func() error { return e.svc.RevokeClient(ctx, "svc") }},
		} {
			stats := commandStats(t, r)
			if err := c.revoke(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			n, names := rt.take()
			if n != want[c.name] {
				t.Errorf("%s: %d round trips %v, want %d", c.name, n, names, want[c.name])
			}
			if stats != nil {
				// Logged only: other tests may share the Redis.
				t.Logf("%s: %d round trips %v; INFO commandstats calls: %v", c.name, n, names, commandStats(t, r).minus(stats))
			}
		}
		if got := len(logEntries(t, e)); got != 4 {
			t.Errorf("log has %d entries, want 4", got)
		}
	})
}

// callCounts are the calls of each command in INFO commandstats, commands
// that scripts run included.
type callCounts map[string]int64

// commandStats reads INFO commandstats of a real Redis; nil on the
// embedded one, which has none.
func commandStats(tb testing.TB, r *redistest.Redis) callCounts {
	tb.Helper()
	if r.Mini != nil {
		return nil
	}
	info, err := r.Client.Info(tb.Context(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := callCounts{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		if out[name], err = strconv.ParseInt(calls, 10, 64); err != nil {
			tb.Fatalf("INFO commandstats: %q", line)
		}
	}
	return out
}

// minus is the calls made since before, the commands called only.
func (c callCounts) minus(before callCounts) callCounts {
	out := callCounts{}
	for name, n := range c {
		if d := n - before[name]; d > 0 && name != "info" {
			out[name] = d
		}
	}
	return out
}

// TestLogRetentionShorterThanTokens: a service refuses a store whose log
// would forget a revocation before the revoked token expires, and takes
// one that keeps it LogRetention.
func TestLogRetentionShorterThanTokens(t *testing.T) {
	e := newEnv(t, Options{})
	opts := Options{Issuer: testIssuer, MaxTTL: 48 * time.Hour}
	for _, c := range []struct {
		retention time.Duration
		ok        bool
	}{
		{0, false}, // LogRetention(DefaultMaxTTL, DefaultLeeway)
		{LogRetention(48*time.Hour, DefaultLeeway) - time.Millisecond, false},
		{LogRetention(48*time.Hour, DefaultLeeway), true},
	} {
		store, err := redisstore.New(e.redis.Client, redisstore.Options{Prefix: e.redis.Prefix, LogRetention: c.retention})
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewService(e.keys, store, e.ids, opts)
		store.Close()
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrOptions) {
			t.Errorf("retention %v, max ttl %v: %v", c.retention, opts.MaxTTL, err)
		}
	}
}

// TestRevokeTokenWithoutRecord: a revocation of a signed, unexpired token
// whose record is gone (evicted, lost) is logged all the same, since a
// validator that decides from the log never read the record; revoking it
// again logs nothing more (the dedupe key), and a record left behind by an
// earlier revocation whose DEL did not go through is deleted by the next,
// which logs nothing. Both layouts.
func TestRevokeTokenWithoutRecord(t *testing.T) {
	forLayouts(t, func(t *testing.T, cluster bool) {
		e := newOpaqueEnv(t, Options{}, cluster)
		ctx := t.Context()
		iss := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice", ExpiresIn: 30 * time.Minute})
		exp := e.clock.Now().Add(30 * time.Minute).Unix()
		key := e.sessionKey("alice", iss.ID)
		if err := e.redis.Client.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			jti, err := e.svc.Revoke(ctx, e.clients["gateway"], iss.AccessToken)
			if err != nil || jti != iss.ID.String() {
				t.Fatalf("Revoke %d of a token without a record: %q, %v; want its jti", i+1, jti, err)
			}
		}
		wantLogged(t, e, 0, map[string]any{"k": "t", "i": iss.ID.String(), "v": strconv.FormatInt(exp, 10)})

		// The dedupe key lives until three leeways after exp.
		seen := e.store.LogKey() + ":r:" + iss.ID.String()
		ttl := e.redis.Client.PTTL(ctx, seen).Val()
		if want := time.Until(time.Unix(exp, 0).Add(3 * DefaultLeeway)); ttl <= 0 || ttl > want+time.Second || ttl < want-time.Minute {
			t.Errorf("dedupe key %q PTTL %v, want about %v", seen, ttl, want)
		}

		// An entry in, a DEL that did not go through: the next revoke
		// deletes the record and logs nothing.
		if err := e.redis.Client.Set(ctx, key, "m", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Revoke(ctx, e.clients["gateway"], iss.AccessToken); err != nil {
			t.Fatal(err)
		}
		if n := e.redis.Client.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("a record whose token's entry was in the log survived its revocation")
		}
		if got := len(logEntries(t, e)); got != 1 {
			t.Errorf("log has %d entries after a third revoke, want 1", got)
		}
	})
}

// TestRevocationOnCluster: on a one-node Redis Cluster of its own (a
// redis-server), revocations keep to their slots: a token's entry and
// dedupe key in {revlog}, its record in its subject's; a subject's and a
// client's through the append. A token whose record is gone is logged once.
func TestRevocationOnCluster(t *testing.T) {
	s := redistest.NewConfiguredServer(t, "--cluster-enabled", "yes")
	admin := s.Client()
	ctx := t.Context()
	if err := admin.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if info, _ := admin.ClusterInfo(ctx).Result(); strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(end) {
			t.Fatal("cluster_state not ok within 10 s")
		}
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}})
	t.Cleanup(func() { c.Close() })
	e := newEnvOn(t, &redistest.Redis{Client: c, Prefix: "st:"}, Options{})
	if !e.store.ClusterPaths() {
		t.Fatal("the store does not take a ClusterClient for a Cluster")
	}
	jwt := e.issue(t, e.svc, "gateway", IssueRequest{Subject: "alice"})
	opaque := e.issue(t, e.svc, "ogateway", IssueRequest{Subject: "alice"})
	if err := c.Del(ctx, e.sessionKey("alice", jwt.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.svc.Revoke(ctx, e.clients["gateway"], jwt.AccessToken); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Revoke(ctx, e.clients["ogateway"], opaque.AccessToken); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.RevokeSubject(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeClient(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range logEntries(t, e) {
		kinds = append(kinds, fmt.Sprint(m.Values["k"]))
	}
	if got := strings.Join(kinds, " "); got != "t t s c" {
		t.Errorf("log kinds %q, want %q", got, "t t s c")
	}
	wantRevoked(t, e.svc, jwt.AccessToken)
	wantRevoked(t, e.svc, opaque.AccessToken)
}

// TestStoreLeewayShorterThanService: a service refuses a store that would
// stop logging its tokens' revocations (three of the store's leeways after
// exp) while they still validate (its own leeway after exp, on clocks up
// to a leeway apart), and takes one whose leeway is at least its own.
func TestStoreLeewayShorterThanService(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct {
		store, svc time.Duration
		ok         bool
	}{
		{0, DefaultLeeway, true}, // DefaultLeeway
		{0, DefaultLeeway + time.Millisecond, false},
		{time.Minute, time.Minute, true},
		{time.Second, -1, true}, // no leeway
	} {
		store, err := redisstore.New(e.redis.Client, redisstore.Options{Prefix: e.redis.Prefix, Leeway: c.store,
			LogRetention: LogRetention(DefaultMaxTTL, max(c.svc, DefaultLeeway))})
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewService(e.keys, store, e.ids, Options{Issuer: testIssuer, Leeway: c.svc})
		store.Close()
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrOptions) {
			t.Errorf("store leeway %v, service leeway %v: %v", c.store, c.svc, err)
		}
	}
}
