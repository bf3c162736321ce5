package e2e

// The tests in this file check the revocation log (package revlog,
// docs/revocation.md) end to end: real snowtoken replicas, each with its
// heartbeat writer and follower, on a redis-server of the test's own, and
// the faults of the docs' table produced for real. Two rules are checked
// after every fault:
//
//   - once a revoke answered 200 at t, no replica accepts the token in a
//     validation sent after t + SNOWTOKEN_REVLOG_THRESHOLD, and once
//     refused it stays refused, during the fault and after it;
//   - hot validation resumes on its own when the fault ends: repeated
//     validations of a live token are decided from memory again (the
//     log_live decisions counter grows by one a validation) on every replica.
//
// Waits have deadlines for a hung test; the one timing asserted is the
// guarantee's own bound, which holds on a loaded machine too (a replica
// that falls behind reads Redis instead).

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

const (
	// revlogKey is the revocation log; the heartbeats and the epoch are
	// keys named after it (package revlog).
	revlogKey = redisstore.DefaultKeyPrefix + "{revlog}"
	// revlogThreshold is SNOWTOKEN_REVLOG_THRESHOLD of the fault tests'
	// replicas: the default.
	revlogThreshold = 100 * time.Millisecond
	// revlogRedisTimeout is their SNOWTOKEN_REDIS_TIMEOUT: shorter than the
	// default 2 s so that a frozen Redis costs the test less.
	revlogRedisTimeout = 500 * time.Millisecond
	// revlogStaysRefused is how many more validations a refused token must
	// be refused in.
	revlogStaysRefused = 5
	// revlogHotRun is how many validations in a row the log must decide for
	// a token to count as hot.
	revlogHotRun = 5
)

// revlogFleet is a redis-server of a test's own and replicas on it.
type revlogFleet struct {
	srv       *redistest.Server
	rdb       *redis.Client
	creds     fleetCreds
	reps      []*issuer
	threshold time.Duration
}

// startRevlogFleet starts n replicas (worker IPs 127.0.0.11 on) on srv at
// once, and returns when all are ready. Before they start it sets the
// log's epoch to one that began a minute ago, as on a fleet that has run
// for a while: tokens issued from now on are after the epoch's horizon and
// its leeway, so the follower decides them from memory from their first
// validation, and a revocation it missed would show (a token issued within
// the leeway of the horizon is first checked in Redis).
func startRevlogFleet(tb testing.TB, bin string, creds fleetCreds, srv *redistest.Server, n int, threshold time.Duration) *revlogFleet {
	tb.Helper()
	f := &revlogFleet{srv: srv, rdb: srv.Client(), creds: creds, threshold: threshold}
	epoch := "e2e." + strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	if err := f.rdb.Set(tb.Context(), revlogKey+":epoch", epoch, 0).Err(); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		f.reps = append(f.reps, fleet{bin, creds}.launch(tb, replica{
			name: fmt.Sprintf("replica %d", 11+i), ip: fmt.Sprintf("127.0.0.%d", 11+i),
			redis: map[string]string{"SNOWTOKEN_REDIS_URL": srv.URL()},
			env: []string{
				"SNOWTOKEN_WORKER_LEASE_TTL", "2s", // the wait of a replica on a fresh Redis
				"SNOWTOKEN_REVLOG_THRESHOLD", threshold.String(),
				"SNOWTOKEN_REDIS_TIMEOUT", revlogRedisTimeout.String(),
			},
		}))
	}
	for _, p := range f.reps {
		p.waitLog(tb, "listening")
		waitReady(tb, p.url("/readyz"), fleetWait)
	}
	return f
}

// issue asks p for a token of c until it answers 200: a replica that lost
// its lease (FLUSHALL, a restart) answers 503 until it has its worker back.
func (f *revlogFleet) issue(tb testing.TB, p *issuer, c fleetClient) fleetToken {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for {
		status, _, tok, body := p.tryIssue(tb, c, "")
		if status == http.StatusOK {
			return tok
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			tb.Fatalf("POST /token at %s: %d %s, want 200", p.name, status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// revoke revokes tok at p and returns when the revoke answered 200 (a 503,
// while Redis is coming back, is asked again: a revocation may be repeated).
func (f *revlogFleet) revoke(tb testing.TB, p *issuer, c fleetClient, tok fleetToken) time.Time {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for {
		status := p.revoke(tb, c, tok)
		if status == http.StatusOK {
			return time.Now()
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			tb.Fatalf("POST /token/revoke at %s: %d, want 200", p.name, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustRefuse checks the guarantee at every replica for tok, whose revoke
// answered 200 at revoked: no validation sent after revoked + threshold is
// accepted; the token is refused with 401 within fleetRejectWait (a 503 of
// a replica that cannot reach Redis yet is asked again), and then stays
// refused for revlogStaysRefused more validations. A replica that accepts
// it past the bound is asked on until the wait is over, so that the
// failure says whether it ever refused it.
func (f *revlogFleet) mustRefuse(tb testing.TB, tok fleetToken, revoked time.Time, why string) {
	tb.Helper()
	bound := revoked.Add(f.threshold)
	for _, p := range f.reps {
		deadline := time.Now().Add(fleetRejectWait)
		var accepted []time.Duration // after the revoke, past the bound
		status := 0
		for {
			sent := time.Now()
			status, _ = p.validate(tb, tok)
			if status == http.StatusOK && sent.After(bound) {
				accepted = append(accepted, sent.Sub(revoked).Round(time.Millisecond))
			}
			if status == http.StatusUnauthorized || time.Now().After(deadline) ||
				(status != http.StatusOK && status != http.StatusServiceUnavailable) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if len(accepted) > 0 {
			tb.Fatalf("token %d at %s %s: accepted %d times after the revoke answered plus the threshold %v (first %v after it, last %v); then %d",
				tok.TokenID, p.name, why, len(accepted), f.threshold, accepted[0], accepted[len(accepted)-1], status)
		}
		if status != http.StatusUnauthorized {
			tb.Fatalf("token %d at %s %s: %d, want 401 (within %v)", tok.TokenID, p.name, why, status, fleetRejectWait)
		}
		for i := range revlogStaysRefused {
			if status, _ := p.validate(tb, tok); status != http.StatusUnauthorized {
				tb.Fatalf("token %d at %s %s: refused, then %d at the %d-th validation after", tok.TokenID, p.name, why, status, i+1)
			}
		}
	}
}

// mustBeHot validates the live token tok at every replica until revlogHotRun
// validations in a row answer 200 and each adds one to log_live (decided
// from memory, no Redis command): what a replica does on its own once a
// fault is over. A 503 while Redis comes back is asked again; a 401 fails.
func (f *revlogFleet) mustBeHot(tb testing.TB, tok fleetToken, why string) {
	tb.Helper()
	for _, p := range f.reps {
		deadline := time.Now().Add(fleetWait)
		for {
			before := p.decisions(tb)["log_live"]
			ok := true
			for range revlogHotRun {
				status, _ := p.validate(tb, tok)
				switch status {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					ok = false
				default:
					tb.Fatalf("live token %d at %s %s: %d, want 200", tok.TokenID, p.name, why, status)
				}
			}
			grew := p.decisions(tb)["log_live"] - before
			if ok && grew == revlogHotRun {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("live token %d at %s %s: not decided from the log again within %v (last run: log_live +%v of %d, all 200: %v)",
					tok.TokenID, p.name, why, fleetWait, grew, revlogHotRun, ok)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// mustBeLive validates tok at every replica until it answers 200 (a 503
// while Redis comes back is asked again; a 401 fails).
func (f *revlogFleet) mustBeLive(tb testing.TB, tok fleetToken, why string) {
	tb.Helper()
	for _, p := range f.reps {
		deadline := time.Now().Add(fleetWait)
		for {
			status, _ := p.validate(tb, tok)
			if status == http.StatusOK {
				break
			}
			if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				tb.Fatalf("live token %d at %s %s: %d, want 200", tok.TokenID, p.name, why, status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// resyncs returns each replica's snowtoken_revlog_resyncs_total for the
// reasons given, summed.
func (f *revlogFleet) resyncs(tb testing.TB, reasons ...string) []float64 {
	tb.Helper()
	var n []float64
	for _, p := range f.reps {
		s := p.series(tb)
		var sum float64
		for _, r := range reasons {
			sum += s[`snowtoken_revlog_resyncs_total{reason="`+r+`"}`]
		}
		n = append(n, sum)
	}
	return n
}

// mustResync waits until every replica (or, with only, those) has resynced
// for one of reasons more times than before says.
func (f *revlogFleet) mustResync(tb testing.TB, before []float64, only []int, reasons ...string) {
	tb.Helper()
	if only == nil {
		for i := range f.reps {
			only = append(only, i)
		}
	}
	deadline := time.Now().Add(fleetWait)
	for {
		now := f.resyncs(tb, reasons...)
		missing := ""
		for _, i := range only {
			if now[i] <= before[i] {
				missing += " " + f.reps[i].name
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no resync for %v at%s within %v (counts before %v, now %v)", reasons, missing, fleetWait, before, now)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readers returns the IDs of the Redis clients whose last command was
// XREAD: the followers, held in XREAD BLOCK.
func (f *revlogFleet) readers(tb testing.TB) map[string]bool {
	tb.Helper()
	list, err := f.rdb.ClientList(tb.Context()).Result()
	if err != nil {
		tb.Fatal(err)
	}
	ids := map[string]bool{}
	for line := range strings.Lines(list) {
		fields := strings.Fields(line)
		if slices.Contains(fields, "cmd=xread") {
			ids[strings.TrimPrefix(fields[0], "id=")] = true
		}
	}
	return ids
}

// series reads every series of p's /metrics, by its name and labels as
// printed (`name{label="value"}`).
func (p *issuer) series(tb testing.TB) map[string]float64 {
	tb.Helper()
	status, _, body := fleetCall(tb, http.MethodGet, p.metricsURL(tb), nil, "", nil)
	if status != http.StatusOK {
		tb.Fatalf("GET /metrics at %s: %d", p.name, status)
	}
	m := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			tb.Fatalf("/metrics of %s: %q", p.name, line)
		}
		m[line[:i]] = v
	}
	return m
}

// decisions is p's snowtoken_validation_decisions_total, by its label by.
func (p *issuer) decisions(tb testing.TB) map[string]float64 {
	tb.Helper()
	d := map[string]float64{}
	for k, v := range p.series(tb) {
		if by, ok := strings.CutPrefix(k, `snowtoken_validation_decisions_total{by="`); ok {
			d[strings.TrimSuffix(by, `"}`)] = v
		}
	}
	if len(d) == 0 {
		tb.Fatalf("%s exports no snowtoken_validation_decisions_total", p.name)
	}
	return d
}

// redisDecisions is the validations of d that read Redis.
func redisDecisions(d map[string]float64) float64 {
	return d["redis_unknown"] + d["redis_uncached"] + d["redis_no_log"]
}

// commandCalls is INFO commandstats' calls of cmd (lower case) on rdb.
func commandCalls(tb testing.TB, rdb *redis.Client, cmd string) int64 {
	tb.Helper()
	info, err := rdb.Info(tb.Context(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
			if err != nil {
				tb.Fatalf("INFO commandstats: %q", line)
			}
			return n
		}
	}
	return 0
}

// redisMonitor is a MONITOR connection: every command Redis runs, those
// scripts run included, as Redis prints them.
type redisMonitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	seen  chan struct{} // a line came
	done  chan struct{}
}

func startMonitor(tb testing.TB, addr string) *redisMonitor {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, fleetWait)
	if err != nil {
		tb.Fatal(err)
	}
	m := &redisMonitor{conn: conn, seen: make(chan struct{}, 1), done: make(chan struct{})}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		tb.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		tb.Fatalf("MONITOR: %q %v", line, err)
	}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, strings.TrimSpace(line))
			m.mu.Unlock()
			select {
			case m.seen <- struct{}{}:
			default:
			}
		}
	}()
	tb.Cleanup(func() { conn.Close(); <-m.done })
	return m
}

// cut returns the lines Redis printed since the last cut, up to a marker
// command the test sends now: every command that ran before it.
func (m *redisMonitor) cut(tb testing.TB, rdb *redis.Client) []string {
	tb.Helper()
	marker := "e2e-cut-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := rdb.Echo(tb.Context(), marker).Err(); err != nil {
		tb.Fatal(err)
	}
	deadline := time.After(fleetWait)
	for {
		m.mu.Lock()
		for i, l := range m.lines {
			if strings.Contains(l, marker) {
				got := m.lines[:i]
				m.lines = append([]string(nil), m.lines[i+1:]...)
				m.mu.Unlock()
				return got
			}
		}
		m.mu.Unlock()
		select {
		case <-m.seen:
		case <-deadline:
			tb.Fatalf("MONITOR did not print the marker %s", marker)
		}
	}
}

// naming returns the lines of the commands sent by clients (not those a
// script ran) that name key; with only, those of command only (as MONITOR
// prints it: "evalsha").
func naming(lines []string, key, only string) []string {
	var got []string
	for _, l := range lines {
		if strings.Contains(l, `"`+key+`"`) && !strings.Contains(l, " lua] ") && (only == "" || strings.Contains(l, `] "`+only+`" `)) {
			got = append(got, l)
		}
	}
	return got
}

// TestRevlogHotValidationNoRedis validates a JWT and an opaque token again
// and again across three replicas: once each replica has checked a token,
// its validations cost no Redis command (no MGET of the JWT's keys, no
// script reading the opaque token's record: MONITOR sees none naming their
// keys), and the decisions metric counts every one of them as log_live.
// The threshold is 1 s here, not the default: the test is about where
// decisions come from, and a replica starved of CPU for 100 ms on a busy
// machine would rightly read Redis.
func TestRevlogHotValidationNoRedis(t *testing.T) {
	const rounds = 300 // validations of each token
	srv := redistest.NewConfiguredServer(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	f := startRevlogFleet(t, bin, creds, srv, 3, time.Second)
	jwt := f.reps[0].issue(t, creds.svc, "")
	opq := f.reps[1].issue(t, creds.opaque, "")
	if !strings.HasPrefix(opq.AccessToken, token.OpaquePrefix) || strings.HasPrefix(jwt.AccessToken, token.OpaquePrefix) {
		t.Fatalf("tokens %.12q… and %.12q…: want a JWT and an opaque token", jwt.AccessToken, opq.AccessToken)
	}
	jwtKey := redisstore.DefaultKeyPrefix + "{svc}:" + jwt.TokenID.String()
	opqKey := redisstore.DefaultKeyPrefix + "o:" + opq.TokenID.String()
	for _, key := range []string{jwtKey, opqKey} {
		if n, err := f.rdb.Exists(t.Context(), key).Result(); err != nil || n != 1 {
			t.Fatalf("session key %s: exists %d, %v; the key names this test watches are wrong", key, n, err)
		}
	}
	mon := startMonitor(t, srv.Addr)
	mon.cut(t, f.rdb)

	// Warm-up: each replica validates each token once.
	var before []map[string]float64
	for _, p := range f.reps {
		before = append(before, p.decisions(t))
	}
	mgetBefore := commandCalls(t, f.rdb, "mget")
	for i, p := range f.reps {
		p.mustValidate(t, jwt, 11)
		p.mustValidate(t, opq, 12)
		d := p.decisions(t)
		reads := redisDecisions(d) - redisDecisions(before[i])
		if all := reads + d["log_live"] - before[i]["log_live"]; reads > 2 || all != 2 {
			t.Errorf("%s's first validation of each token: decisions %v, then %v; want 2, at most one reading Redis for each token", p.name, before[i], d)
		}
		before[i] = d
	}
	warm := mon.cut(t, f.rdb)
	warmMget := commandCalls(t, f.rdb, "mget") - mgetBefore
	// A read is an EVALSHA, and an EVAL after it where Redis had no script.
	warmOpaque := naming(warm, opqKey, "evalsha")
	if len(warmOpaque) == 0 || len(warmOpaque) > len(f.reps) {
		t.Errorf("first validations of the opaque token at %d replicas: %d EVALSHAs name its record, want 1 to %d (each replica reads it once, then caches it):\n%s",
			len(f.reps), len(warmOpaque), len(f.reps), strings.Join(warmOpaque, "\n"))
	}
	if warmMget > int64(len(f.reps)) {
		t.Errorf("first validations of the JWT at %d replicas: %d MGETs, want at most one each", len(f.reps), warmMget)
	}

	// Hot: every validation from memory.
	mgetBefore = commandCalls(t, f.rdb, "mget")
	for i := range rounds {
		p := f.reps[i%len(f.reps)]
		p.mustValidate(t, jwt, 11)
		p.mustValidate(t, opq, 12)
	}
	hot := mon.cut(t, f.rdb)
	if n := commandCalls(t, f.rdb, "mget") - mgetBefore; n != 0 {
		t.Errorf("%d validations of a hot JWT across %d replicas: %d MGETs (the session check), want 0", rounds, len(f.reps), n)
	}
	for _, key := range []string{jwtKey, opqKey} {
		if got := naming(hot, key, ""); len(got) != 0 {
			t.Errorf("%d validations of hot tokens: %d commands name %s, want 0; first:\n%s", rounds, len(got), key, got[0])
		}
	}
	var live float64
	for i, p := range f.reps {
		d := p.decisions(t)
		live += d["log_live"] - before[i]["log_live"]
		if n := redisDecisions(d) - redisDecisions(before[i]); n != 0 {
			t.Errorf("%s: %v validations of hot tokens read Redis (decisions before %v, after %v), want 0", p.name, n, before[i], d)
		}
	}
	if live != 2*rounds {
		t.Errorf("log_live grew by %v over %d validations of hot tokens, want all of them", live, 2*rounds)
	}
	t.Logf("warm-up: %d MGETs, %d EVALSHAs reading the opaque record; %d hot validations: %d commands in all reached Redis (heartbeats, reads of the log, leases)",
		warmMget, len(warmOpaque), 2*rounds, len(hot))
}

// TestRevlogFaults produces each fault of docs/revocation.md's table under
// two replicas, each on a redis-server and replicas of its own, and checks
// the guarantee and that validation is hot again after it.
func TestRevlogFaults(t *testing.T) {
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	// setup is a fleet with a live token hot at every replica, a token
	// revoked at the first replica and refused everywhere, and a token hot
	// everywhere then revoked at the second replica, last, and validated
	// nowhere since: checked after the fault once the replicas decide from
	// memory again, it shows what their memory holds (a token a replica
	// refused on Redis's word stays refused whatever the log says).
	type fixture struct {
		*revlogFleet
		live, revoked, unseen fleetToken
		revokedAt, unseenAt   time.Time
	}
	setup := func(t *testing.T, srv *redistest.Server) fixture {
		t.Helper()
		f := fixture{revlogFleet: startRevlogFleet(t, bin, creds, srv, 2, revlogThreshold)}
		f.live, f.revoked, f.unseen = f.issue(t, f.reps[0], creds.svc), f.issue(t, f.reps[1], creds.svc), f.issue(t, f.reps[0], creds.svc)
		f.mustBeHot(t, f.live, "before the fault")
		f.mustBeHot(t, f.revoked, "before its revocation")
		f.mustBeHot(t, f.unseen, "before its revocation")
		f.revokedAt = f.revoke(t, f.reps[0], creds.svc, f.revoked)
		f.mustRefuse(t, f.revoked, f.revokedAt, "after its revocation")
		f.unseenAt = f.revoke(t, f.reps[1], creds.svc, f.unseen)
		return f
	}

	// CLIENT KILL ends every replica's connections, the follower's held in
	// XREAD BLOCK among them: the follower reads again on a new one (its
	// client retries the read, or it resyncs), and nothing is missed.
	t.Run("client kill", func(t *testing.T) {
		f := setup(t, redistest.NewConfiguredServer(t))
		old := f.readers(t)
		if len(old) != len(f.reps) {
			t.Fatalf("clients whose last command is XREAD: %v, want one a replica", old)
		}
		resyncsBefore := f.resyncs(t, "error", "start", "epoch", "loss", "unapplied", "trimmed", "quiet", "entry", "backlog")
		n, err := f.rdb.ClientKillByFilter(t.Context(), "TYPE", "normal").Result()
		if err != nil || n < int64(2*len(f.reps)) {
			t.Fatalf("CLIENT KILL TYPE normal: %d, %v; want every replica's connections, at least %d", n, err, 2*len(f.reps))
		}
		after := f.issue(t, f.reps[0], creds.svc)
		f.mustBeLive(t, after, "issued after the kill")
		afterAt := f.revoke(t, f.reps[1], creds.svc, after)
		for deadline := time.Now().Add(fleetWait); ; time.Sleep(20 * time.Millisecond) {
			now := f.readers(t)
			fresh := 0
			for id := range now {
				if !old[id] {
					fresh++
				}
			}
			if fresh >= len(f.reps) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("followers did not read again on new connections: XREAD clients %v before the kill, %v now", old, now)
			}
		}
		f.mustBeHot(t, f.live, "after the kill")
		f.mustRefuse(t, f.unseen, f.unseenAt, "revoked just before the kill")
		f.mustRefuse(t, f.revoked, f.revokedAt, "revoked before the kill")
		f.mustRefuse(t, after, afterAt, "revoked after the kill")
		t.Logf("CLIENT KILL ended %d connections; resyncs of any reason by replica: %v before, %v after",
			n, resyncsBefore, f.resyncs(t, "error", "start", "epoch", "loss", "unapplied", "trimmed", "quiet", "entry", "backlog"))
	})

	t.Run("frozen redis", func(t *testing.T) {
		srv := redistest.NewConfiguredServer(t)
		f := setup(t, srv)
		live := f.live
		// A token hot everywhere, revoked just before the freeze.
		last := f.issue(t, f.reps[1], creds.svc)
		f.mustBeHot(t, last, "before its revocation")
		lastAt := f.revoke(t, f.reps[0], creds.svc, last)
		srv.Signal(syscall.SIGSTOP)
		frozenAt, frozen := time.Now(), true
		t.Cleanup(func() {
			if frozen {
				srv.Signal(syscall.SIGCONT)
			}
		})
		// Every replica at once (each answer takes the Redis timeout):
		// the live token, asked until a validation sent a threshold after
		// the freeze has answered, is never accepted then (the replica
		// cannot know it is still live: it fails closed, 503), nor is the
		// revoked one after its revocation's bound.
		type answer struct {
			what   string
			sent   time.Time
			status int
			err    error
		}
		answers := make([][]answer, len(f.reps))
		var wg sync.WaitGroup
		for i, p := range f.reps {
			wg.Go(func() {
				for _, c := range []struct {
					what string
					tok  fleetToken
				}{{"live", live}, {"revoked", last}} {
					for {
						sent := time.Now()
						a := faultDo(fleetHTTP, http.MethodGet, p.url("/token/validate"), nil, c.tok.AccessToken, nil)
						answers[i] = append(answers[i], answer{c.what, sent, a.status, a.err})
						if a.err != nil || sent.After(frozenAt.Add(f.threshold)) {
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		// The heartbeat age says so too, while Redis is still frozen.
		for _, p := range f.reps {
			if age := p.series(t)["snowtoken_revlog_heartbeat_age_seconds"]; age != -1 && age < f.threshold.Seconds() {
				t.Errorf("%s, %v after Redis froze: snowtoken_revlog_heartbeat_age_seconds %v, want past the threshold %v (or -1)",
					p.name, time.Since(frozenAt).Round(time.Millisecond), age, f.threshold)
			}
		}
		srv.Signal(syscall.SIGCONT)
		frozen = false
		for i, p := range f.reps {
			for _, a := range answers[i] {
				after := a.sent.Sub(frozenAt)
				switch {
				case a.err != nil:
					t.Errorf("%s token at %s, %v after the freeze: %v", a.what, p.name, after, a.err)
				case a.what == "live" && a.sent.After(frozenAt.Add(f.threshold)) && a.status != http.StatusServiceUnavailable:
					t.Errorf("live token at %s, %v after Redis froze (threshold %v): %d, want 503: the replica cannot know", p.name, after.Round(time.Millisecond), f.threshold, a.status)
				case a.what == "live" && a.status != http.StatusOK && a.status != http.StatusServiceUnavailable:
					t.Errorf("live token at %s, %v after Redis froze: %d, want 200 or 503", p.name, after.Round(time.Millisecond), a.status)
				case a.what == "revoked" && a.sent.After(lastAt.Add(f.threshold)) && a.status == http.StatusOK:
					t.Errorf("token revoked %v before the freeze, at %s %v after it: accepted", frozenAt.Sub(lastAt).Round(time.Millisecond), p.name, after.Round(time.Millisecond))
				}
			}
			var seen []string
			for _, a := range answers[i] {
				seen = append(seen, fmt.Sprintf("%s %v: %d", a.what, a.sent.Sub(frozenAt).Round(time.Millisecond), a.status))
			}
			t.Logf("%s while Redis was frozen: %s", p.name, strings.Join(seen, ", "))
		}
		f.mustBeLive(t, live, "after SIGCONT")
		f.mustBeHot(t, live, "after SIGCONT")
		f.mustRefuse(t, f.unseen, f.unseenAt, "revoked before the freeze, after SIGCONT")
		f.mustRefuse(t, last, lastAt, "revoked just before the freeze, after SIGCONT")
	})

	// lost checks what a fault that empties Redis (FLUSHALL, a restart
	// without persistence) leaves: the tokens issued before are refused
	// (their records are gone, and the new epoch's horizon makes Redis
	// decide them) within the threshold of the loss; the revoked one
	// stays refused; a new token validates and becomes hot. Every
	// follower resyncs for one of reasons.
	lost := func(t *testing.T, lose func(*revlogFleet), reasons ...string) {
		f := setup(t, redistest.NewConfiguredServer(t))
		before := f.resyncs(t, reasons...)
		lostAt := time.Now()
		lose(f.revlogFleet)
		f.mustRefuse(t, f.live, lostAt, "issued before Redis lost everything")
		f.mustRefuse(t, f.revoked, f.revokedAt, "revoked before Redis lost everything")
		f.mustResync(t, before, nil, reasons...)
		fresh := f.issue(t, f.reps[1], creds.svc)
		f.mustBeHot(t, fresh, "issued after Redis lost everything")
		f.mustRefuse(t, f.unseen, f.unseenAt, "revoked just before Redis lost everything")
		f.mustRefuse(t, f.live, lostAt, "issued before Redis lost everything, at the end")
	}
	t.Run("flushall", func(t *testing.T) {
		lost(t, func(f *revlogFleet) {
			if err := f.rdb.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}, "epoch")
	})
	t.Run("restart without persistence", func(t *testing.T) {
		// The restart ends the followers' connections: a follower whose
		// read fails first (on a loaded machine, a timeout while Redis
		// starts) resyncs for the error, and that full read is in the new
		// epoch; one that reads a heartbeat of the new epoch first resyncs
		// for the epoch. Either is the resync the loss needs.
		lost(t, func(f *revlogFleet) { f.srv.Stop(); f.srv.Start() }, "epoch", "error")
	})

	t.Run("restart with aof", func(t *testing.T) {
		f := setup(t, redistest.NewDurableServer(t))
		epoch := func() string {
			e, err := f.rdb.Get(t.Context(), revlogKey+":epoch").Result()
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		epochBefore, lossBefore := epoch(), f.resyncs(t, "loss", "epoch")
		f.srv.Stop()
		f.srv.Start()
		f.mustBeLive(t, f.live, "after the restart")
		f.mustBeHot(t, f.live, "after the restart")
		f.mustRefuse(t, f.unseen, f.unseenAt, "revoked just before the restart")
		f.mustRefuse(t, f.revoked, f.revokedAt, "revoked before the restart")
		if e := epoch(); e != epochBefore {
			t.Errorf("epoch %q after a restart that lost nothing, was %q", e, epochBefore)
		}
		if now := f.resyncs(t, "loss", "epoch"); fmt.Sprint(now) != fmt.Sprint(lossBefore) {
			t.Errorf("resyncs for loss or epoch after a restart that lost nothing: %v, were %v", now, lossBefore)
		}
	})

	// The log trimmed past a follower: replica 12 is stopped (SIGSTOP) so
	// that its follower has no read pending when the revocation's entry is
	// appended (a heartbeat written after the stop answers the read it had
	// pending), and the entry is trimmed before it reads again. Without the
	// stop every follower reads an entry as Redis appends it, and a trim
	// right after a revoke passes them all by.
	t.Run("log trimmed", func(t *testing.T) {
		f := setup(t, redistest.NewConfiguredServer(t))
		live, a, b := f.live, f.reps[0], f.reps[1]
		tok := f.issue(t, a, creds.svc)
		f.mustBeHot(t, tok, "before its revocation")
		before := f.resyncs(t, "trimmed", "unapplied", "loss")
		if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := true
		t.Cleanup(func() {
			if stopped {
				b.cmd.Process.Signal(syscall.SIGCONT)
			}
		})
		hbID := func() string {
			r, err := f.rdb.XRevRangeN(t.Context(), revlogKey+":hb", "+", "-", 1).Result()
			if err != nil || len(r) != 1 {
				t.Fatalf("XREVRANGE %s:hb: %v %v", revlogKey, r, err)
			}
			return r[0].ID
		}
		for i, id, deadline := 0, hbID(), time.Now().Add(fleetWait); i < 2; time.Sleep(5 * time.Millisecond) {
			if next := hbID(); next != id {
				i, id = i+1, next
			}
			if time.Now().After(deadline) {
				t.Fatal("no heartbeat written after replica 12 was stopped")
			}
		}
		revokedAt := f.revoke(t, a, creds.svc, tok)
		if n, err := f.rdb.XTrimMaxLen(t.Context(), revlogKey, 0).Result(); err != nil || n < 1 {
			t.Fatalf("XTRIM %s MAXLEN 0: %d, %v; want the entry of the revocation trimmed", revlogKey, n, err)
		}
		if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		stopped = false
		// Asked while it resyncs, replica 12 would read Redis, whose
		// answer (revoked) sticks to its cached token and hides what its
		// memory says: ask once it decides from memory again.
		f.mustResync(t, before, []int{1}, "trimmed", "unapplied", "loss")
		f.mustBeHot(t, live, "after the trim")
		f.mustRefuse(t, tok, revokedAt, "revoked, its log entry trimmed before "+b.name+" read it")
	})
}

// TestRevlogReadYourWrites: the replica that answered a revoke refuses the
// token on the next request, before its follower reads the entry back:
// a token it validated (cached), and one it never saw (issued at another
// replica, revoked here, validated here first after).
func TestRevlogReadYourWrites(t *testing.T) {
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	f := startRevlogFleet(t, bin, creds, redistest.NewConfiguredServer(t), 2, time.Second)
	a, b := f.reps[0], f.reps[1]
	for range 20 {
		seen, unseen := f.issue(t, a, creds.svc), f.issue(t, a, creds.svc)
		b.mustValidate(t, seen, a.worker(t))
		for _, tok := range []fleetToken{seen, unseen} {
			if status := b.revoke(t, creds.svc, tok); status != http.StatusOK {
				t.Fatalf("revoke at %s: %d", b.name, status)
			}
			if status, _ := b.validate(t, tok); status != http.StatusUnauthorized {
				t.Fatalf("token %d at %s right after %s revoked it: %d, want 401", tok.TokenID, b.name, b.name, status)
			}
		}
	}
}

// TestRevlogFeedConsumer: a consuming service in Local mode following the
// revocation feed of a real replica (client.Follow) refuses a token once
// it was revoked at another replica, and one of a subject revoked there.
func TestRevlogFeedConsumer(t *testing.T) {
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	f := startRevlogFleet(t, bin, creds, redistest.NewConfiguredServer(t), 2, revlogThreshold)
	v := startFollower(t, f.reps[0], creds.admin)
	refused := func(tok fleetToken, why string) { t.Helper(); consumerRefuses(t, v, tok, why) }
	tok := f.issue(t, f.reps[1], creds.svc)
	if _, err := v.Validate(t.Context(), tok.AccessToken); err != nil {
		t.Fatalf("a live token: %v", err)
	}
	if status := f.reps[1].revoke(t, creds.svc, tok); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	refused(tok, "revoked at another replica")
}
