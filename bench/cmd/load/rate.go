package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpReq is one HTTP/1.1 request, as a wrk script (lua) and as the bytes
// that constantRate writes by hand (raw), so that the wrk and the
// constant-rate tables send the same.
type httpReq struct {
	method, path, body string
	header             [][2]string // name, value
}

// lua is a wrk script that sends r (to the URL's host).
func (r httpReq) lua() string {
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %q\nwrk.path = %q\n", r.method, r.path)
	if r.body != "" {
		fmt.Fprintf(&b, "wrk.body = %q\n", r.body)
	}
	for _, h := range r.header {
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", h[0], h[1])
	}
	return b.String()
}

// raw is r as it goes on the wire.
func (r httpReq) raw() string {
	var b strings.Builder
	b.WriteString(r.method + " " + r.path + " HTTP/1.1\r\nHost: bench\r\n")
	for _, h := range r.header {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	if r.body != "" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	b.WriteString("\r\n" + r.body)
	return b.String()
}

// bareRequest is the bare handler's request.
var bareRequest = httpReq{method: "GET", path: "/"}

// issueRequest is POST /token with the client credentials grant for
// scope read, as client basic (an Authorization header value).
func issueRequest(basic string) httpReq {
	return httpReq{method: "POST", path: "/token", body: "grant_type=client_credentials&scope=read",
		header: [][2]string{{"Authorization", basic}, {"Content-Type", "application/x-www-form-urlencoded"}}}
}

// txnTrustDomain is the issuer's SNOWTOKEN_TXN_TRUST_DOMAIN in the wrk run.
const txnTrustDomain = "bench.internal"

// exchangeRequest is POST /token's token exchange (RFC 8693) of subject,
// an access token of client basic's, by that client, for a token of scope
// read.
func exchangeRequest(basic, subject string) httpReq {
	return httpReq{method: "POST", path: "/token",
		body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&scope=read" +
			"&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&subject_token=" + subject,
		header: [][2]string{{"Authorization", basic}, {"Content-Type", "application/x-www-form-urlencoded"}}}
}

// introspectRequest is POST /token/introspect of token, as client basic.
func introspectRequest(basic, token string) httpReq {
	return httpReq{method: "POST", path: "/token/introspect", body: "token=" + token,
		header: [][2]string{{"Authorization", basic}, {"Content-Type", "application/x-www-form-urlencoded"}}}
}

// validateRequest is GET /token/validate of token.
func validateRequest(token string) httpReq { return bearerRequest("/token/validate", token) }

// bearerRequest is a GET of path with token as its bearer token.
func bearerRequest(path, token string) httpReq {
	return httpReq{method: "GET", path: path, header: [][2]string{{"Authorization", "Bearer " + token}}}
}

type rateResult struct {
	sent, errors  int
	p50, p99, max time.Duration
}

// constantRate sends n requests/s for d, each at its scheduled time, over
// rateConns persistent HTTP/1.1 connections written and read by hand: the
// generator must cost far less than the server it measures, on the same two
// cores. request(i) is the i-th request. It returns each request's latency,
// which runs from its scheduled time, so a request that waits for a free
// connection or for the server counts its wait (no coordinated omission), and
// whether it failed.
func constantRate(n int, d time.Duration, addr string, request func(i int) []byte) (lat []time.Duration, failed []bool, err error) {
	return openLoop(n, int(d.Seconds()*float64(n)), addr, request, nil)
}

// openLoop is constantRate of total requests at most, which schedules no
// more once stop is closed (nil: never) and returns those it scheduled.
func openLoop(n, total int, addr string, request func(i int) []byte, stop <-chan struct{}) (lat []time.Duration, failed []bool, err error) {
	const rateConns = 128
	interval := time.Second / time.Duration(n)
	lat = make([]time.Duration, total)
	failed = make([]bool, total)
	work := make(chan int, total)
	var start time.Time
	var wg sync.WaitGroup
	conns := make([]net.Conn, rateConns)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	for _, c := range conns {
		wg.Go(func() {
			r := bufio.NewReaderSize(c, 16<<10)
			for i := range work {
				at := start.Add(time.Duration(i) * interval)
				_, err := c.Write(request(i))
				if err == nil {
					err = readResponse(r)
				}
				lat[i] = time.Since(at)
				failed[i] = err != nil
			}
		})
	}
	start = time.Now().Add(10 * time.Millisecond)
	sent := 0
schedule:
	for ; sent < total; sent++ {
		if w := time.Until(start.Add(time.Duration(sent) * interval)); w > 0 {
			time.Sleep(w)
		}
		select {
		case <-stop:
			break schedule
		default:
		}
		work <- sent
	}
	close(work)
	wg.Wait()
	return lat[:sent], failed[:sent], nil
}

// summarize counts the failures among requests and the percentiles of their
// latencies; it sorts lat.
func summarize(lat []time.Duration, failed []bool) rateResult {
	res := rateResult{sent: len(lat)}
	for _, f := range failed {
		if f {
			res.errors++
		}
	}
	if len(lat) == 0 {
		return res
	}
	slices.Sort(lat)
	n := len(lat)
	res.p50, res.p99, res.max = lat[n/2].Round(time.Microsecond), lat[n*99/100].Round(time.Microsecond), lat[n-1].Round(time.Microsecond)
	return res
}

// readResponse reads one HTTP/1.1 response and fails unless it is a 200.
func readResponse(r *bufio.Reader) error {
	status, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := bytes.HasPrefix(status, []byte("HTTP/1.1 200 "))
	length := -1
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, found := bytes.Cut(line, []byte(":")); found && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 {
		return errors.New("response without Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("status %q", bytes.TrimSpace(status))
	}
	return nil
}

// loadPath is one path of a constant-rate table (the production round's
// too): what it sends and where, and its runs.
type loadPath struct {
	name    string
	url     string
	pid     int // the server under test
	behind  int // the issuer behind a consumer (0: none)
	request func(round, i int) []byte
	// prepare, if set, runs before each round's run, unmeasured: it makes
	// what request sends in that round (fresh DPoP proofs).
	prepare func(round int) error
	path    func(i int) int // the path of the i-th request of a mix, as mixPath (nil: not a mix)
	floor   string
	target  float64 // the target: the bound on server CPU/req ÷ floor (0: none)
	// cmdsTarget is the bound on Redis commands per request (0: none).
	cmdsTarget float64
	runs       []pathRun
	floors     []time.Duration // round by round (rateTable)
}

// same is a loadPath's request function that sends req every time.
func same(req httpReq) func(round, i int) []byte {
	b := []byte(req.raw())
	return func(_, _ int) []byte { return b }
}

// runRounds runs -rounds rounds of every path at rate requests/s, one
// path after another, the bare handler (paths[0]) first; after each round,
// with the servers idle, it measures the signature operations of the floors
// in this process and keeps each path's floor of the round. It returns the
// signature costs, round by round.
func runRounds(paths []*loadPath, rate, redisPid, redisPort int) ([]sigCosts, error) {
	var costs []sigCosts
	for round := range max(*rounds, 1) {
		for _, path := range paths {
			if path.prepare != nil {
				if err := path.prepare(round); err != nil {
					return nil, err
				}
			}
			run, err := path.run(round, rate, redisPid, redisPort)
			if err != nil {
				return nil, err
			}
			path.runs = append(path.runs, run)
		}
		c := signatureCosts()
		costs = append(costs, c)
		fl, err := roundFloors(len(paths), func(i int) (string, string, time.Duration) {
			return paths[i].name, paths[i].floor, paths[i].runs[round].serverCPU
		}, c)
		if err != nil {
			return nil, err
		}
		for i, path := range paths {
			path.floors = append(path.floors, fl[i])
		}
	}
	return costs, nil
}

// rateTable runs -rounds rounds of every path at -rate requests/s for
// -rate-d, one after another, the bare handler (paths[0]) first, and
// prints the table: each row its round with the median p99, and its
// server CPU per request against its floor in that round.
func rateTable(s servers, paths []*loadPath) error {
	live, err := dbsize(s.redisPort, 0)
	if err != nil {
		return err
	}
	costs, err := runRounds(paths, *rate, s.redisPid, s.redisPort)
	if err != nil {
		return err
	}
	fmt.Printf("\nconstant %d requests/s with %d keys in Redis db 0, %d rounds of %v per endpoint (open loop, latency from the scheduled start); "+
		"each row is its round with the median p99; floors as in the wrk table, at this rate (%s: medians):\n\n",
		*rate, live, max(*rounds, 1), *rateFor, medianCosts(costs))
	fmt.Println("| endpoint | sent | errors | p50 | p99 | max | p99, lowest–highest round | server CPU/req | floor | ÷ floor (target) | Redis CPU/req | Redis cmds/req |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var breakdown []string
	for _, path := range paths {
		order := roundsBy(len(path.runs), func(a, b int) int { return cmp.Compare(path.runs[a].res.p99, path.runs[b].res.p99) })
		run, floor := path.runs[order[len(order)/2]], path.floors[order[len(order)/2]]
		res := run.res
		cmds, top := run.commands.perRequest(int64(res.sent))
		cmdsText := fmt.Sprintf("%.4f", cmds)
		if path.cmdsTarget > 0 {
			cmdsText += fmt.Sprintf(" (≤%g)", path.cmdsTarget)
		}
		breakdown = append(breakdown, fmt.Sprintf("- %s: %s", path.name, cmp.Or(top, "none at 0.001 a request or more")))
		fmt.Printf("| %s | %d | %d | %v | %v | %v | %v–%v | %s | %s (%s) | %s | %s | %s |\n", path.name, res.sent, res.errors, res.p50, res.p99, res.max,
			path.runs[order[0]].res.p99, path.runs[order[len(order)-1]].res.p99,
			us(run.serverCPU), us(floor), path.floor, vsFloor(run.serverCPU, floor, path.target), us(run.redisCPU), cmdsText)
	}
	fmt.Printf("\n%s; the bare handler's row is what Redis ran with no request on it. By command:\n\n%s\n", commandsLegend, strings.Join(breakdown, "\n"))
	return nil
}

// pathRun is one constant-rate run of a loadPath.
type pathRun struct {
	serverCPU, behindCPU, redisCPU time.Duration // per request
	commands                       commandCalls  // Redis ran during the run
	res                            rateResult
	parts                          []rateResult // the mix, by mixPath
}

// run sends path's requests at rate requests/s for -rate-d and measures the
// CPU its server, the issuer behind it and Redis use meanwhile, and the
// commands Redis (at redisPort) runs.
func (path *loadPath) run(round, rate, redisPid, redisPort int) (pathRun, error) {
	// INFO commandstats outside the CPU windows: its own CPU is not the
	// run's.
	commands, err := startCommands(redisPort)
	if err != nil {
		return pathRun{}, err
	}
	pids := []int{path.pid, redisPid, path.behind}
	before, after := make([]time.Duration, 3), make([]time.Duration, 3)
	measure := func(into []time.Duration) error {
		for i, pid := range pids {
			if pid != 0 {
				t, err := cpuTime(pid)
				if err != nil {
					return err
				}
				into[i] = t
			}
		}
		return nil
	}
	if err := measure(before); err != nil {
		return pathRun{}, err
	}
	lat, failed, err := constantRate(rate, *rateFor, strings.TrimPrefix(path.url, "http://"),
		func(i int) []byte { return path.request(round, i) })
	if err != nil {
		return pathRun{}, err
	}
	if err := measure(after); err != nil {
		return pathRun{}, err
	}
	calls, err := commands.end()
	if err != nil {
		return pathRun{}, err
	}
	n := time.Duration(len(lat))
	run := pathRun{serverCPU: (after[0] - before[0]) / n, redisCPU: (after[1] - before[1]) / n, behindCPU: (after[2] - before[2]) / n,
		commands: calls}
	if path.path != nil {
		var parts [3]struct {
			lat    []time.Duration
			failed []bool
		}
		for i := range lat {
			k := path.path(i)
			parts[k].lat = append(parts[k].lat, lat[i])
			parts[k].failed = append(parts[k].failed, failed[i])
		}
		for _, part := range parts {
			run.parts = append(run.parts, summarize(part.lat, part.failed))
		}
	}
	run.res = summarize(lat, failed)
	return run, nil
}
