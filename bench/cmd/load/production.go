package main

import (
	"cmp"
	"flag"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/client"
)

var (
	production = flag.Bool("production", false, "also run the production-volume round: the verified-token cache filled past its size, "+
		"then each path alone and a steady mix at -production-rate, among the -sessions live sessions, on the issuer and through a "+
		"client.Validator in remote mode (adds about 5 minutes at the defaults)")
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

// productionRound fills the issuer's verified-token cache past its size
// (and the consumer's answer cache past its own), then in each of -rounds
// rounds runs every path at -production-rate for -rate-d: the bare handler,
// issue alone, validation of known tokens alone, of never-seen tokens
// alone, and the mix of the three; then the same validations through the
// consumer; and measures, in the same round, the CPU of one Ed25519
// signature and verification in this process. It prints each path's server
// CPU per request against its floor (the bare handler, plus a signature for
// issue and a verification for never-seen tokens), its p99 against the bare
// handler's, the issuer's RSS and Redis memory per key.
func productionRound(s servers) error {
	rounds := max(*rounds, 1)
	fmt.Print("\nproduction volume: ")
	filled, err := fillCache(s.issuerURL, s.basic)
	if err != nil {
		return err
	}
	fill := len(filled)
	known := filled[fill-knownTokens:]
	// The consumer's cache is smaller: its known tokens are the last half of
	// its size, and it is filled with the tokens just before them.
	consumerKnown := filled[fill-client.DefaultCacheSize/2:]
	if s.consumerURL != "" {
		if err := validateEach(s.consumerURL, filled[fill-client.DefaultCacheSize*11/10:]); err != nil {
			return err
		}
	}

	// Never-seen tokens, issued now and validated once in the runs below:
	// a never-seen run takes one per request, a mix mixUnseen in mixOf.
	perRun := int(rateFor.Seconds() * float64(*productionRate))
	perRound := 0
	take := func(n int) int { from := perRound; perRound += n; return from }
	var pool []string // perRound tokens for each round
	unseen := func(round, i int) string { return pool[round*perRound+i] }
	unseenRun := func() func(round, i int) []byte {
		from := take(perRun)
		return func(round, i int) []byte { return []byte(validateRequest(unseen(round, from+i)).raw()) }
	}
	issueReq := []byte(issueRequest(s.basic).raw())
	mixRun := func(known []string, issue []byte) func(round, i int) []byte {
		from := take((perRun/mixOf + 1) * mixUnseen)
		return func(round, i int) []byte {
			switch mixPath(i) {
			case mixPathIssue:
				if issue != nil {
					return issue
				}
			case mixPathUnseen:
				return []byte(validateRequest(unseen(round, from+i/mixOf*mixUnseen+i%mixOf-mixIssue)).raw())
			}
			return []byte(validateRequest(known[i%len(known)]).raw())
		}
	}
	knownRun := func(known []string) func(round, i int) []byte {
		return func(_, i int) []byte { return []byte(validateRequest(known[i%len(known)]).raw()) }
	}
	paths := []*loadPath{
		{name: "bare net/http, fixed JSON", url: s.bareURL, pid: s.barePid, floor: floorBare, request: same(bareRequest)},
		{name: "POST /token", url: s.issuerURL, pid: s.issuerPid, floor: floorSign, request: same(issueRequest(s.basic))},
		{name: "GET /token/validate, known tokens", url: s.issuerURL, pid: s.issuerPid, floor: floorBare, request: knownRun(known)},
		{name: "GET /token/validate, never-seen tokens", url: s.issuerURL, pid: s.issuerPid, floor: floorVerify, request: unseenRun()},
		{name: "the mix", url: s.issuerURL, pid: s.issuerPid, path: mixPath, floor: "weighted", request: mixRun(known, issueReq)},
	}
	issuerPaths := len(paths)
	if s.consumerURL != "" {
		c := func(name string, request func(round, i int) []byte, path func(i int) int) *loadPath {
			return &loadPath{name: "consumer: " + name, url: s.consumerURL, pid: s.consumerPid, behind: s.issuerPid,
				floor: floorBare, request: request, path: path}
		}
		// The consumer's mix sends a known token where the issuer's issues one.
		noIssue := func(i int) int { return cmp.Or(mixPath(i), mixPathKnown) }
		paths = append(paths,
			c("known tokens", knownRun(consumerKnown), nil),
			c("never-seen tokens", unseenRun(), nil),
			c("the mix without issue (85/15)", mixRun(consumerKnown, nil), noIssue))
	}
	pool = make([]string, perRound*rounds)
	if err := issueN(s.issuerURL, s.basic, int64(len(pool)), pool); err != nil {
		return err
	}

	costs, err := runRounds(paths, *productionRate, s.redisPid, s.redisPort)
	if err != nil {
		return err
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
	p99 := func(r pathRun) time.Duration { return r.res.p99 }
	bareCPU, bareP99 := med(paths[0].runs, cpu), med(paths[0].runs, p99)
	c := medianCosts(costs)
	sign, verify := c.sign, c.verify
	fl := floors(bareCPU, 0, c)
	fl["weighted"] = bareCPU + (sign*mixIssue+verify*mixUnseen)/mixOf
	live, err := dbsize(s.redisPort, 0)
	if err != nil {
		return err
	}
	used, err := usedMemory(s.redisPort)
	if err != nil {
		return err
	}
	fmt.Printf("\nproduction volume: %d requests/s, %d rounds of %v per path, %d keys in Redis, the verified-token cache filled past its size; "+
		"each figure is the median of the rounds; one Ed25519 signature %s, verification %s (CPU in this process, median of the rounds):\n\n",
		*productionRate, rounds, *rateFor, live, us(sign), us(verify))
	fmt.Println("| path | server CPU/req | floor | ÷ floor | issuer CPU/req behind it | Redis CPU/req | p50 | p99 | p99 ÷ bare's | errors |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for p, path := range paths {
		c := med(path.runs, cpu)
		behind := "—"
		if path.behind != 0 {
			behind = us(med(path.runs, func(r pathRun) time.Duration { return r.behindCPU }))
		}
		errs := 0
		for _, r := range path.runs {
			errs += r.res.errors
		}
		floor := fl[path.floor]
		fmt.Printf("| %s | %s | %s (%s) | %.2f× | %s | %s | %v | %v | %.2f× | %d |\n", path.name, us(c), us(floor), path.floor,
			float64(c)/float64(floor), behind, us(med(path.runs, func(r pathRun) time.Duration { return r.redisCPU })),
			med(path.runs, func(r pathRun) time.Duration { return r.res.p50 }), med(path.runs, p99),
			float64(med(path.runs, p99))/float64(bareP99), errs)
		if path.path == nil {
			continue
		}
		for k, name := range []string{mixPathIssue: "issue", mixPathUnseen: "never-seen tokens", mixPathKnown: "known tokens"} {
			if path.runs[0].parts[k].sent == 0 {
				continue
			}
			p99 := med(path.runs, func(r pathRun) time.Duration { return r.parts[k].p99 })
			fmt.Printf("| %s: %s | — | — | — | — | — | %v | %v | %.2f× | — |\n", path.name, name,
				med(path.runs, func(r pathRun) time.Duration { return r.parts[k].p50 }), p99, float64(p99)/float64(bareP99))
		}
		if p == issuerPaths-1 && s.consumerURL != "" {
			fmt.Println("| **through the consumer (client.Validator, remote mode, CacheTTL 1m)** | | | | | | | | | |")
		}
	}
	fmt.Printf("\nissuer RSS after the round: %s (peak %s); Redis used_memory %d B, %.1f B per key above the empty Redis (%d keys)\n",
		procStatus(s.issuerPid, "VmRSS"), peakRSS(s.issuerPid), used, float64(used-s.usedEmpty)/float64(live), live)
	return nil
}
