package revlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// rig is a token.Store, a Writer and a Follower on one Redis, each with a
// client of its own.
type rig struct {
	client    func() redis.UniversalClient // a new client of the Redis
	rdb       redis.UniversalClient        // the test's own commands
	store     *redisstore.Store
	prefix    string
	f         *Follower
	runWriter func() (stop func())
	stopW     func()
}

// sharedRig is a rig on the Redis at redistest.EnvURL, under a prefix of
// the test's own.
func sharedRig(t *testing.T, opts Options) *rig {
	t.Helper()
	if !redistest.Real() {
		t.Skipf("needs a real Redis 7.0 or later at %s (XINFO STREAM entries-added, which miniredis lacks)", redistest.EnvURL)
	}
	r := redistest.New(t)
	opt, err := redis.ParseURL(os.Getenv(redistest.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, r.Prefix, func() redis.UniversalClient {
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		return c
	}, opts)
}

// serverRig is a rig on a redis-server of the test's own, which it may
// stop, freeze and flush.
func serverRig(t *testing.T, opts Options) (*rig, *redistest.Server) {
	t.Helper()
	s := redistest.NewConfiguredServer(t)
	return newRig(t, "st:", func() redis.UniversalClient { return s.Client() }, opts), s
}

func newRig(t *testing.T, prefix string, client func() redis.UniversalClient, opts Options) *rig {
	t.Helper()
	rg := &rig{client: client, rdb: client(), prefix: prefix}
	store, err := redisstore.New(rg.rdb, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	rg.store = store
	t.Cleanup(rg.store.Close)
	w, err := NewWriter(client(), rg.store.LogKey(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rg.runWriter = func() func() { return goRun(t, w.Run) }
	if rg.f, err = New(client(), rg.store.LogKey(), opts); err != nil {
		t.Fatal(err)
	}
	return rg
}

// goRun runs run until the returned stop, or the test's end, stops it.
func goRun(t *testing.T, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (rg *rig) start(t *testing.T) {
	rg.stopW = rg.runWriter()
	goRun(t, rg.f.Run)
}

// eventually fails the test unless ok holds within d (polled every 5 ms).
func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

func (rg *rig) waitFresh(t *testing.T) {
	t.Helper()
	eventually(t, 5*time.Second, "Fresh", func() bool { return rg.f.Fresh(time.Now()) })
}

// revokeToken writes a record for jti of subject and revokes it through
// the store, which logs it with exp.
func (rg *rig) revokeToken(t *testing.T, sub, jti string, exp int64) {
	t.Helper()
	key := rg.prefix + "{" + sub + "}:" + jti
	if err := rg.rdb.Set(t.Context(), key, "m", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rg.store.RevokeToken(t.Context(), token.SessionRef{JTI: jti, Subject: sub}, exp); err != nil {
		t.Fatal(err)
	}
}

// revokeSubject gives sub a marker and revokes it through the store; it
// returns the marker the log holds now.
func (rg *rig) revokeSubject(t *testing.T, sub string) string {
	t.Helper()
	gen := rg.prefix + "{" + sub + "}:gen"
	if err := rg.rdb.Set(t.Context(), gen, "old", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rg.store.RevokeSubject(t.Context(), sub); err != nil {
		t.Fatal(err)
	}
	m, err := rg.rdb.Get(t.Context(), gen).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (rg *rig) resyncs(reason string) float64 {
	return testutil.ToFloat64(rg.f.met.resyncs.WithLabelValues(reason))
}

// TestFollowerSeesRevocations: revocations written through token.Store,
// of each kind, are in the follower's state: those before it started
// (its full read) and those after (XREAD), and it is fresh.
func TestFollowerSeesRevocations(t *testing.T) {
	rg := sharedRig(t, Options{})
	exp := time.Now().Add(time.Hour).Unix()
	rg.revokeToken(t, "alice", "101", exp)
	m1 := rg.revokeSubject(t, "alice")
	cut := time.Now().Truncate(time.Millisecond)
	if err := rg.store.RevokeClient(t.Context(), "gateway", cut); err != nil {
		t.Fatal(err)
	}
	rg.start(t)
	rg.waitFresh(t)
	if !rg.f.TokenRevoked("101") || rg.f.TokenRevoked("102") {
		t.Errorf("TokenRevoked 101, 102 = %v, %v; want true, false", rg.f.TokenRevoked("101"), rg.f.TokenRevoked("102"))
	}
	if got, ok := rg.f.SubjectMarker("alice"); !ok || got != m1 {
		t.Errorf("SubjectMarker(alice) = %q, %v; want %q", got, ok, m1)
	}
	if got, ok := rg.f.ClientCutoff("gateway"); !ok || got != cut.UnixMilli() {
		t.Errorf("ClientCutoff(gateway) = %d, %v; want %d", got, ok, cut.UnixMilli())
	}

	rg.revokeToken(t, "bob", "102", 0)
	m2 := rg.revokeSubject(t, "alice")
	if err := rg.store.RevokeClient(t.Context(), "gateway", cut.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the later revocations followed", func() bool {
		m, _ := rg.f.SubjectMarker("alice")
		c, _ := rg.f.ClientCutoff("gateway")
		return rg.f.TokenRevoked("102") && m == m2 && c == cut.Add(time.Second).UnixMilli()
	})
	if n := testutil.ToFloat64(rg.f.met.applied); n != 6 {
		t.Errorf("entries applied %v, want 6", n)
	}
	if n := rg.resyncs(ReasonStart); n != 1 {
		t.Errorf("start resyncs %v, want 1", n)
	}
}

// TestFollowerForgetsExpiredTokens: a revoked token is remembered until its
// exp and the leeway, by the injected clock, then forgotten.
func TestFollowerForgetsExpiredTokens(t *testing.T) {
	clock := clocktest.New(time.Now())
	rg := sharedRig(t, Options{Now: clock.Now, Leeway: 5 * time.Second})
	rg.start(t)
	rg.revokeToken(t, "alice", "201", clock.Now().Add(time.Minute).Unix())
	eventually(t, 5*time.Second, "201 revoked", func() bool { return rg.f.TokenRevoked("201") })
	clock.Add(time.Minute)
	// Heartbeats go on (one accepted since the clock moved, by its stamp):
	// still within the leeway.
	before := rg.f.lastHeartbeat()
	eventually(t, 5*time.Second, "a heartbeat after the clock moved", func() bool { return !rg.f.lastHeartbeat().Equal(before) })
	if !rg.f.TokenRevoked("201") {
		t.Fatal("forgotten at its exp, within the leeway")
	}
	clock.Add(7 * time.Second)
	eventually(t, 5*time.Second, "201 forgotten after exp and leeway", func() bool { return !rg.f.TokenRevoked("201") })
}

// TestFreshNeedsHeartbeats: Fresh needs a heartbeat younger than Threshold
// by the follower's clock (injected): once the writer stops and the follower
// has read its last heartbeat, Fresh is false Threshold later; and true
// again, on its own, once a writer beats again.
func TestFreshNeedsHeartbeats(t *testing.T) {
	clock := clocktest.New(time.Now())
	reg := prometheus.NewRegistry()
	rg := sharedRig(t, Options{Now: clock.Now, Registerer: reg})
	rg.start(t)
	eventually(t, 5*time.Second, "Fresh", func() bool { return rg.f.Fresh(clock.Now()) })
	rg.stopW()
	last, err := rg.rdb.XRevRangeN(t.Context(), rg.f.keys.hb, "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatal(last, err)
	}
	eventually(t, 5*time.Second, "the last heartbeat read", func() bool {
		rg.f.mu.RLock()
		defer rg.f.mu.RUnlock()
		return rg.f.st.hbPos == last[0].ID
	})
	if !rg.f.Fresh(clock.Now().Add(DefaultThreshold - time.Millisecond)) {
		t.Error("not fresh before Threshold")
	}
	clock.Add(DefaultThreshold)
	if rg.f.Fresh(clock.Now()) {
		t.Fatal("fresh Threshold after the last heartbeat")
	}
	clock.Add(time.Second)
	wantMetrics(t, reg, map[string]float64{
		"snowtoken_revlog_heartbeat_age_seconds": (DefaultThreshold + time.Second).Seconds(),
		"snowtoken_revlog_stale_seconds_total":   time.Second.Seconds(),
	})
	rg.runWriter()
	eventually(t, 5*time.Second, "fresh again", func() bool { return rg.f.Fresh(clock.Now()) })
}

// wantMetrics checks that reg gathers each metric of want with at least its
// value (time may have moved on).
func wantMetrics(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"snowtoken_revlog_resyncs_total", "snowtoken_revlog_entries_applied_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not registered", name)
		}
	}
	for name, v := range want {
		if got[name] < v {
			t.Errorf("%s = %v, want at least %v", name, got[name], v)
		}
	}
}

// TestFreshThroughFaults: on a redis-server of its own, each fault makes
// the follower resync (or go stale) and it is fresh again on its own once
// the fault ends: its connection killed, FLUSHALL (a new epoch; the state
// rebuilt from the log), the log trimmed past it (an entry removed unread,
// with and without a later one), Redis frozen, Redis killed and restarted
// empty.
func TestFreshThroughFaults(t *testing.T) {
	rg, srv := serverRig(t, Options{})
	ctx := t.Context()
	rg.start(t)
	rg.waitFresh(t)

	t.Run("client kill", func(t *testing.T) {
		n := rg.resyncs(ReasonError)
		if err := rg.rdb.Do(ctx, "client", "kill", "type", "normal").Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "an error resync", func() bool { return rg.resyncs(ReasonError) > n })
		rg.waitFresh(t)
	})

	t.Run("flushall", func(t *testing.T) {
		rg.revokeSubject(t, "alice")
		eventually(t, 5*time.Second, "alice followed", func() bool { _, ok := rg.f.SubjectMarker("alice"); return ok })
		n := rg.resyncs(ReasonEpoch)
		if err := rg.rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "an epoch resync", func() bool { return rg.resyncs(ReasonEpoch) > n })
		rg.waitFresh(t)
		// A revocation seen is never undone: the state before the loss is
		// merged into the new one.
		if _, ok := rg.f.SubjectMarker("alice"); !ok {
			t.Error("alice's revocation forgotten after FLUSHALL")
		}
		// Every token issued before the new epoch began (and the leeway)
		// is left to Redis, whose records went with the flush.
		st := rg.f.Status(time.Now())
		before := token.LogQuery{JTI: "1", Subject: "carol", Client: "c", Issued: st.Horizon}
		after := before
		after.Issued = st.Horizon + token.DefaultLeeway.Milliseconds() + 1
		if v := rg.f.Decide(time.Now(), before); v != token.LogUnknown {
			t.Errorf("a token issued at the new horizon: %v, want LogUnknown", v)
		}
		if v := rg.f.Decide(time.Now(), after); v != token.LogLive {
			t.Errorf("a token issued past the new horizon and the leeway: %v, want LogLive", v)
		}
		m := rg.revokeSubject(t, "bob")
		eventually(t, 5*time.Second, "bob followed", func() bool { got, _ := rg.f.SubjectMarker("bob"); return got == m })
	})

	// remove appends entries with IDs of its own and, at once (MULTI), so
	// that no read can see them, removes the first n of them (XTRIM MINID,
	// which removes every older entry too) or the last (XDEL, which leaves
	// older ones: after a resync the follower stands at the deleted ID).
	remove := func(t *testing.T, clients []string, n int, del bool) {
		tm, err := rg.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ms := strconv.FormatInt(tm.Add(time.Second).UnixMilli(), 10)
		_, err = rg.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range clients {
				p.XAdd(ctx, &redis.XAddArgs{Stream: rg.store.LogKey(), ID: ms + "-" + strconv.Itoa(i), Values: []string{"k", "c", "i", c, "v", "1"}})
			}
			if del {
				p.XDel(ctx, rg.store.LogKey(), ms+"-"+strconv.Itoa(len(clients)-1))
			} else {
				p.XTrimMinID(ctx, rg.store.LogKey(), ms+"-"+strconv.Itoa(n))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, reason string
		clients      []string
		del          bool
	}{
		{"trimmed before a later entry", ReasonTrimmed, []string{"lost", "kept"}, false},
		{"trimmed last entry", ReasonUnapplied, []string{"lost"}, false},
		{"deleted last entry", ReasonUnapplied, []string{"kept", "lost"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rg.waitFresh(t)
			n := rg.resyncs(c.reason)
			epoch := rg.f.Status(time.Now()).Epoch
			remove(t, c.clients, 1, c.del)
			eventually(t, 5*time.Second, c.reason+" resync", func() bool { return rg.resyncs(c.reason) > n })
			// Entries removed unread rotate the epoch before the full read:
			// fresh in the new one, the resync is done (fresh alone may be
			// the state before it, for a moment).
			eventually(t, 5*time.Second, "fresh in a new epoch", func() bool {
				st := rg.f.Status(time.Now())
				return st.Fresh && st.Epoch != epoch
			})
			if got := rg.resyncs(c.reason); got != n+1 {
				t.Errorf("%v %s resyncs, want one", got-n, c.reason)
			}
		})
	}

	t.Run("frozen", func(t *testing.T) {
		rg.waitFresh(t)
		srv.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		time.Sleep(DefaultThreshold + 50*time.Millisecond)
		// No read sent after the freeze brings anything: not fresh from
		// Threshold after it (10 ms for the signal to land).
		if rg.f.Fresh(stopped.Add(DefaultThreshold + 10*time.Millisecond)) {
			t.Error("fresh Threshold after Redis froze")
		}
		srv.Signal(syscall.SIGCONT)
		rg.waitFresh(t)
	})

	t.Run("killed and restarted empty", func(t *testing.T) {
		rg.waitFresh(t)
		srv.Stop()
		stopped := time.Now()
		time.Sleep(DefaultThreshold + 50*time.Millisecond)
		if rg.f.Fresh(stopped.Add(DefaultThreshold)) {
			t.Error("fresh Threshold after Redis stopped")
		}
		srv.Start()
		rg.waitFresh(t)
		m := rg.revokeSubject(t, "carol")
		eventually(t, 5*time.Second, "carol followed", func() bool { got, _ := rg.f.SubjectMarker("carol"); return got == m })
	})
	if s := testutil.ToFloat64(rg.f.met.applied); s == 0 {
		t.Error("no entries applied counted")
	}
}

// TestWriterElection: of two Writers on one log only one beats; when it
// stops, the other takes over once the writer key expires (4 periods); the
// heartbeat stream stays bounded however many beats; each heartbeat carries
// the epoch, which the first beat created, and the log's last ID and count.
func TestWriterElection(t *testing.T) {
	r := redistest.New(t)
	ctx := t.Context()
	logKey := r.Prefix + "{revlog}"
	// A long period (the writer key lives 4 of them): a slow machine
	// between two beats must not let the other writer take over.
	const period = 250 * time.Millisecond
	w1, err := NewWriter(r.Client, logKey, WriterOptions{Period: period})
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := NewWriter(r.Client, logKey, WriterOptions{Period: period})
	for i, c := range []struct {
		w    *Writer
		want bool
	}{{w1, true}, {w2, false}, {w1, true}, {w2, false}} {
		if got, err := c.w.Beat(ctx); err != nil || got != c.want {
			t.Fatalf("beat %d: %v, %v; want %v", i, got, err, c.want)
		}
	}
	if r.Mini != nil {
		r.Mini.FastForward(4 * period)
	} else {
		time.Sleep(4*period + 20*time.Millisecond) // the writer key's real TTL
	}
	if got, err := w2.Beat(ctx); err != nil || !got {
		t.Fatalf("w2 after w1's key expired: %v, %v; want true", got, err)
	}
	if got, _ := w1.Beat(ctx); got {
		t.Fatal("w1 beats while w2 holds the key")
	}
	if ttl, err := r.Client.PTTL(ctx, logKey+":writer").Result(); err != nil || ttl <= 3*period || ttl > 4*period {
		t.Errorf("writer key TTL %v (%v), want 4 periods", ttl, err)
	}
	for range 500 {
		if _, err := w2.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Client.XLen(ctx, logKey+":hb").Result(); err != nil || n > DefaultHeartbeatMaxLen+100 {
		t.Errorf("heartbeat stream holds %d entries (%v), want at most MAXLEN and a node", n, err)
	}
	epoch, err := r.Client.Get(ctx, logKey+":epoch").Result()
	if _, herr := horizonOf(epoch); err != nil || herr != nil || len(epoch) < 34 || epoch[32] != '.' {
		t.Fatalf("epoch %q, %v", epoch, err)
	}
	hb, err := r.Client.XRevRangeN(ctx, logKey+":hb", "+", "-", 1).Result()
	if err != nil || len(hb) != 1 {
		t.Fatal(hb, err)
	}
	if got := hb[0].Values; got["e"] != epoch || got["l"] != "0-0" || got["n"] != "0" {
		t.Errorf("heartbeat %v, want e %s, l 0-0, n 0 (no log)", got, epoch)
	}
}

// TestFreshNeverMissesAnEntry is the safety rule: whenever the follower
// says Fresh(now), its state holds every revocation that the store
// acknowledged before now - Threshold. Revocations run all along, with
// bursts of more than a page (XRANGE and XREAD in pages), thousands of
// entries written before the follower starts (a paged full read), and the
// follower's connection killed again and again.
func TestFreshNeverMissesAnEntry(t *testing.T) {
	rg, _ := serverRig(t, Options{})
	ctx := t.Context()
	burst := func(tag string, n int) {
		_, err := rg.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				p.XAdd(ctx, &redis.XAddArgs{Stream: rg.store.LogKey(), Values: []string{"k", "t", "i", tag + strconv.Itoa(i), "v", ""}})
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	burst("pre", 2*pageSize+500)
	rg.start(t)

	type rec struct {
		at  time.Time
		jti string
	}
	var mu sync.Mutex
	var acked []rec // in the order acknowledged
	done := make(chan struct{})
	killer := rg.client()
	exp := time.Now().Add(time.Hour).Unix()
	go func() {
		defer close(done)
		for i := range 3000 {
			if i%500 == 250 {
				burst("b"+strconv.Itoa(i), pageSize+300)
			}
			if i%300 == 100 {
				_ = killer.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err()
			}
			// Tokens, each of its own: a missed entry is never hidden by a
			// later one, as a subject's or a client's would be.
			jti := strconv.Itoa(i)
			key := rg.prefix + "{alice}:" + jti
			if rg.rdb.Set(ctx, key, "m", time.Hour).Err() != nil || rg.store.RevokeToken(ctx, token.SessionRef{JTI: jti, Subject: "alice"}, exp) != nil {
				continue // killed: whether it is logged is unknown; not checked
			}
			at := time.Now()
			mu.Lock()
			acked = append(acked, rec{at, jti})
			mu.Unlock()
		}
	}()
	checks, fresh, violation := 0, 0, ""
	for running := true; running && violation == ""; {
		select {
		case <-done:
			running = false
		case <-time.After(100 * time.Microsecond): // a validator's pace, not a spin
		}
		now := time.Now()
		checks++
		if !rg.f.Fresh(now) {
			continue
		}
		fresh++
		mu.Lock()
		for _, r := range acked {
			if r.at.Add(DefaultThreshold).After(now) {
				break
			}
			if !rg.f.TokenRevoked(r.jti) {
				violation = fmt.Sprintf("fresh at %v without token %s, whose revocation was acknowledged at %v", now, r.jti, r.at)
				break
			}
		}
		mu.Unlock()
	}
	<-done
	if violation != "" {
		t.Fatal(violation)
	}
	if fresh == 0 {
		t.Errorf("never fresh in %d checks: the rule was not exercised", checks)
	}
	t.Logf("fresh at %d of %d checks, %v resyncs after errors", fresh, checks, rg.resyncs(ReasonError))
	if !rg.f.TokenRevoked("pre0") || !rg.f.TokenRevoked("pre"+strconv.Itoa(2*pageSize+499)) {
		t.Error("the entries before the start are not all in the state")
	}
}

// TestQuietFollowerChecksRedis: with no writer, a follower whose reads
// bring nothing makes no full read, but checks Redis once a BlockTimeout:
// a new epoch, or a heartbeat stream behind the last heartbeat read (a
// Redis restarted with its clock behind), makes it resync without a
// heartbeat; once a writer beats again it is fresh.
func TestQuietFollowerChecksRedis(t *testing.T) {
	const block = 50 * time.Millisecond
	rg := sharedRig(t, Options{BlockTimeout: block})
	ctx := t.Context()
	rg.start(t)
	rg.waitFresh(t)
	rg.stopW()
	time.Sleep(6 * block)
	for _, r := range []string{ReasonQuiet, ReasonEpoch, ReasonError} {
		if n := rg.resyncs(r); n != 0 {
			t.Fatalf("%v %s resyncs while only quiet, want none", n, r)
		}
	}
	if err := rg.rdb.Set(ctx, rg.f.keys.epoch, newToken(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an epoch resync", func() bool { return rg.resyncs(ReasonEpoch) == 1 })

	epoch, err := rg.rdb.Get(ctx, rg.f.keys.epoch).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, err = rg.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, rg.f.keys.hb)
		p.XAdd(ctx, &redis.XAddArgs{Stream: rg.f.keys.hb, ID: "1-0", Values: []string{"e", epoch, "l", "0-0", "n", "0"}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a quiet resync", func() bool { return rg.resyncs(ReasonQuiet) == 1 })
	rg.runWriter()
	rg.waitFresh(t)
}

// TestUnreadableEntryFailsClosed: a log entry of a kind the follower does
// not know (a newer writer's) leaves it never fresh, and it does not spin:
// its full reads wait longer and longer. The measure is a count and a floor,
// not a bound load can break: eight full reads after the entry come after
// seven waits of at least 10, 20, …, 640 ms (a timer never fires early), so
// they cannot take less than 1270 ms; a spin makes them in a tenth of it.
func TestUnreadableEntryFailsClosed(t *testing.T) {
	rg := sharedRig(t, Options{})
	ctx := t.Context()
	rg.start(t)
	rg.waitFresh(t)
	start := time.Now()
	if err := rg.rdb.XAdd(ctx, &redis.XAddArgs{Stream: rg.store.LogKey(), Values: []string{"k", "x", "i", "a", "v", ""}}).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an entry resync", func() bool { return rg.resyncs(ReasonEntry) == 1 })
	const reads, floor = 8, (10 + 20 + 40 + 80 + 160 + 320 + 640) * time.Millisecond
	eventually(t, 10*time.Second, "eight full reads after the entry", func() bool {
		if rg.f.Fresh(time.Now()) {
			t.Fatal("fresh with an entry it could not read")
		}
		return rg.resyncs(ReasonError) >= reads
	})
	if took := time.Since(start); took < floor {
		t.Errorf("%d full reads %v after the entry, want at least %v of waits between them: it spins", reads, took, floor)
	}
}

// TestOnCluster: on a Redis Cluster (one node of its own holding every
// slot) the writer's and the follower's scripts and reads touch one slot,
// and the store's Cluster path of revocation is followed.
func TestOnCluster(t *testing.T) {
	s := redistest.NewConfiguredServer(t, "--cluster-enabled", "yes")
	admin := s.Client()
	ctx := t.Context()
	if err := admin.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "cluster_state:ok", func() bool {
		info, _ := admin.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok")
	})
	rg := newRig(t, "st:", func() redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}})
		t.Cleanup(func() { c.Close() })
		return c
	}, Options{})
	rg.start(t)
	rg.waitFresh(t)
	m := rg.revokeSubject(t, "alice")
	rg.revokeToken(t, "bob", "301", time.Now().Add(time.Hour).Unix())
	eventually(t, 5*time.Second, "both followed", func() bool {
		got, _ := rg.f.SubjectMarker("alice")
		return got == m && rg.f.TokenRevoked("301")
	})
	rg.waitFresh(t)
}

// TestFrozenReadBounded: a read that Redis, frozen, never answers ends
// BlockTimeout and a second after it was sent, on a client with
// ContextTimeoutEnabled (as package config builds them): the follower
// resyncs while Redis is still frozen, instead of after go-redis's 10 s.
func TestFrozenReadBounded(t *testing.T) {
	s := redistest.NewConfiguredServer(t)
	rg := newRig(t, "st:", func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}, Options{BlockTimeout: 100 * time.Millisecond})
	rg.start(t)
	rg.waitFresh(t)
	n := rg.resyncs(ReasonError)
	s.Signal(syscall.SIGSTOP)
	eventually(t, 3*time.Second, "an error resync while frozen", func() bool { return rg.resyncs(ReasonError) > n })
	s.Signal(syscall.SIGCONT)
	rg.waitFresh(t)
}

// TestResyncReasonsStartAtZero: snowtoken_revlog_resyncs_total has every
// reason at 0 from New on, before any read: an alert on the rate of one
// reason works before the first resync of that reason.
func TestResyncReasonsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New reads nothing
	defer rdb.Close()
	if _, err := New(rdb, "st:{revlog}", Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	reasons := []string{ReasonStart, ReasonEpoch, ReasonUnapplied, ReasonTrimmed, ReasonError, ReasonQuiet, ReasonEntry, ReasonLoss, ReasonBacklog}
	want := "# HELP snowtoken_revlog_resyncs_total Full reads of the revocation log, by reason.\n# TYPE snowtoken_revlog_resyncs_total counter\n"
	for _, r := range reasons {
		want += `snowtoken_revlog_resyncs_total{reason="` + r + "\"} 0\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "snowtoken_revlog_resyncs_total"); err != nil {
		t.Error(err)
	}
}
