package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The requests of the constant-rate runs, written by hand.
const bareRequest = "GET / HTTP/1.1\r\nHost: bench\r\n\r\n"

func issueRequest(basic string) string {
	const body = "grant_type=client_credentials&scope=read"
	return "POST /token HTTP/1.1\r\nHost: bench\r\nAuthorization: " + basic +
		"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func validateRequest(token string) string {
	return "GET /token/validate HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + token + "\r\n\r\n"
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
	const rateConns = 128
	total := int(d.Seconds() * float64(n))
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
	for i := range total {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return lat, failed, nil
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

// loadPath is one path of the production round: what it sends and where,
// and its runs.
type loadPath struct {
	name    string
	url     string
	pid     int // the server under test
	behind  int // the issuer behind a consumer (0: none)
	request func(round, i int) []byte
	path    func(i int) int // the path of the i-th request of a mix, as mixPath (nil: not a mix)
	floor   string
	runs    []pathRun
}

// pathRun is one constant-rate run of a loadPath.
type pathRun struct {
	serverCPU, behindCPU, redisCPU time.Duration // per request
	res                            rateResult
	parts                          []rateResult // the mix, by mixPath
}

// run sends path's requests at -production-rate for -rate-d and measures
// the CPU its server, the issuer behind it and Redis use meanwhile.
func (path *loadPath) run(round, redisPid int) (pathRun, error) {
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
	lat, failed, err := constantRate(*productionRate, *rateFor, strings.TrimPrefix(path.url, "http://"),
		func(i int) []byte { return path.request(round, i) })
	if err != nil {
		return pathRun{}, err
	}
	if err := measure(after); err != nil {
		return pathRun{}, err
	}
	n := time.Duration(len(lat))
	run := pathRun{serverCPU: (after[0] - before[0]) / n, redisCPU: (after[1] - before[1]) / n, behindCPU: (after[2] - before[2]) / n}
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
