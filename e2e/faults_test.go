package e2e

// The tests in this file inject faults into real snowtoken processes (built
// once by fleetBinary) and real redis-server processes, and check what the
// clients see: Redis killed and restarted under load, SIGTERM under load,
// and hostile clients. They use the helpers of replicas_test.go. Waits have
// deadlines for a hung test; the one timing asserted is the recovery bound
// after Redis returns.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/timingtest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// faultRecoveryBound is how soon after Redis answers again the issuer must
// issue again.
const faultRecoveryBound = 2 * time.Second

// faultOutageLogLines bounds the lines an issuer may write while Redis is
// down, however many requests fail: repeated failures are logged once and
// then summarised, and counted in full by snowtoken_unavailable_total.
const faultOutageLogLines = 20

// faultHTTP returns a client that keeps up to conns connections alive, so a
// load of conns goroutines does not open a connection per request.
func faultHTTP(conns int) *http.Client {
	return &http.Client{Timeout: fleetWait, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// basicAuth is c's RFC 6749 §2.3.1 Authorization header value.
func (c fleetClient) basicAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.id)+":"+url.QueryEscape(c.secret)))
}

// faultAnswer is one request as its client saw it.
type faultAnswer struct {
	start, end time.Time
	status     int
	header     http.Header
	body       []byte
	err        error // transport error: no answer
	// What the transport did for the last try: it got a connection (reused
	// from its pool or new), and wrote the whole request on it.
	gotConn, reused, wrote bool
}

// code is the OAuth2 error code of the answer, if any.
func (a faultAnswer) code() string {
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	return e.Error
}

// badUnavailable says what is wrong with a 503, or "" if it is a proper
// temporarily_unavailable with a Retry-After of at least one second.
func (a faultAnswer) badUnavailable() string {
	ra, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || ra < 1 || a.code() != "temporarily_unavailable" {
		return fmt.Sprintf("503 with Retry-After %q, body %s", a.header.Get("Retry-After"), a.body)
	}
	return ""
}

// faultDo sends one request (newCall's) without failing the test, for load
// goroutines.
func faultDo(hc *http.Client, method, target string, c *fleetClient, bearer string, form url.Values) (a faultAnswer) {
	a.start = time.Now()
	defer func() { a.end = time.Now() }()
	req, err := newCall(method, target, c, bearer, form)
	if err != nil {
		a.err = err
		return a
	}
	var gotConn, reused, wrote atomic.Bool // the transport's goroutines call the trace
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn:      func(i httptrace.GotConnInfo) { gotConn.Store(true); reused.Store(i.Reused); wrote.Store(false) },
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	}))
	resp, err := hc.Do(req)
	a.gotConn, a.reused, a.wrote = gotConn.Load(), reused.Load(), wrote.Load()
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, a.err = io.ReadAll(resp.Body)
	return a
}

// lines is how many lines the process has written so far.
func (p *issuer) lines() int {
	return strings.Count(p.out.String(), "\n")
}

// metric reads the value of an unlabelled series from p's /metrics.
func (p *issuer) metric(tb testing.TB, name string) float64 {
	tb.Helper()
	status, _, body := fleetCall(tb, http.MethodGet, p.metricsURL(tb), nil, "", nil)
	if status != http.StatusOK {
		tb.Fatalf("GET /metrics: %d", status)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("/metrics: %q: %v", line, err)
			}
			return f
		}
	}
	tb.Fatalf("/metrics has no series %s", name)
	return 0
}

// faultToken reads the token of a 200 from POST /token.
func (a faultAnswer) faultToken() (fleetToken, error) {
	var tok fleetToken
	if err := json.Unmarshal(a.body, &tok); err != nil || tok.AccessToken == "" || tok.TokenID == 0 {
		return tok, fmt.Errorf("POST /token answered 200 with %s (%v)", a.body, err)
	}
	return tok, nil
}

// tokenFate is what a load client knows about one of its tokens.
type tokenFate int

const (
	tokenLive        tokenFate = iota // issued with 200, never revoked
	tokenRevoked                      // POST /token/revoke answered 200
	tokenMaybeRevoke                  // POST /token/revoke answered 503: it may have happened
)

func (f tokenFate) String() string {
	return [...]string{"live", "revoked", "revoke unanswered"}[f]
}

// loadOp is one request of TestFaultRedisKilledUnderLoad's load.
type loadOp struct {
	kind string    // "issue", "validate" or "revoke"
	fate tokenFate // of the token validated or revoked, when sent
	faultAnswer
}

// TestFaultRedisKilledUnderLoad kills Redis (an append-only file fsynced on
// every write, so that what it acknowledged survives) while 16 clients
// issue, validate and revoke tokens, and starts it again on the same port.
// While Redis is down every answer is a 503 with Retry-After; a token that
// was valid is never refused with 401 and a revoked one never validates,
// before or after; every token issued with 200 and not revoked validates
// after the restart (nothing was answered 200 that was not stored); and the
// issuer issues again within faultRecoveryBound of Redis answering. While
// Redis is down 64 more clients validate as fast as they are answered: the
// issuer still writes at most faultOutageLogLines lines, and
// snowtoken_unavailable_total counts every 503.
func TestFaultRedisKilledUnderLoad(t *testing.T) {
	const (
		clients      = 16
		floodClients = 64
	)
	srv := redistest.NewDurableServer(t)
	// The production lease TTL (10 s) outlives the outage: the test is about
	// the sessions, not about a lost worker lease.
	p := startIssuer(t, issuerOpts{redis: srv.URL(), env: []string{"SNOWTOKEN_WORKER_ID", "31", "SNOWTOKEN_WORKER_LEASE_TTL", "10s"}})
	creds := p.creds

	hc := faultHTTP(clients)
	var (
		stop   atomic.Bool
		issued atomic.Int64
		wg     sync.WaitGroup
	)
	ops := make([][]loadOp, clients)
	toks := make([][]fleetToken, clients)
	fates := make([][]tokenFate, clients)
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 31))
			for !stop.Load() {
				n := rng.IntN(10)
				switch {
				case n < 4 || len(toks[c]) == 0:
					a := faultDo(hc, http.MethodPost, p.url("/token"), &creds.svc, "", url.Values{"grant_type": {"client_credentials"}})
					ops[c] = append(ops[c], loadOp{kind: "issue", faultAnswer: a})
					if a.err == nil && a.status == http.StatusOK {
						tok, err := a.faultToken()
						if err != nil {
							ops[c][len(ops[c])-1].err = err
							continue
						}
						toks[c], fates[c] = append(toks[c], tok), append(fates[c], tokenLive)
						issued.Add(1)
					}
				case n < 8:
					i := rng.IntN(len(toks[c]))
					a := faultDo(hc, http.MethodGet, p.url("/token/validate"), nil, toks[c][i].AccessToken, nil)
					ops[c] = append(ops[c], loadOp{kind: "validate", fate: fates[c][i], faultAnswer: a})
				default:
					i := rng.IntN(len(toks[c]))
					if fates[c][i] == tokenRevoked {
						continue
					}
					a := faultDo(hc, http.MethodPost, p.url("/token/revoke"), &creds.svc, "", url.Values{"token": {toks[c][i].AccessToken}})
					ops[c] = append(ops[c], loadOp{kind: "revoke", fate: fates[c][i], faultAnswer: a})
					switch {
					case a.err == nil && a.status == http.StatusOK:
						fates[c][i] = tokenRevoked
					case fates[c][i] == tokenLive:
						fates[c][i] = tokenMaybeRevoke
					}
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }() // on a Fatal below

	time.Sleep(time.Second)
	if issued.Load() == 0 {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("no token issued before Redis was killed; first answers: %+v", ops[0][:min(3, len(ops[0]))])
	}
	floodTok := p.issue(t, creds.svc, "")
	linesBefore := p.lines()
	srv.Stop()
	down := time.Now()
	// While Redis is down, floodClients more clients validate a token as
	// fast as they are answered, so that far more requests fail than the
	// issuer may write lines.
	var (
		flood     sync.WaitGroup
		stopFlood atomic.Bool
		flood503  atomic.Int64
	)
	floodHTTP := faultHTTP(floodClients)
	for range floodClients {
		flood.Go(func() {
			for !stopFlood.Load() {
				a := faultDo(floodHTTP, http.MethodGet, p.url("/token/validate"), nil, floodTok.AccessToken, nil)
				if a.err == nil && a.status == http.StatusOK && a.start.Sub(down) < revlogThreshold {
					continue // decided from memory while the follower was fresh
				}
				if a.err != nil || a.status != http.StatusServiceUnavailable {
					t.Errorf("validate while Redis is down: %d %.80s %v, want 503", a.status, a.body, a.err)
					return
				}
				flood503.Add(1)
			}
		})
	}
	// Longer than a request takes to give up on Redis (its dial retries, up
	// to the store's 2 s), so that there are answers while Redis is down,
	// and then until the flood has had enough 503s to prove the log bound:
	// a count, not a rate, so a slow machine only makes the outage longer
	// (by at most logsum's Interval, one more summary line per kind).
	time.Sleep(4 * time.Second)
	for deadline := time.Now().Add(10 * time.Second); flood503.Load() < 10*faultOutageLogLines && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	stopFlood.Store(true)
	flood.Wait()
	up := time.Now()
	outageLines := p.lines() - linesBefore
	srv.Start()
	answering := time.Now()
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()
	unavailableTotal := p.metric(t, "snowtoken_unavailable_total")

	var (
		all          []loadOp
		inOutage     = map[string]int{}
		outageTook   []time.Duration // how long the answers during the outage took
		statuses     = map[string]map[int]int{}
		firstIssueOK time.Time
		firstOK      time.Time
	)
	for _, o := range ops {
		all = append(all, o...)
	}
	for _, o := range all {
		if statuses[o.kind] == nil {
			statuses[o.kind] = map[int]int{}
		}
		statuses[o.kind][o.status]++
		if o.err != nil {
			t.Errorf("%s at %v: %v", o.kind, o.start.Sub(down).Round(time.Millisecond), o.err)
			continue
		}
		allowed := []int{http.StatusOK, http.StatusServiceUnavailable}
		switch {
		case o.kind == "validate" && o.fate == tokenRevoked:
			allowed = []int{http.StatusUnauthorized, http.StatusServiceUnavailable}
		case o.kind == "validate" && o.fate == tokenMaybeRevoke:
			allowed = append(allowed, http.StatusUnauthorized)
		}
		if !slices.Contains(allowed, o.status) {
			t.Errorf("%s of a %v token, %v after Redis was killed: %d %s, want one of %v",
				o.kind, o.fate, o.start.Sub(down).Round(time.Millisecond), o.status, o.body, allowed)
		}
		if o.status == http.StatusServiceUnavailable {
			if bad := o.badUnavailable(); bad != "" {
				t.Errorf("%s: %s", o.kind, bad)
			}
		}
		if !o.start.Before(down) && !o.end.After(up) {
			inOutage[o.kind]++
			outageTook = append(outageTook, o.end.Sub(o.start))
			// Validation decides from the revocation log in memory while
			// the follower is fresh, up to the threshold after its last
			// read before Redis went down; a token this replica revoked,
			// or Redis refused, stays refused (401) without Redis.
			fromMemory := o.kind == "validate" && (o.status == http.StatusOK && o.fate != tokenRevoked && o.start.Sub(down) < revlogThreshold ||
				o.status == http.StatusUnauthorized && o.fate != tokenLive)
			if o.status != http.StatusServiceUnavailable && !fromMemory {
				t.Errorf("%s of a %v token while Redis was down (%v to %v): %d %.80s, want 503", o.kind, o.fate, o.start.Sub(down), o.end.Sub(down), o.status, o.body)
			}
		}
		if o.status == http.StatusOK && o.end.After(up) {
			if firstOK.IsZero() || o.end.Before(firstOK) {
				firstOK = o.end
			}
			if o.kind == "issue" && (firstIssueOK.IsZero() || o.end.Before(firstIssueOK)) {
				firstIssueOK = o.end
			}
		}
	}
	if inOutage["issue"] == 0 || inOutage["validate"] == 0 {
		t.Fatalf("requests sent and answered while Redis was down: %v; the outage proves nothing", inOutage)
	}
	if n := flood503.Load(); n < 10*faultOutageLogLines {
		t.Fatalf("%d requests of the flood answered 503 during the outage; too few to prove the log bound", n)
	}
	if outageLines > faultOutageLogLines {
		t.Errorf("%d lines logged during the %v outage (%d requests answered 503 in it), want at most %d; last lines:\n%s",
			outageLines, up.Sub(down).Round(time.Millisecond), len(outageTook)+int(flood503.Load()), faultOutageLogLines, lastLines(p.out.String(), 10))
	}
	served503 := int(flood503.Load())
	for _, byStatus := range statuses {
		served503 += byStatus[http.StatusServiceUnavailable]
	}
	if int(unavailableTotal) != served503 {
		t.Errorf("snowtoken_unavailable_total = %v, want %d, the 503s answered", unavailableTotal, served503)
	}
	slices.Sort(outageTook)
	if firstIssueOK.IsZero() {
		t.Fatalf("no token issued after Redis came back; statuses %v", statuses)
	}
	recovery := max(firstIssueOK.Sub(answering), 0)
	timingtest.Within(t, "the first 200 from POST /token after Redis answered again", recovery, faultRecoveryBound)

	// After the restart: every token answered 200 and not revoked was stored,
	// and every revoked one stays revoked.
	var (
		check     sync.WaitGroup
		checkMu   sync.Mutex
		problems  []string
		perFate   [3]int
		next      atomic.Int64
		flatToks  []fleetToken
		flatFates []tokenFate
	)
	for c := range clients {
		flatToks, flatFates = append(flatToks, toks[c]...), append(flatFates, fates[c]...)
	}
	for _, f := range flatFates {
		perFate[f]++
	}
	for range clients {
		check.Go(func() {
			for i := int(next.Add(1) - 1); i < len(flatToks); i = int(next.Add(1) - 1) {
				tok, fate, want := flatToks[i], flatFates[i], http.StatusUnauthorized
				if fate == tokenLive {
					want = http.StatusOK
				}
				if fate == tokenMaybeRevoke {
					if a := faultDo(hc, http.MethodPost, p.url("/token/revoke"), &creds.svc, "", url.Values{"token": {tok.AccessToken}}); a.err != nil || a.status != http.StatusOK {
						checkMu.Lock()
						problems = append(problems, fmt.Sprintf("revoking token %d again: %d %s %v", tok.TokenID, a.status, a.body, a.err))
						checkMu.Unlock()
						continue
					}
				}
				if a := faultDo(hc, http.MethodGet, p.url("/token/validate"), nil, tok.AccessToken, nil); a.err != nil || a.status != want {
					checkMu.Lock()
					problems = append(problems, fmt.Sprintf("%v token %d after the restart: %d %s %v, want %d", fate, tok.TokenID, a.status, a.body, a.err, want))
					checkMu.Unlock()
				}
			}
		})
	}
	check.Wait()
	for i, pr := range problems {
		if i == 10 {
			t.Errorf("... and %d more", len(problems)-10)
			break
		}
		t.Error(pr)
	}
	t.Logf("%d requests by %d clients (statuses by kind %v); %v sent and answered during the %v outage, all 503 (in %v median, %v at most), "+
		"and %d more of %d clients validating as fast as answered; %d lines logged in it, snowtoken_unavailable_total %v; "+
		"tokens: %d live, %d revoked, %d with an unanswered revoke, all checked after the restart; "+
		"first 200 from POST /token %v after Redis answered again (first 200 of any kind %v)",
		len(all), clients, statuses, inOutage, up.Sub(down).Round(time.Millisecond),
		outageTook[len(outageTook)/2].Round(time.Millisecond), outageTook[len(outageTook)-1].Round(time.Millisecond),
		flood503.Load(), floodClients, outageLines, unavailableTotal,
		perFate[tokenLive], perFate[tokenRevoked], perFate[tokenMaybeRevoke],
		recovery.Round(time.Millisecond), max(firstOK.Sub(answering), 0).Round(time.Millisecond))
}

// heldIssue is a POST /token the server is provably handling: it sent its
// headers with Expect: 100-continue and the server answered 100 Continue,
// which net/http does only once the handler reads the body.
type heldIssue struct {
	conn net.Conn
	r    *bufio.Reader
	body string
}

// holdIssue sends the headers of a POST /token and waits for 100 Continue.
func holdIssue(tb testing.TB, addr string, c fleetClient) *heldIssue {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, fleetWait)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(fleetWait))
	h := &heldIssue{conn: conn, r: bufio.NewReader(conn), body: "grant_type=client_credentials"}
	head := "POST /token HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: " + c.basicAuth() +
		"\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\nContent-Length: " +
		strconv.Itoa(len(h.body)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		tb.Fatal(err)
	}
	line, err := h.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		tb.Fatalf("POST /token with Expect: 100-continue: %q, %v; want 100 Continue", line, err)
	}
	if blank, err := h.r.ReadString('\n'); err != nil || blank != "\r\n" {
		tb.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	return h
}

// finish sends the body and returns the final answer.
func (h *heldIssue) finish() (int, []byte, error) {
	if _, err := io.WriteString(h.conn, h.body); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(h.r, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// shutdownFate is what became of a request sent around a SIGTERM. A
// request is accepted when the server reads it; every accepted request must
// be answered. The others were never read, and the client may send them
// again.
type shutdownFate int

const (
	fateAnswered shutdownFate = iota
	// fateRefused: nothing was sent. Connecting failed (connection refused
	// once the listener is closed; reset for a handshake under way as it
	// closes), or the connection failed before the request was written.
	fateRefused
	// fateUnread: sent, but never read by the server. On a new connection,
	// a TCP reset: closing a listening socket resets the connections still
	// in the kernel's accept queue, which the server never took. (A server
	// that closes a connection after reading the request sends FIN, and the
	// client sees EOF.) On a kept-alive connection, the server closed it for
	// being idle just as the client sent, HTTP/1.1's race (RFC 9112 §9.3.1):
	// net/http drops what it reads on a connection it is closing, and
	// http.Transport sends idempotent requests again itself.
	fateUnread
	// fateLost: read by the server and never answered, or anything else.
	fateLost
)

// shutdownOutcome says what became of a, and names it for the report.
func shutdownOutcome(a faultAnswer) (shutdownFate, string) {
	var errno syscall.Errno
	reset := errors.As(a.err, &errno) && errno == syscall.ECONNRESET
	eof := errors.Is(a.err, io.EOF) || errors.Is(a.err, io.ErrUnexpectedEOF)
	closedIdle := strings.Contains(fmt.Sprint(a.err), "server closed idle connection")
	conn := "new connection"
	if a.reused {
		conn = "kept-alive connection"
	}
	switch {
	case a.err == nil:
		return fateAnswered, strconv.Itoa(a.status)
	case !a.gotConn && errors.As(a.err, &errno) && errno == syscall.ECONNREFUSED:
		return fateRefused, "connection refused"
	case !a.gotConn && reset:
		return fateRefused, "connect: connection reset"
	case !a.gotConn:
		return fateLost, "connect: " + a.err.Error()
	case !a.wrote:
		return fateRefused, conn + ", request not written"
	case !a.reused && reset:
		return fateUnread, conn + ": reset"
	case a.reused && (reset || eof || closedIdle):
		return fateUnread, conn + ": closed"
	case eof:
		return fateLost, conn + ": EOF"
	default:
		return fateLost, conn + ": " + a.err.Error()
	}
}

// TestFaultSIGTERMUnderLoad sends SIGTERM to an issuer saturated by 64
// clients asking for tokens over keep-alive connections, each sending again
// as soon as it is answered, while 8 more requests are inside the handler:
// those 8 are answered 200 after the listener has closed. No accepted
// request is lost: each request is answered 200, refused, or provably never
// read (see shutdownFate), and the tokens stored in Redis are exactly those
// answered 200, so no request the server handled lost its answer. The process exits 0, its
// lease key is gone and the saved mark covers its last ID; a new process
// with the same SNOWTOKEN_WORKER_ID issues only above the mark.
func TestFaultSIGTERMUnderLoad(t *testing.T) {
	const (
		clients   = 64
		saturated = 2 * time.Second
		held      = 8
		worker    = 32
	)
	redisURL, rdb := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	rv := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}
	wid := strconv.Itoa(worker)
	p := fleet{bin, creds}.start(t, replica{redis: rv, env: []string{"SNOWTOKEN_WORKER_ID", wid}})

	holds := make([]*heldIssue, held)
	for i := range holds {
		holds[i] = holdIssue(t, p.addr, creds.svc)
	}

	hc := faultHTTP(clients)
	var (
		stop      atomic.Bool
		signalled atomic.Bool
		issued    atomic.Int64
		wg        sync.WaitGroup
	)
	answers := make([][]faultAnswer, clients)
	for c := range clients {
		wg.Go(func() {
			for !stop.Load() {
				a := faultDo(hc, http.MethodPost, p.url("/token"), &creds.svc, "", url.Values{"grant_type": {"client_credentials"}})
				answers[c] = append(answers[c], a)
				if a.err == nil {
					issued.Add(1)
				} else if signalled.Load() {
					time.Sleep(5 * time.Millisecond) // refused: the listener is gone
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }() // on a Fatal below
	// Saturation: every client sends again as soon as it is answered, for
	// a few seconds before SIGTERM and through the drain.
	time.Sleep(saturated)
	deadline := time.Now().Add(fleetWait)
	issuedBefore := issued.Load()
	if issuedBefore < 300 {
		t.Fatalf("%d tokens issued in %v of load, want at least 300", issuedBefore, saturated)
	}

	signalled.Store(true)
	sigAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The held requests get their bodies only once new connections are refused.
	for {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections after SIGTERM", p.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
	closedAfter := time.Since(sigAt)
	answered := map[snowflakealg.ID]bool{}
	var maxID snowflakealg.ID
	for i, h := range holds {
		status, body, err := h.finish()
		if err != nil || status != http.StatusOK {
			t.Errorf("request %d, in the handler at SIGTERM: %d %s %v, want 200", i, status, body, err)
			continue
		}
		tok, err := faultAnswer{body: body}.faultToken()
		if err != nil {
			t.Fatal(err)
		}
		answered[tok.TokenID] = true
		maxID = max(maxID, tok.TokenID)
	}
	exitErr := p.exited(t)
	stop.Store(true)
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("%s exited with %v after SIGTERM, want 0", p.name, exitErr)
	}

	outcomes, inFlight, lost := map[string]int{}, map[string]int{}, 0
	for _, as := range answers {
		for _, a := range as {
			fate, o := shutdownOutcome(a)
			outcomes[o]++
			if a.start.Before(sigAt) && a.end.After(sigAt) {
				inFlight[o]++
			}
			if a.err != nil && a.end.Before(sigAt) {
				t.Errorf("POST /token before SIGTERM: %v", a.err)
			}
			if fate == fateLost {
				lost++
				if lost <= 10 {
					t.Errorf("POST /token sent %v after SIGTERM, lost: %s (%v)", a.start.Sub(sigAt).Round(time.Microsecond), o, a.err)
				}
			}
			if a.err == nil && a.status != http.StatusOK {
				t.Errorf("POST /token %v after SIGTERM: %d %s, want 200 or no answer", a.start.Sub(sigAt), a.status, a.body)
			}
			if a.err != nil || a.status != http.StatusOK {
				continue
			}
			tok, err := a.faultToken()
			if err != nil {
				t.Fatal(err)
			}
			if answered[tok.TokenID] {
				t.Fatalf("token ID %d answered twice", tok.TokenID)
			}
			answered[tok.TokenID] = true
			maxID = max(maxID, tok.TokenID)
		}
	}

	// Every request the server took up is one session in Redis: a request it
	// handled but whose answer was lost would be a session no client holds.
	ctx := t.Context()
	stored := map[snowflakealg.ID]bool{}
	iter := rdb.Scan(ctx, 0, "st:{svc}:*", 1000).Iterator()
	for iter.Next(ctx) {
		if id, err := snowflakealg.ParseID(strings.TrimPrefix(iter.Val(), "st:{svc}:")); err == nil {
			stored[id] = true
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range stored {
		if !answered[id] {
			t.Errorf("token %d was stored but its POST /token got no 200", id)
		}
	}
	for id := range answered {
		if !stored[id] {
			t.Errorf("token %d was answered 200 but is not stored", id)
		}
	}

	mark, lastMs := releasedMark(t, rdb, worker), fleetIDTime(maxID).UnixMilli()
	if mark < lastMs {
		t.Fatalf("saved mark %d ms, want at least %d ms, the time of the last ID issued", mark, lastMs)
	}

	q := fleet{bin, creds}.start(t, replica{name: "issuer again", redis: rv, env: []string{"SNOWTOKEN_WORKER_ID", wid}})
	var again [4][]snowflakealg.ID
	var againWG sync.WaitGroup
	for c := range again {
		againWG.Go(func() {
			conn := newFleetConn(q.addr, creds.svc)
			defer conn.close()
			for range 100 {
				id, err := conn.issue()
				if err != nil {
					t.Errorf("%s: %v", q.name, err)
					return
				}
				again[c] = append(again[c], id)
			}
		})
	}
	againWG.Wait()
	newIDs := slices.Concat(again[:]...)
	for _, id := range newIDs {
		if ms := fleetIDTime(id).UnixMilli(); ms <= mark || id.Worker(bitsalloc.Default()) != worker || answered[id] {
			t.Fatalf("%s issued %d (at %d ms, worker %d, issued before: %v); want worker %d, above the mark %d ms",
				q.name, id, ms, id.Worker(bitsalloc.Default()), answered[id], worker, mark)
		}
	}
	t.Logf("SIGTERM after %d tokens in %v (%d after it); listener closed %v later; %d requests held in the handler answered 200 after that; "+
		"load outcomes %v (%d lost), of which in flight at SIGTERM %v; sessions stored = tokens answered = %d; exit 0; "+
		"mark %d ms >= last ID %d ms; %d IDs issued again on worker %d, all above the mark",
		issuedBefore, saturated, issued.Load()-issuedBefore, closedAfter.Round(time.Millisecond), held, outcomes, lost, inFlight, len(answered),
		mark, lastMs, len(newIDs), worker)
}

// releasedMark checks that worker's lease key is gone from rdb, as a clean
// release leaves it, and returns the high-water mark saved for the worker,
// in Unix ms.
func releasedMark(tb testing.TB, rdb *redis.Client, worker int64) int64 {
	tb.Helper()
	ctx := tb.Context()
	leaseKey, hwKey := workerKeys(worker)
	if n, err := rdb.Exists(ctx, leaseKey).Result(); err != nil || n != 0 {
		tb.Fatalf("lease key %s after the release: exists %d, %v; want it gone", leaseKey, n, err)
	}
	hw, err := rdb.HGetAll(ctx, hwKey).Result()
	if err != nil {
		tb.Fatal(err)
	}
	mark, err := strconv.ParseInt(hw["ms"], 10, 64)
	if err != nil {
		tb.Fatalf("high-water hash %s = %v: no mark", hwKey, hw)
	}
	return mark
}

// rawExchange sends raw on a new connection to addr while reading the answer,
// so that an answer the server sends before it has read everything (and
// then closes the connection) is still heard.
func rawExchange(tb testing.TB, addr string, raw io.Reader) (*http.Response, []byte) {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, fleetWait)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(fleetWait))
	go io.Copy(conn, raw) // the server may stop reading: its error does not matter
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the answer: %v", err)
	}
	return resp, body
}

// timedHealthy issues a token at p (of worker) and validates it, n times,
// failing tb unless every answer is 200, and returns the slowest round.
func timedHealthy(tb testing.TB, p *issuer, c fleetClient, worker int64, n int) time.Duration {
	tb.Helper()
	var slowest time.Duration
	for range n {
		start := time.Now()
		p.mustValidate(tb, p.issue(tb, c, ""), worker)
		slowest = max(slowest, time.Since(start))
	}
	return slowest
}

// TestFaultHostileClients points hostile clients at a real issuer on
// 127.0.0.1: slowloris, oversized headers and bodies, thousands of idle
// connections. The issuer keeps serving a normal client throughout.
func TestFaultHostileClients(t *testing.T) {
	const worker = 33
	p := startIssuer(t, issuerOpts{env: []string{"SNOWTOKEN_WORKER_ID", strconv.Itoa(worker)}})
	creds := p.creds
	baseline := timedHealthy(t, p, creds.svc, worker, 20)
	t.Logf("normal client, issue + validate, slowest of 20: %v", baseline.Round(time.Microsecond))

	t.Run("slowloris", func(t *testing.T) {
		const conns = 200
		type slow struct {
			sent       atomic.Int64
			sentBefore atomic.Int64 // bytes sent when the server closed the connection
			closed     atomic.Int64 // ns after dialing; 0 while open
			said       []byte       // what the server wrote; read after closed
		}
		slows := make([]*slow, conns)
		var wg sync.WaitGroup
		defer wg.Wait()
		done := make(chan struct{})
		defer close(done)
		header := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 100)
		for i := range slows {
			s := &slow{}
			slows[i] = s
			conn, err := net.DialTimeout("tcp", p.addr, fleetWait)
			if err != nil {
				t.Fatal(err)
			}
			dialed := time.Now()
			wg.Go(func() { // reads until the server closes the connection
				s.said, _ = io.ReadAll(conn)
				s.sentBefore.Store(s.sent.Load())
				s.closed.Store(int64(time.Since(dialed)))
			})
			wg.Go(func() { // one byte a second, for far longer than the server waits
				defer conn.Close()
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for i := range header {
					if _, err := io.WriteString(conn, header[i:i+1]); err != nil {
						return
					}
					s.sent.Add(1)
					select {
					case <-done:
						return
					case <-tick.C:
					}
					if s.closed.Load() != 0 {
						return
					}
				}
			})
		}
		time.Sleep(1500 * time.Millisecond) // every connection has sent something
		during := timedHealthy(t, p, creds.svc, worker, 20)
		open := 0
		for _, s := range slows {
			if s.closed.Load() == 0 {
				open++
			}
		}
		if open != conns {
			t.Fatalf("%d of %d slow connections were closed before the normal client was done", conns-open, conns)
		}

		deadline := time.Now().Add(fleetWait)
		var lifetimes []time.Duration
		minSent, maxSent := int64(len(header)), int64(0)
		said := ""
		for _, s := range slows {
			for s.closed.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("a slow connection is still open after %v, having sent %d bytes", fleetWait, s.sent.Load())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := s.sent.Load(); n >= int64(len(header)) {
				t.Fatalf("a slow connection sent its whole header (%d bytes) before it was closed", n)
			}
			// net/http gives up on the header with a 400 (or, on some
			// versions, silently): never anything else.
			if len(s.said) > 0 && !strings.HasPrefix(string(s.said), "HTTP/1.1 400 ") {
				t.Fatalf("the server wrote %q to a slow connection, want nothing or a 400", s.said)
			}
			said = string(s.said)
			lifetimes = append(lifetimes, time.Duration(s.closed.Load()))
			minSent, maxSent = min(minSent, s.sentBefore.Load()), max(maxSent, s.sentBefore.Load())
		}
		sort.Slice(lifetimes, func(i, j int) bool { return lifetimes[i] < lifetimes[j] })
		timedHealthy(t, p, creds.svc, worker, 1)
		t.Logf("%d slow connections: normal client's slowest of 20 while all were open %v (baseline %v); "+
			"closed by the server (saying %q) after %v (min), %v (median), %v (max), having sent %d to %d of their %d header bytes",
			conns, during.Round(time.Microsecond), baseline.Round(time.Microsecond), strings.SplitN(said, "\r\n", 2)[0],
			lifetimes[0].Round(time.Millisecond), lifetimes[conns/2].Round(time.Millisecond), lifetimes[conns-1].Round(time.Millisecond),
			minSent, maxSent, len(header))
	})

	t.Run("oversized header", func(t *testing.T) {
		// MaxHeaderBytes is 16 KiB; net/http reads 4 KiB more before it
		// refuses, so 20 KiB is the first size refused for sure.
		for _, size := range []int{20 << 10, 32 << 10, 1 << 20} {
			raw := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", size) + "\r\n\r\n"
			resp, body := rawExchange(t, p.addr, strings.NewReader(raw))
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a %d-byte header: %d %s, want 431", size, resp.StatusCode, body)
			}
		}
		timedHealthy(t, p, creds.svc, worker, 1)
	})

	t.Run("oversized body", func(t *testing.T) {
		body := "grant_type=client_credentials&pad=" + strings.Repeat("a", 1<<20)
		head := "POST /token HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + creds.svc.basicAuth() +
			"\r\nContent-Type: application/x-www-form-urlencoded\r\n"
		for _, framing := range []string{"Content-Length", "chunked"} {
			raw := head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
			if framing == "chunked" {
				raw = head + "Transfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
			}
			resp, out := rawExchange(t, p.addr, strings.NewReader(raw))
			var e struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(out, &e) != nil || e.Error != "invalid_request" {
				t.Errorf("a 1 MiB body (%s): %d %s, want 400 invalid_request", framing, resp.StatusCode, out)
			}
		}
		timedHealthy(t, p, creds.svc, worker, 1)
	})

	t.Run("idle connections", func(t *testing.T) {
		const conns = 2000
		healthz := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
		idle := make([]net.Conn, conns)
		readers := make([]*bufio.Reader, conns)
		defer func() {
			for _, c := range idle {
				if c != nil {
					c.Close()
				}
			}
		}()
		// roundTrip asks GET /healthz on idle connection i.
		roundTrip := func(i int) error {
			c := idle[i]
			c.SetDeadline(time.Now().Add(fleetWait))
			if _, err := io.WriteString(c, healthz); err != nil {
				return err
			}
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				return fmt.Errorf("GET /healthz: %d, close %v", resp.StatusCode, resp.Close)
			}
			return nil
		}
		forAll := func(what string, f func(i int) error) {
			var wg sync.WaitGroup
			var next atomic.Int64
			errs := make(chan error, conns)
			for range 32 {
				wg.Go(func() {
					for i := int(next.Add(1) - 1); i < conns; i = int(next.Add(1) - 1) {
						if err := f(i); err != nil {
							errs <- fmt.Errorf("%s, connection %d: %w", what, i, err)
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
		forAll("opening", func(i int) error {
			c, err := net.DialTimeout("tcp", p.addr, fleetWait)
			if err != nil {
				return err
			}
			idle[i], readers[i] = c, bufio.NewReader(c)
			return roundTrip(i)
		})
		during := timedHealthy(t, p, creds.svc, worker, 20)
		// Every one of them was still open: the server held them all at once.
		forAll("reusing", roundTrip)
		t.Logf("%d idle keep-alive connections: normal client's slowest of 20 %v (baseline %v); all %d still served afterwards",
			conns, during.Round(time.Microsecond), baseline.Round(time.Microsecond), conns)
	})
}
