package handlers_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// skewClock is the real clock moved by an offset, or held still: unlike
// clocktest.Clock it runs, so a generator that has used up a millisecond moves on.
type skewClock struct {
	mu     sync.Mutex
	off    time.Duration
	frozen time.Time // zero while running
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen.IsZero() {
		return c.frozen
	}
	return time.Now().Add(c.off)
}

// Run sets the clock running at off from real time.
func (c *skewClock) Run(off time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off, c.frozen = off, time.Time{}
}

// Hold stops the clock at off from real time now.
func (c *skewClock) Hold(off time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = time.Now().Add(off)
}

// rollbackPhase is a stage of TestClockRollbackUnderLoad.
type rollbackPhase int32

const (
	phaseNormal   rollbackPhase = iota
	phase3ms                    // stepping back 3 ms: waited out
	phase2s                     // held 2 s behind: 503, Retry-After >= 2, ready
	phase2sCatch                // running 2 s behind until it catches up
	phase1h                     // running 1 h behind: 503, not ready
	phaseCaughtUp               // back on time
	phases
)

var phaseNames = [phases]string{"normal", "3 ms back", "2 s back", "catching up 2 s", "1 h back", "caught up"}

// issueResult is one POST /token of the load.
type issueResult struct {
	sent, answered rollbackPhase // phase when sent and when answered
	start, end     time.Time
	status         int
	retryAfter     string
	code           string
	id             snowflakealg.ID
	err            error
}

// TestClockRollbackUnderLoad moves the ID generator's clock back by each
// tier of the rollback policy while eight goroutines issue tokens: 3 ms is
// waited out with no error; 2 s answers 503 with Retry-After >= 2 while
// /readyz stays 200, and heals as the clock catches up; 1 h answers 503 and
// /readyz 503 with a reason; once the clock is back, all is well. No ID is
// ever issued twice. TestClockRollback (outage_test.go) is the same, one
// request at a time.
func TestClockRollbackUnderLoad(t *testing.T) {
	t.Parallel()
	const workers = 8
	clock := &skewClock{}
	srv := redistest.NewServer(t)
	e := newEnv(t, withIDClock(clock.Now), withRedis(srv.Client(), "rollback:"))
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	auth := basic(e.Normal.ID, e.Normal.Secret)

	var (
		phase  atomic.Int32
		stop   atomic.Bool
		counts [phases]atomic.Int64 // answers sent and answered in one phase
		oks    [phases]atomic.Int64 // of those, 200s
		wg     sync.WaitGroup
	)
	results := make([][]issueResult, workers)
	for w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				r := issueResult{sent: rollbackPhase(phase.Load()), start: time.Now()}
				req, _ := http.NewRequest(http.MethodPost, e.URL+"/token", strings.NewReader(form))
				req.Header.Set("Content-Type", formType)
				req.Header.Set("Authorization", auth)
				resp, err := hc.Do(req)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					r.status, r.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
				}
				r.end, r.answered, r.err = time.Now(), rollbackPhase(phase.Load()), err
				if err == nil && r.status == http.StatusOK {
					var out issued
					if r.err = json.Unmarshal(body, &out); r.err == nil {
						r.err = json.Unmarshal(out.JTI, &r.id)
					}
				} else if err == nil {
					var oe struct {
						Error string `json:"error"`
					}
					json.Unmarshal(body, &oe)
					r.code = oe.Error
				}
				results[w] = append(results[w], r)
				if r.sent == r.answered {
					counts[r.sent].Add(1)
					if r.status == http.StatusOK {
						oks[r.sent].Add(1)
					}
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	// waitFor polls until n answers of phase p (200s when ok) are in.
	waitFor := func(p rollbackPhase, n int64, ok bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		c := &counts[p]
		if ok {
			c = &oks[p]
		}
		for c.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d answers after 30 s, want %d", phaseNames[p], c.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	enter := func(p rollbackPhase, move func()) {
		move()
		phase.Store(int32(p))
	}
	ready := func(want int, reason string) {
		t.Helper()
		for range 3 {
			r := e.do(t, http.MethodGet, "/readyz", nil, nil)
			if r.Status != want {
				t.Fatalf("%s: /readyz %d %s, want %d", phaseNames[phase.Load()], r.Status, r.Body, want)
			}
			if got, _ := r.object(t)["reason"].(string); !strings.Contains(got, reason) {
				t.Fatalf("%s: /readyz reason %q, want one with %q", phaseNames[phase.Load()], got, reason)
			}
		}
	}

	waitFor(phaseNormal, 200, true)
	before := e.IDs.Stats()
	// A rollback shows only if an ID is asked for within 3 ms of it: step
	// back 3 ms again every 5 ms (never more than 3 ms behind the newest
	// reading) until the generator has seen one.
	off := -3 * time.Millisecond
	enter(phase3ms, func() { clock.Run(off) })
	for deadline := time.Now().Add(30 * time.Second); e.IDs.Stats().Rollbacks == before.Rollbacks; off -= 3 * time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("3 ms back: the generator saw no rollback in 30 s (stats %+v)", e.IDs.Stats())
		}
		time.Sleep(5 * time.Millisecond)
		clock.Run(off - 3*time.Millisecond)
	}
	waitFor(phase3ms, 200, true)
	rolled3ms := e.IDs.Stats().Rollbacks - before.Rollbacks
	enter(phase2s, func() { clock.Hold(off - 2*time.Second) })
	waitFor(phase2s, 200, false)
	ready(http.StatusOK, "")
	enter(phase2sCatch, func() { clock.Run(off - 2*time.Second) })
	ready(http.StatusOK, "")
	waitFor(phase2sCatch, 200, true)
	enter(phase1h, func() { clock.Run(off - time.Hour) })
	waitFor(phase1h, 100, false)
	ready(http.StatusServiceUnavailable, "behind")
	enter(phaseCaughtUp, func() { clock.Run(0) })
	ready(http.StatusOK, "")
	waitFor(phaseCaughtUp, 200, true)
	stop.Store(true)
	wg.Wait()

	all := slices.Concat(results...)
	var (
		ids        []snowflakealg.ID
		byPhase    [phases]map[int]int
		firstHeal  time.Time // end of the first 200 while catching up from 2 s
		transition int
	)
	for i := range byPhase {
		byPhase[i] = map[int]int{}
	}
	for _, r := range all {
		if r.err != nil {
			t.Fatalf("POST /token in %s: %v", phaseNames[r.sent], r.err)
		}
		if r.status == http.StatusOK {
			ids = append(ids, r.id)
			if r.sent == phase2sCatch && r.answered == phase2sCatch && (firstHeal.IsZero() || r.end.Before(firstHeal)) {
				firstHeal = r.end
			}
		}
	}
	for _, r := range all {
		ra, _ := strconv.Atoi(r.retryAfter)
		unavailable := r.status == http.StatusServiceUnavailable && r.code == "temporarily_unavailable" && ra >= 1
		if r.sent != r.answered {
			transition++
			if r.status != http.StatusOK && !unavailable {
				t.Errorf("POST /token from %s into %s: %d %q, Retry-After %q; want 200 or 503 with Retry-After",
					phaseNames[r.sent], phaseNames[r.answered], r.status, r.code, r.retryAfter)
			}
			continue
		}
		byPhase[r.sent][r.status]++
		var ok bool
		switch r.sent {
		case phaseNormal, phase3ms, phaseCaughtUp:
			ok = r.status == http.StatusOK
		case phase2s:
			ok = unavailable && ra >= 2
		case phase2sCatch:
			// Retry-After falls as the clock catches up; after the first 200, only 200s.
			ok = r.status == http.StatusOK || unavailable && r.start.Before(firstHeal)
		case phase1h:
			ok = unavailable
		}
		if !ok {
			t.Errorf("POST /token in %s: %d %q, Retry-After %q", phaseNames[r.sent], r.status, r.code, r.retryAfter)
		}
	}
	slices.Sort(ids)
	dups := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			dups++
		}
	}
	if dups != 0 {
		t.Errorf("%d duplicate IDs among %d", dups, len(ids))
	}
	report := make([]string, phases)
	for p := range phases {
		report[p] = phaseNames[p] + " " + strconv.Itoa(byPhase[p][http.StatusOK]) + "×200 " + strconv.Itoa(byPhase[p][http.StatusServiceUnavailable]) + "×503"
	}
	t.Logf("%d requests by %d goroutines (%s; %d across a clock move); 3 ms steps back: %d, rollbacks waited out: %d; %d IDs, %d duplicates",
		len(all), workers, strings.Join(report, ", "), transition, -off/(3*time.Millisecond), rolled3ms, len(ids), dups)
}

// replyCutter is a TCP proxy in front of Redis that, once armed, cuts the
// connection that carries the next reply instead of passing the reply on:
// the command has run, but the client never hears so.
type replyCutter struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	cut   atomic.Int64
}

func newReplyCutter(tb testing.TB, to string) *replyCutter {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &replyCutter{ln: ln, to: to}
	tb.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *replyCutter) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r, err := net.Dial("tcp", p.to)
			if err != nil {
				return
			}
			defer r.Close()
			go func() { io.Copy(r, c); r.Close() }()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 && p.armed.CompareAndSwap(true, false) {
					p.cut.Add(1)
					return
				}
				if n > 0 {
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestIssueRedisReplyLost loses Redis's reply to the command that stores a
// new session, as a Redis crash or a network cut can. The Redis client sends
// the command again and finds the session it stored the first time: that is
// a 503 to retry, never a 500.
func TestIssueRedisReplyLost(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	cutter := newReplyCutter(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: cutter.ln.Addr().String()})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, withRedis(rdb, "lost:"))
	e.issue(t, e.Normal, nil) // the connection is open and the script loaded

	cutter.armed.Store(true)
	r := e.post(t, "/token", &e.Normal, url.Values{"grant_type": {"client_credentials"}})
	if cutter.cut.Load() != 1 {
		t.Fatalf("the proxy cut %d replies, want 1", cutter.cut.Load())
	}
	wantUnavailable(t, r, 1)
	if r := e.validate(t, e.issue(t, e.Normal, nil).AccessToken); r.Status != http.StatusOK {
		t.Fatalf("a new token after the lost reply: %d %s", r.Status, r.Body)
	}
}
