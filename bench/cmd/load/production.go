package main

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

var (
	production = flag.Bool("production", false, "also run the production-volume round (issue 19): the verified-token cache filled past its size, "+
		"then each path alone and a steady mix at -production-rate, among the -sessions live sessions (adds about 3 minutes)")
	productionRate = flag.Int("production-rate", 2000, "requests/s of the production-volume round")
)

// The mix of the production round, in twentieths of its requests: 1 issue
// (5%), 3 validations of never-seen tokens (15%), 16 of known tokens (80%).
const (
	mixIssue  = 1
	mixUnseen = 3
	mixOf     = 20
	// knownTokens is how many of the tokens that filled the cache the known
	// path validates again and again.
	knownTokens = 10_000
	// cacheSize is the issuer's verified-token cache at its default
	// (token.DefaultCacheSize; not imported, to keep the issuer's
	// dependencies out of this module).
	cacheSize = 100_000
)

// The paths of the mix, as mixPath tells them.
const (
	mixPathIssue = iota
	mixPathUnseen
	mixPathKnown
)

// mixPath is the path of the mix's i-th request.
func mixPath(i int) int {
	switch k := i % mixOf; {
	case k < mixIssue:
		return mixPathIssue
	case k < mixIssue+mixUnseen:
		return mixPathUnseen
	default:
		return mixPathKnown
	}
}

// servers is what the production round loads and measures.
type servers struct {
	issuerURL, bareURL, basic    string
	issuerPid, barePid, redisPid int
	redisPort                    int
	usedEmpty                    int64 // Redis used_memory before any session
}

// pathRun is one constant-rate run of the production round.
type pathRun struct {
	serverCPU, redisCPU time.Duration // per request
	res                 rateResult
	parts               []rateResult // the mix: issue, known, never-seen
}

// productionRound fills the issuer's verified-token cache past its size,
// then in each of -rounds rounds runs at -production-rate for -rate-d: the
// bare handler, issue alone, validation of known tokens alone, of never-seen
// tokens alone, and the mix of the three; and measures, in the same round,
// the CPU of one Ed25519 signature and verification in this process. It
// prints each path's server CPU per request against its floor (the bare
// handler, plus a signature for issue and a verification for never-seen
// tokens), its p99 against the bare handler's, the issuer's RSS and Redis
// memory per key.
func productionRound(s servers) error {
	rounds := max(*rounds, 1)
	fill := cacheSize + cacheSize/10
	fmt.Printf("\nproduction volume: issuing %d tokens and validating each once to fill the verified-token cache (%d entries) past its size\n",
		fill, cacheSize)
	filled := make([]string, fill)
	if err := issueN(s.issuerURL, s.basic, int64(fill), filled); err != nil {
		return err
	}
	start := time.Now()
	probe, err := probeValidate(s.issuerURL, filled, 1, 64)
	if err != nil {
		return err
	}
	fmt.Printf("(validated in %v, 64 clients closed loop: p50 %v, p99 %v)\n", time.Since(start).Round(time.Second),
		probe.p50.Round(time.Microsecond), probe.p99.Round(time.Microsecond))
	known := filled[fill-knownTokens:]

	// Never-seen tokens, issued now and validated once in the runs below:
	// the never-seen run takes one per request, the mix mixUnseen in mixOf.
	perRun := int(rateFor.Seconds() * float64(*productionRate))
	perRound := perRun + (perRun/mixOf+1)*mixUnseen
	unseen := make([]string, perRound*rounds)
	if err := issueN(s.issuerURL, s.basic, int64(len(unseen)), unseen); err != nil {
		return err
	}

	issueReq := []byte(issueRequest(s.basic))
	bareReq := []byte(bareRequest)
	paths := []struct {
		name    string
		url     string
		pid     int
		request func(round, i int) []byte
		mix     bool
		runs    []pathRun
	}{
		{name: "bare net/http, fixed JSON", url: s.bareURL, pid: s.barePid, request: func(_, _ int) []byte { return bareReq }},
		{name: "POST /token", url: s.issuerURL, pid: s.issuerPid, request: func(_, _ int) []byte { return issueReq }},
		{name: "GET /token/validate, known tokens", url: s.issuerURL, pid: s.issuerPid,
			request: func(_, i int) []byte { return []byte(validateRequest(known[i%len(known)])) }},
		{name: "GET /token/validate, never-seen tokens", url: s.issuerURL, pid: s.issuerPid,
			request: func(round, i int) []byte { return []byte(validateRequest(unseen[round*perRound+i])) }},
		{name: "the mix", url: s.issuerURL, pid: s.issuerPid, mix: true, request: func(round, i int) []byte {
			switch mixPath(i) {
			case mixPathIssue:
				return issueReq
			case mixPathUnseen:
				return []byte(validateRequest(unseen[round*perRound+perRun+i/mixOf*mixUnseen+i%mixOf-mixIssue]))
			default:
				return []byte(validateRequest(known[i%len(known)]))
			}
		}},
	}
	var signs, verifies []time.Duration
	for round := range rounds {
		for p := range paths {
			path := &paths[p]
			serverBefore, err1 := cpuTime(path.pid)
			redisBefore, err2 := cpuTime(s.redisPid)
			lat, failed, err := constantRate(*productionRate, *rateFor, strings.TrimPrefix(path.url, "http://"),
				func(i int) []byte { return path.request(round, i) })
			if err != nil {
				return err
			}
			serverAfter, err3 := cpuTime(path.pid)
			redisAfter, err4 := cpuTime(s.redisPid)
			if err := cmp.Or(err1, err2, err3, err4); err != nil {
				return err
			}
			n := time.Duration(len(lat))
			run := pathRun{serverCPU: (serverAfter - serverBefore) / n, redisCPU: (redisAfter - redisBefore) / n}
			if path.mix {
				var parts [3]struct {
					lat    []time.Duration
					failed []bool
				}
				for i := range lat {
					k := mixPath(i)
					parts[k].lat = append(parts[k].lat, lat[i])
					parts[k].failed = append(parts[k].failed, failed[i])
				}
				for _, part := range parts {
					run.parts = append(run.parts, summarize(part.lat, part.failed))
				}
			}
			run.res = summarize(lat, failed)
			path.runs = append(path.runs, run)
		}
		sign, verify := ed25519Cost()
		signs, verifies = append(signs, sign), append(verifies, verify)
	}

	// Each figure is the median of the rounds, taken figure by figure.
	med := func(runs []pathRun, f func(pathRun) time.Duration) time.Duration {
		xs := make([]time.Duration, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	cpu := func(r pathRun) time.Duration { return r.serverCPU }
	bareCPU, bareP99 := med(paths[0].runs, cpu), med(paths[0].runs, func(r pathRun) time.Duration { return r.res.p99 })
	sign, verify := median(signs), median(verifies)
	floors := []time.Duration{bareCPU, bareCPU + sign, bareCPU, bareCPU + verify,
		bareCPU + (sign*mixIssue+verify*mixUnseen)/mixOf}
	live, err := dbsize(s.redisPort)
	if err != nil {
		return err
	}
	used, err := usedMemory(s.redisPort)
	if err != nil {
		return err
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
	fmt.Printf("\nproduction volume: %d requests/s, %d rounds of %v per path, %d keys in Redis, the verified-token cache filled past its size; "+
		"each figure is the median of the rounds; one Ed25519 signature %s, verification %s (CPU in this process, median of the rounds):\n\n",
		*productionRate, rounds, *rateFor, live, us(sign), us(verify))
	fmt.Println("| path | server CPU/req | floor | ÷ floor | Redis CPU/req | p50 | p99 | p99 ÷ bare's | errors |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for p, path := range paths {
		c := med(path.runs, cpu)
		p99 := med(path.runs, func(r pathRun) time.Duration { return r.res.p99 })
		p50 := med(path.runs, func(r pathRun) time.Duration { return r.res.p50 })
		errs := 0
		for _, r := range path.runs {
			errs += r.res.errors
		}
		redisCPU := us(med(path.runs, func(r pathRun) time.Duration { return r.redisCPU }))
		floor := []string{"bare", "bare + sign", "bare", "bare + verify", "weighted"}[p]
		fmt.Printf("| %s | %s | %s (%s) | %.2f× | %s | %v | %v | %.2f× | %d |\n", path.name, us(c), us(floors[p]), floor,
			float64(c)/float64(floors[p]), redisCPU, p50, p99, float64(p99)/float64(bareP99), errs)
		if path.mix {
			for k, name := range []string{mixPathIssue: "issue", mixPathUnseen: "never-seen tokens", mixPathKnown: "known tokens"} {
				p99 := med(path.runs, func(r pathRun) time.Duration { return r.parts[k].p99 })
				p50 := med(path.runs, func(r pathRun) time.Duration { return r.parts[k].p50 })
				fmt.Printf("| the mix: %s | — | — | — | — | %v | %v | %.2f× | — |\n", name, p50, p99, float64(p99)/float64(bareP99))
			}
		}
	}
	fmt.Printf("\nissuer RSS after the round: %s (peak %s); Redis used_memory %d B, %.1f B per key above the empty Redis (%d keys)\n",
		procStatus(s.issuerPid, "VmRSS"), peakRSS(s.issuerPid), used, float64(used-s.usedEmpty)/float64(live), live)
	return nil
}

// ed25519Cost is the CPU time of one Ed25519 signature and one verification
// of a message the size of a token's signing input, on a thread of this
// process (getrusage RUSAGE_THREAD, Linux).
func ed25519Cost() (sign, verify time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := make([]byte, 300)
	rand.Read(msg)
	sig := ed25519.Sign(priv, msg)
	const n = 2000
	measure := func(f func()) time.Duration {
		before := threadCPU()
		for range n {
			f()
		}
		return (threadCPU() - before) / n
	}
	sign = measure(func() { ed25519.Sign(priv, msg) })
	verify = measure(func() {
		if !ed25519.Verify(pub, msg, sig) {
			panic("ed25519: own signature did not verify")
		}
	})
	return sign, verify
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, Linux
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// median is the middle of xs; it sorts xs.
func median[T cmp.Ordered](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
