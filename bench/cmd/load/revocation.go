package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The revocation scenario (-revocation): how long after a revoke's 200 each
// replica of a deployment refuses the token, under validation load.
//
//	three replicas, one Redis, one key, one clients file, worker IDs 1-3
//	   background: hot validations at -revocation-rate, open loop, spread over the three
//	   each revocation (-revocation-c in flight):
//	     POST /token on replica i%3 (JWT or opaque, alternately)
//	     GET /token/validate on every replica: 200 (now hot there)
//	     POST /token/revoke on replica i%3: its 200 arrives at t0
//	     on every replica, in a goroutine each: GET /token/validate every
//	       -revocation-poll until a 401 arrives (t_refused) or -revocation-timeout
//	   per replica: t_refused - t0, p50, p99 (target ≤ 100 ms), max
var (
	revocation = flag.Bool("revocation", false, "run only the revocation scenario (after the build and redis-server): three issuer replicas, "+
		"-revocations revocations under a validation load, and each replica's time from a revoke's 200 to its first 401 for the token")
	revocations       = flag.Int("revocations", 1000, "revocations of the revocation scenario")
	revocationRate    = flag.Int("revocation-rate", 3000, "requests/s of hot validations, spread over the replicas, during the revocation scenario")
	revocationC       = flag.Int("revocation-c", 8, "revocations in flight at once in the revocation scenario")
	revocationPoll    = flag.Duration("revocation-poll", time.Millisecond, "pause between two validations of a revoked token on a replica, until it answers 401")
	revocationTimeout = flag.Duration("revocation-timeout", 5*time.Second, "longest wait for a replica to refuse a revoked token: past it, a failure")
)

const (
	replicas = 3
	// refusalTarget is the issue's bound on the p99 of each replica's time
	// from a revoke's 200 to its refusal of the token.
	refusalTarget = 100 * time.Millisecond
	// backgroundTokens is how many hot tokens of each format the background
	// validation load cycles through.
	backgroundTokens = 64
)

// replica is one issuer of the revocation scenario.
type replica struct {
	url  string
	pid  int
	proc *proc
}

// refusal is what one replica did after one revocation.
type refusal struct {
	revoker int           // the replica that revoked the token
	opaque  bool          // the token's format
	after   time.Duration // from the revoke's 200 to the first 401 arriving
	// accepted is from the revoke's 200 to the sending of the last poll
	// answered 200 (0: none was): the replica still accepted the token
	// after that, so the refusal took at least this long.
	accepted time.Duration
	refused  bool // false: no 401 within -revocation-timeout
	other    int  // answers neither 200 nor 401 meanwhile (503 ...)
	polls    int  // validations sent after the revoke
}

// revocationFlags checks the revocation scenario's flags.
func revocationFlags() error {
	if *revocations < 1 || *revocationC < 1 || *revocationRate < replicas || *revocationTimeout <= 0 || *revocationPoll < 0 || *rateFor < time.Second {
		return fmt.Errorf("revocation scenario: -revocations %d, -revocation-c %d, -revocation-rate %d (at least %d), -revocation-timeout %v, "+
			"-revocation-poll %v, -rate-d %v (at least 1s): want positive values", *revocations, *revocationC, *revocationRate, replicas,
			*revocationTimeout, *revocationPoll, *rateFor)
	}
	return nil
}

// revocationScenario starts the replicas of cfg (bin, SNOWTOKEN_ISSUER
// the first's URL), measures their Redis commands per hot validation
// alone, then runs the revocations under validation load and prints each
// replica's revoke-to-refusal latency. It fails if any replica did not
// refuse a revoked token within -revocation-timeout.
func revocationScenario(dir, bin string, cfg issuerConfig, basic, opaqueBasic string) error {
	reps := make([]*replica, replicas)
	for k := range reps {
		port, err := freePort()
		if err != nil {
			return err
		}
		reps[k] = &replica{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
		if k == 0 {
			cfg.issuerURL = reps[0].url // the deployment's one name
		}
		if reps[k].proc, err = startAs(dir, fmt.Sprintf("snowtoken-%d", k+1), bin, cfg.env(port, k+1)); err != nil {
			return err
		}
		defer reps[k].proc.stop()
		reps[k].pid = reps[k].proc.cmd.Process.Pid
	}
	for _, r := range reps {
		if err := waitHTTP(r.url + "/readyz"); err != nil {
			return err
		}
	}

	// The background load's tokens, hot on every replica: JWTs, then
	// opaque tokens.
	var bg [][]byte
	for _, b := range []string{basic, opaqueBasic} {
		for range backgroundTokens {
			tok, err := issue(reps[len(bg)%replicas].url, b)
			if err != nil {
				return err
			}
			for _, r := range reps {
				if err := validateOK(r.url, tok); err != nil {
					return err
				}
			}
			bg = append(bg, []byte(validateRequest(tok).raw()))
		}
	}
	perReplica := *revocationRate / replicas
	fmt.Printf("revocation scenario: %d replicas (production mode, one Redis, worker IDs 1–%d)\n\n", replicas, replicas)
	if err := quietCommands(reps, bg, perReplica, cfg.redisPort); err != nil {
		return err
	}
	request := func(i int) []byte { return bg[i%len(bg)] }

	// The revocations, under the same load until they end.
	stop := make(chan struct{})
	ceiling := time.Duration((*revocations+*revocationC-1) / *revocationC) * (*revocationTimeout + 2*time.Second)
	background := make([]rateResult, replicas)
	errs := make([]error, replicas)
	var bgDone sync.WaitGroup
	for k, r := range reps {
		bgDone.Go(func() {
			lat, failed, err := openLoop(perReplica, int(ceiling.Seconds())*perReplica, strings.TrimPrefix(r.url, "http://"), request, stop)
			background[k], errs[k] = summarize(lat, failed), err
		})
	}
	time.Sleep(500 * time.Millisecond) // the load under way
	start := time.Now()
	results, err := runRevocations(reps, basic, opaqueBasic)
	took := time.Since(start)
	close(stop)
	bgDone.Wait()
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return printRefusals(results, background, perReplica, took)
}

// quietCommands prints the Redis commands of the replicas idle for -rate-d,
// per second, then per hot validation, with nothing else going on: -rate-d of
// perReplica requests/s on each replica with the JWTs of bg (its first
// half), then with its opaque tokens.
func quietCommands(reps []*replica, bg [][]byte, perReplica, redisPort int) error {
	window, err := startCommands(redisPort)
	if err != nil {
		return err
	}
	time.Sleep(*rateFor)
	calls, err := window.end()
	if err != nil {
		return err
	}
	perSecond := float64(calls.total()) / rateFor.Seconds()
	_, top := calls.perRequest(int64(rateFor.Seconds()))
	fmt.Printf("Redis commands of the %d replicas idle for %v: %.2f/s (%s), %.4f a request at %d requests/s in all\n",
		len(reps), *rateFor, perSecond, cmp.Or(top, "none"), perSecond/float64(perReplica*len(reps)), perReplica*len(reps))
	half := len(bg) / 2
	for _, hot := range []struct {
		name   string
		tokens [][]byte
	}{{"JWT", bg[:half]}, {"opaque", bg[half:]}} {
		window, err := startCommands(redisPort)
		if err != nil {
			return err
		}
		quiet := make([]rateResult, len(reps))
		errs := make([]error, len(reps))
		var wg sync.WaitGroup
		for k, r := range reps {
			wg.Go(func() {
				lat, failed, err := constantRate(perReplica, *rateFor, strings.TrimPrefix(r.url, "http://"),
					func(i int) []byte { return hot.tokens[i%len(hot.tokens)] })
				quiet[k], errs[k] = summarize(lat, failed), err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		calls, err := window.end()
		if err != nil {
			return err
		}
		var served int64
		failures := 0
		for _, q := range quiet {
			served, failures = served+int64(q.sent), failures+q.errors
		}
		cmds, top := calls.perRequest(served)
		fmt.Printf("hot validation (%s) alone, %d requests/s on each replica for %v (%d requests, %d failed): Redis cmds/req %.4f (target ≤ %g), "+
			"%.4f above the idle replicas' rate: %s\n",
			hot.name, perReplica, *rateFor, served, failures, cmds, hotCommands, cmds-perSecond*rateFor.Seconds()/float64(served), top)
	}
	fmt.Println(commandsLegend)
	return nil
}

// runRevocations runs -revocations revocations, -revocation-c at once, and
// returns what each replica did after each.
func runRevocations(reps []*replica, basic, opaqueBasic string) ([][replicas]refusal, error) {
	results := make([][replicas]refusal, *revocations)
	var next atomic.Int64
	var failed atomic.Bool
	errc := make(chan error, *revocationC)
	var wg sync.WaitGroup
	for range *revocationC {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(results) && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := revokeOne(reps, i, basic, opaqueBasic, &results[i]); err != nil {
					failed.Store(true)
					errc <- fmt.Errorf("revocation %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return results, <-errc
}

// revokeOne is revocation i: a token issued and revoked on replica i%3,
// JWT for even i, opaque for odd, validated on every replica first; then
// each replica polled until it refuses it.
func revokeOne(reps []*replica, i int, basic, opaqueBasic string, into *[replicas]refusal) error {
	revoker, opaque := i%replicas, i%2 == 1
	client := basic
	if opaque {
		client = opaqueBasic
	}
	tok, err := issue(reps[revoker].url, client)
	if err != nil {
		return err
	}
	for _, r := range reps {
		if err := validateOK(r.url, tok); err != nil {
			return err
		}
	}
	if err := revoke(reps[revoker].url, client, tok); err != nil {
		return err
	}
	t0 := time.Now()
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for k, r := range reps {
		wg.Go(func() {
			into[k] = refusal{revoker: revoker, opaque: opaque}
			errs[k] = pollRefusal(r.url, tok, t0, &into[k])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pollRefusal validates tok at url every -revocation-poll until a 401
// arrives, and records in into how long after t0 it did; or, past
// -revocation-timeout, that it never did.
func pollRefusal(url, tok string, t0 time.Time, into *refusal) error {
	for {
		sent := time.Since(t0)
		status, err := validateStatus(url, tok)
		if err != nil {
			return err
		}
		since := time.Since(t0)
		into.polls++
		switch status {
		case http.StatusUnauthorized:
			into.after, into.refused = since, true
			return nil
		case http.StatusOK:
			into.accepted = sent
		default:
			into.other++
		}
		if since > *revocationTimeout {
			return nil
		}
		time.Sleep(*revocationPoll)
	}
}

// printRefusals prints each replica's revoke-to-refusal latency, and its
// background load, and fails if any revoked token was never refused.
func printRefusals(results [][replicas]refusal, background []rateResult, perReplica int, took time.Duration) error {
	fmt.Printf("\nrevocation to refusal: %d revocations in %v, %d in flight, each issued and revoked on replica i%%%d (JWT and opaque alternately) "+
		"after one validation on every replica; under %d hot validations/s on each replica (open loop); each replica polled every %v; "+
		"latency from the revoke's 200 arriving here to the replica's first 401 arriving here (one round trip and up to one poll interval above "+
		"the replica's own); the lower bound is from the revoke's 200 to the sending of the last validation answered 200 (0 if the first was refused):\n\n",
		len(results), took.Round(time.Millisecond), *revocationC, replicas, perReplica, *revocationPoll)
	fmt.Printf("| replica | revocations | refused | p50 | p99 (target ≤ %v) | max | p99 revoked on another replica | p99 JWT | p99 opaque | refused at the first poll | p99 lower bound | never refused within %v | answers neither 200 nor 401 |\n",
		refusalTarget, *revocationTimeout)
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	never := 0
	var above []string
	for k := range replicas {
		var all, elsewhere, jwt, opaque, accepted []time.Duration
		missed, other, first := 0, 0, 0
		for _, res := range results {
			f := res[k]
			other += f.other
			if !f.refused {
				missed++
				continue
			}
			if f.polls == 1 {
				first++
			}
			all, accepted = append(all, f.after), append(accepted, f.accepted)
			if f.revoker != k {
				elsewhere = append(elsewhere, f.after)
			}
			if f.opaque {
				opaque = append(opaque, f.after)
			} else {
				jwt = append(jwt, f.after)
			}
		}
		never += missed
		s := summarize(all, nil)
		verdict := "met"
		if missed > 0 || s.p99 > refusalTarget {
			verdict = "**MISSED**"
			above = append(above, strconv.Itoa(k+1))
		}
		p99 := func(xs []time.Duration) time.Duration { return summarize(xs, nil).p99 }
		fmt.Printf("| %d | %d | %d | %v | %v (%s) | %v | %v | %v | %v | %d | %v | %s | %d |\n", k+1, len(results), len(all), s.p50, s.p99, verdict, s.max,
			p99(elsewhere), p99(jwt), p99(opaque), first, p99(accepted), loud(missed), other)
	}
	fmt.Printf("\nbackground validation load during the revocations:\n\n")
	fmt.Println("| replica | sent | errors | p50 | p99 | max |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for k, b := range background {
		fmt.Printf("| %d | %d | %d | %v | %v | %v |\n", k+1, b.sent, b.errors, b.p50, b.p99, b.max)
	}
	if len(above) > 0 {
		fmt.Printf("\nthe target (p99 ≤ %v, every token refused) is missed on replica %s\n", refusalTarget, strings.Join(above, ", "))
	}
	if never > 0 {
		return fmt.Errorf("FAILED: %d times a replica still accepted a revoked token %v after its revoke's 200", never, *revocationTimeout)
	}
	return nil
}

// loud is n, marked when it is not 0.
func loud(n int) string {
	if n > 0 {
		return fmt.Sprintf("**%d FAILED**", n)
	}
	return "0"
}

// validateStatus is the status of GET /token/validate of tok at url.
func validateStatus(url, tok string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/token/validate", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// validateOK fails unless tok validates at url.
func validateOK(url, tok string) error {
	status, err := validateStatus(url, tok)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s/token/validate of a token just issued: %d", url, status)
	}
	return err
}

// revoke revokes tok at url as client basic (RFC 7009), and fails unless
// the answer is 200.
func revoke(issuerURL, basic, tok string) error {
	req, err := http.NewRequest(http.MethodPost, issuerURL+"/token/revoke", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic)
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s/token/revoke: %s: %s", issuerURL, resp.Status, b)
	}
	return nil
}
