package main

import (
	"cmp"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// wrkThreads is wrk's -t: each thread has connections/wrkThreads of the
// connections and a Lua state of its own.
const wrkThreads = 2

// wrkResult is what one wrk run measured.
type wrkResult struct {
	rps      float64
	p50, p99 string
	non2xx   int
	// CPU time per request of the server under test, of Redis and of wrk.
	serverCPU, redisCPU, wrkCPU time.Duration
	// requests is how many requests wrk counted; commands, the Redis
	// commands meanwhile (commands.go), nil for a row without Redis.
	requests int64
	commands commandCalls
}

// row is one endpoint of the wrk table and its runs.
type row struct {
	name, url, script string
	server, redis     int     // pids whose CPU time the run measures (redis 0: none)
	floor             string  // floorBare, floorSign, ... (floor.go)
	target            float64 // the target: the bound on server CPU/req ÷ floor (0: none)
	cmdsTarget        float64 // the bound on Redis commands per request (0: none)
	// prepare, if set, writes the row's script for a round, before the
	// round's run and unmeasured (the never-seen pool), and check checks
	// wrk's output of that run; such a row has no warm-up.
	prepare func(round int) (script string, err error)
	check   func(out []byte) error
	// profile, under -pprof, names the issuer's CPU profile of the row's
	// last round (profile.go); empty: none.
	profile string

	res    wrkResult       // of the median round by ratio to bare
	ratio  float64         // to bare, median of the rounds
	ratios []float64       // to bare, round by round
	all    []wrkResult     // round by round
	floors []time.Duration // round by round
	floorN time.Duration   // of the median round
}

// wrkTable warms every row up, runs -rounds rounds of every row, one after
// another, and prints the table: each row its median round by requests/s
// relative to the bare handler (rows[0]) in the same round, and its server
// CPU per request against its floor in that round, and the Redis commands
// per request of the rows that use Redis (at redisPort).
func wrkTable(dir string, rows []*row, redisPort int) error {
	for _, r := range rows {
		if r.prepare == nil {
			if _, err := runWrk(dir, r.url, r.script, 2*time.Second, r.server, r.redis, redisPort, nil); err != nil {
				return err
			}
		}
	}
	// Rounds: every endpoint right after the baseline, so that each ratio
	// compares runs minutes apart at most; noise that lasts a round moves
	// that round's ratios, and the median round leaves it out. After each
	// round, with the servers idle, one signature operation of each kind
	// (signatureCosts) in this process gives the round's floors.
	var costs []sigCosts
	for round := range max(*rounds, 1) {
		for _, r := range rows {
			script := r.script
			if r.prepare != nil {
				var err error
				if script, err = r.prepare(round); err != nil {
					return err
				}
			}
			wait := func() error { return nil }
			if r.profile != "" && issuerMetrics != "" && round == max(*rounds, 1)-1 {
				wait = startProfile(r.profile, *duration)
			}
			res, err := runWrk(dir, r.url, script, *duration, r.server, r.redis, redisPort, r.check)
			if err != nil {
				return err
			}
			if err := wait(); err != nil {
				return err
			}
			r.all = append(r.all, res)
			r.ratios = append(r.ratios, res.rps/rows[0].all[round].rps)
		}
		c := signatureCosts()
		costs = append(costs, c)
		fl, err := roundFloors(len(rows), func(i int) (string, string, time.Duration) {
			return rows[i].name, rows[i].floor, rows[i].all[round].serverCPU
		}, c)
		if err != nil {
			return err
		}
		for i, r := range rows {
			r.floors = append(r.floors, fl[i])
		}
	}
	for _, r := range rows {
		order := roundsBy(len(r.all), func(a, b int) int { return cmp.Compare(r.ratios[a], r.ratios[b]) })
		if r == rows[0] { // all ratios 1: the median round by requests/s
			order = roundsBy(len(r.all), func(a, b int) int { return cmp.Compare(r.all[a].rps, r.all[b].rps) })
		}
		mid := order[len(order)/2]
		r.res, r.ratio, r.floorN = r.all[mid], r.ratios[mid], r.floors[mid]
	}
	fmt.Printf("wrk, %d connections, %d rounds of %v per endpoint, one run (%s); each row is its median round; "+
		"floor: the bare handler's server CPU/req in the same round, plus the signature operations the row names (medians: %s), "+
		"CPU in this process after the round:\n\n",
		*connections, len(rows[0].all), *duration, time.Now().UTC().Format(time.RFC3339), medianCosts(costs))
	fmt.Println("| endpoint | requests/s | ratio to bare | ratio, lowest–highest round | p50 | p99 | non-2xx | server CPU/req | floor | ÷ floor (target) | ÷ floor, lowest–highest round | Redis CPU/req | Redis cmds/req | wrk CPU/req |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var breakdown []string
	for _, r := range rows {
		redisCPU, cmds := "—", "—"
		if r.redis != 0 {
			redisCPU = us(r.res.redisCPU)
			total, top := r.res.commands.perRequest(r.res.requests)
			cmds = fmt.Sprintf("%.4f", total)
			if r.cmdsTarget > 0 {
				cmds += fmt.Sprintf(" (≤%g)", r.cmdsTarget)
			}
			breakdown = append(breakdown, fmt.Sprintf("- %s: %s", r.name, cmp.Or(top, "none at 0.001 a request or more")))
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, res := range r.all {
			x := float64(res.serverCPU) / float64(r.floors[i])
			lo, hi = min(lo, x), max(hi, x)
		}
		fmt.Printf("| %s | %.0f | %.2f× | %.2f–%.2f | %s | %s | %d | %s | %s (%s) | %s | %.2f–%.2f | %s | %s | %s |\n", r.name, r.res.rps, r.ratio,
			slices.Min(r.ratios), slices.Max(r.ratios), r.res.p50, r.res.p99, r.res.non2xx, us(r.res.serverCPU),
			us(r.floorN), r.floor, vsFloor(r.res.serverCPU, r.floorN, r.target), lo, hi, redisCPU, cmds, us(r.res.wrkCPU))
	}
	fmt.Printf("\n%s. Redis commands per request of each row's median round, by command:\n\n%s\n", commandsLegend, strings.Join(breakdown, "\n"))
	return nil
}

var (
	rpsRe    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	countRe  = regexp.MustCompile(`(\d+) requests in `)
	pctRe    = regexp.MustCompile(`(?m)^\s+(50|99)%\s+(\S+)`)
	non2xxRe = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

// parse reads wrk's output into r: its requests/s, the requests it
// counted, p50, p99 and the non-2xx responses.
func (r *wrkResult) parse(out []byte) error {
	rps, count := rpsRe.FindSubmatch(out), countRe.FindSubmatch(out)
	if rps == nil || count == nil {
		return fmt.Errorf("no Requests/sec or request count in %s", out)
	}
	r.rps, _ = strconv.ParseFloat(string(rps[1]), 64)
	r.requests, _ = strconv.ParseInt(string(count[1]), 10, 64)
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
	return nil
}

// runWrk runs wrk against url and measures the CPU time that server (the
// process under test) and redis (0 for none) use meanwhile, and the
// commands Redis (at redisPort) runs unless redis is 0. check, if not nil,
// checks wrk's output first.
func runWrk(dir, url, script string, d time.Duration, server, redis, redisPort int, check func(out []byte) error) (wrkResult, error) {
	args := []string{"-t" + strconv.Itoa(wrkThreads), "-c" + strconv.Itoa(*connections), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency"}
	if script != "" {
		args = append(args, "-s", filepath.Join(dir, script))
	}
	// INFO commandstats outside the CPU windows: its own CPU is not the
	// run's.
	var commands *commandsWindow
	var err error
	if redis != 0 {
		if commands, err = startCommands(redisPort); err != nil {
			return wrkResult{}, err
		}
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
	var r wrkResult
	var redisAfter time.Duration
	if redis != 0 {
		if redisAfter, err = cpuTime(redis); err != nil {
			return wrkResult{}, err
		}
		if r.commands, err = commands.end(); err != nil {
			return wrkResult{}, err
		}
	}
	if check != nil {
		if err := check(out); err != nil {
			return wrkResult{}, fmt.Errorf("wrk %s: %w", url, err)
		}
	}
	if err := r.parse(out); err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w", url, err)
	}
	if r.requests > 0 {
		perReq := func(t time.Duration) time.Duration { return t / time.Duration(r.requests) }
		r.serverCPU = perReq(serverAfter - serverBefore)
		r.redisCPU = perReq(redisAfter - redisBefore)
		r.wrkCPU = perReq(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime())
	}
	if r.non2xx > 0 {
		return r, fmt.Errorf("wrk %s: %d non-2xx responses", url, r.non2xx)
	}
	return r, nil
}
