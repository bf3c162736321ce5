package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

type wrkResult struct {
	rps      float64
	p50, p99 string
	non2xx   int
	// CPU time per request of the server under test, of Redis and of wrk.
	serverCPU, redisCPU, wrkCPU time.Duration
}

var (
	rpsRe    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	pctRe    = regexp.MustCompile(`(?m)^\s+(50|99)%\s+(\S+)`)
	non2xxRe = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

// runWrk runs wrk against url and measures the CPU time that server (the
// process under test) and redis (0 for none) use meanwhile.
func runWrk(dir, url, script string, d time.Duration, server, redis int) (wrkResult, error) {
	args := []string{"-t2", "-c" + strconv.Itoa(*connections), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency"}
	if script != "" {
		args = append(args, "-s", filepath.Join(dir, script))
	}
	serverBefore, err := cpuTime(server)
	if err != nil {
		return wrkResult{}, err
	}
	var redisBefore time.Duration
	if redis != 0 {
		if redisBefore, err = cpuTime(redis); err != nil {
			return wrkResult{}, err
		}
	}
	cmd := exec.Command("wrk", append(args, url)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v: %s", url, err, out)
	}
	serverAfter, err := cpuTime(server)
	if err != nil {
		return wrkResult{}, err
	}
	var redisAfter time.Duration
	if redis != 0 {
		if redisAfter, err = cpuTime(redis); err != nil {
			return wrkResult{}, err
		}
	}
	m := rpsRe.FindSubmatch(out)
	if m == nil {
		return wrkResult{}, fmt.Errorf("wrk %s: no Requests/sec in %s", url, out)
	}
	var r wrkResult
	r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	if n := r.rps * d.Seconds(); n > 0 {
		perReq := func(t time.Duration) time.Duration { return time.Duration(float64(t) / n) }
		r.serverCPU = perReq(serverAfter - serverBefore)
		r.redisCPU = perReq(redisAfter - redisBefore)
		r.wrkCPU = perReq(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime())
	}
	for _, p := range pctRe.FindAllSubmatch(out, -1) {
		if string(p[1]) == "50" {
			r.p50 = string(p[2])
		} else {
			r.p99 = string(p[2])
		}
	}
	if m := non2xxRe.FindSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(string(m[1]))
	}
	if r.non2xx > 0 {
		return r, fmt.Errorf("wrk %s: %d non-2xx responses", url, r.non2xx)
	}
	return r, nil
}
