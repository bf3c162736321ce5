package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snowtoken/snowtoken/client"
)

// The revocation scenario (-revocation): how long after a revoke's 200 each
// replica of a deployment, and a consuming service that follows the
// revocation feed, refuse the token, under validation load.
//
//	three replicas, one Redis, one key, one clients file, worker IDs 1-3
//	a consumer (cmd/consumer -mode follow): client.Local + client.Follow, FailClosed,
//	   following replica 1's GET /revocations/events as bench-feed (revocation_feed)
//	   background: hot validations at -revocation-rate, open loop, spread over the three replicas
//	   each revocation (-revocation-c in flight):
//	     POST /token on replica i%3 (JWT or opaque, alternately)
//	     GET /token/validate on every replica, GET / on the consumer (JWTs only): 200
//	     POST /token/revoke on replica i%3: its 200 arrives at t0
//	     on every replica and the consumer, in a goroutine each: the same GET every
//	       -revocation-poll until a 401 arrives (t_refused) or -revocation-timeout
//	   per replica and for the consumer: t_refused - t0, p50, p99 (target ≤ 100 ms), max
//	   -revocation-parent (cascade.go): the token revoked is a parent JWT, the one
//	     validated and polled a token exchanged from it
var (
	revocation = flag.Bool("revocation", false, "run only the revocation scenario (after the build and redis-server): three issuer replicas, "+
		"-revocations revocations under a validation load, and each replica's time from a revoke's 200 to its first 401 for the token")
	revocations        = flag.Int("revocations", 1000, "revocations of the revocation scenario")
	revocationRate     = flag.Int("revocation-rate", 3000, "requests/s of hot validations, spread over the replicas, during the revocation scenario")
	revocationC        = flag.Int("revocation-c", 8, "revocations in flight at once in the revocation scenario")
	revocationPoll     = flag.Duration("revocation-poll", time.Millisecond, "pause between two validations of a revoked token on a replica, until it answers 401")
	revocationTimeout  = flag.Duration("revocation-timeout", 5*time.Second, "longest wait for a replica to refuse a revoked token: past it, a failure")
	revocationConsumer = flag.Bool("revocation-consumer", true, "also start a consumer following replica 1's revocation feed (cmd/consumer -mode follow) and "+
		"measure it as the replicas; false for issuers that serve no feed (the revocation log off)")
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

// feedClient is the client the consumer follows the revocation feed as.
type feedClient struct{ id, secret string }

// validator is one server polled after each revocation: a replica, or the
// consumer.
type validator struct {
	name string // its row's
	url  string // GET with the token: 200 while it accepts it, 401 once it refuses it
	// replica is the replica it is, or whose feed it follows (0-based).
	replica int
	// jwtOnly: it checks JWTs alone. The consumer validates in local mode,
	// which refuses an opaque token outright: there is nothing to measure.
	jwtOnly bool
}

// refusal is what one validator did after one revocation.
type refusal struct {
	skipped bool          // not polled: an opaque token and a validator of JWTs only
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
// the first's URL) and a consumer (consumerBin -mode follow, following the
// first replica's feed as feed), measures the replicas' Redis commands per
// hot validation alone, then runs the revocations under validation load and
// prints each replica's and the consumer's revoke-to-refusal latency. It
// fails if any of them did not refuse a revoked token within
// -revocation-timeout.
func revocationScenario(dir, bin, consumerBin string, cfg issuerConfig, basic, opaqueBasic string, feed feedClient) error {
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
	if *revocationParent {
		var err error
		if cascade, err = newExchanger(cfg.keyPath); err != nil {
			return err
		}
	}
	vals := make([]validator, 0, replicas+1)
	for k, r := range reps {
		if err := waitHTTP(r.url + "/readyz"); err != nil {
			return err
		}
		vals = append(vals, validator{name: fmt.Sprintf("replica %d", k+1), url: r.url + "/token/validate", replica: k})
	}
	if *revocationConsumer {
		consumer, val, err := startFollower(dir, consumerBin, reps[0].url, feed)
		if err != nil {
			return err
		}
		defer consumer.stop()
		vals = append(vals, val)
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
				if err := validateOK(r.url+"/token/validate", tok); err != nil {
					return err
				}
			}
			bg = append(bg, []byte(validateRequest(tok).raw()))
		}
	}
	perReplica := *revocationRate / replicas
	fmt.Printf("revocation scenario: %d replicas (production mode, one Redis, worker IDs 1–%d)", replicas, replicas)
	if *revocationConsumer {
		fmt.Printf(" and a consumer following replica 1's revocation feed (cmd/consumer -mode follow: client.Local, client.Follow, FailClosed, "+
			"FeedThreshold %v)", client.DefaultFeedThreshold)
	}
	if cascade != nil {
		fmt.Print("; the cascade (-revocation-parent): each revocation revokes a parent JWT, and the token polled is one exchanged from it")
	}
	fmt.Print("\n\n")
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
	results, err := runRevocations(reps, vals, basic, opaqueBasic)
	took := time.Since(start)
	close(stop)
	bgDone.Wait()
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return printRefusals(os.Stdout, vals, results, background, perReplica, took)
}

// startFollower starts the consumer (consumerBin -mode follow) following
// the revocation feed of the replica at issuerURL as feed, and returns it
// and its validator once it listens, which it does once the feed is fresh.
// It follows the first replica, whose URL is the tokens' iss (its Issuer
// by default); revocations made on the others reach it through the
// revocation log, as they reach that replica.
func startFollower(dir, consumerBin, issuerURL string, feed feedClient) (*proc, validator, error) {
	port, err := freePort()
	if err != nil {
		return nil, validator{}, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	consumer, err := start(dir, consumerBin, []string{"CONSUMER_FEED_CLIENT_SECRET=" + feed.secret},
		"-addr", "127.0.0.1:"+strconv.Itoa(port), "-mode", "follow", "-issuer", issuerURL, "-feed-client", feed.id)
	if err != nil {
		return nil, validator{}, err
	}
	if err := waitHTTP(url + "/healthz"); err != nil {
		consumer.stop()
		return nil, validator{}, fmt.Errorf("the consumer following the revocation feed (see consumer.log): %w", err)
	}
	return consumer, validator{name: "consumer (follows replica 1)", url: url + "/", replica: 0, jwtOnly: true}, nil
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
