// Command load measures the issuer under load, side by side with a bare
// net/http handler and a peer on the same machine, in one run:
//
//	cd bench && go run ./cmd/load
//
// It starts its own redis-server, issuer (production mode, real Redis; a
// JWT client, an opaque one and a private_key_jwt one), bare handler and peer (cmd/peer: a
// go-oauth2/oauth2 v4 server with its Redis token store, in db 1; peer.go)
// on loopback. It first measures the Redis bytes per session of each
// format and of the peer, one after another (memory.go), and fills the
// issuer's verified-token cache past its size (cold.go). Then it runs wrk
// (64 connections) against the bare handler and each endpoint (endpoints.go)
// and prints a table of requests/s, latency and the ratio to the bare
// handler, and each row's server CPU per request against its floor with
// its target (floor.go, BENCHMARKS.md): the bare handler's CPU per request, plus
// the signatures and verifications the row needs (Ed25519; ES256 for a
// DPoP proof) measured in this process, in the same round, and the Redis
// commands per request of each row that uses
// Redis (commands.go: INFO commandstats over the run ÷ the requests wrk
// counted; the issuer's lease renewals and revocation-log heartbeats count,
// amortised; the target for hot validation is ≤ 0.01). Its never-seen row
// validates JWTs that no request has used, a fresh pool each round
// (cold.go, pool.go); its DPoP rows (dpop.go) send a DPoP-bound
// token with a proof of its own in each request, from such a pool too, and
// are held to a target of 1.3× the bare handler plus one
// verification of the proof's algorithm. Its private_key_jwt row
// (assertion.go) issues tokens to a client that authenticates
// with a client assertion of its own in each request, from such a pool,
// held to 1.3× the secret-based JWT issue row of the same round plus one
// verification. With -pprof DIR the issuer serves its
// profiles and the tool takes its CPU profile during the last round of each
// DPoP validation row, of the private_key_jwt row and of the JWT issue row
// it is compared with (profile.go), for where their CPU goes;
// profiling costs CPU, so such a run's figures are not the table's. Unless -png is "", it draws the wrk table as a chart: each
// row's server CPU per request against its floor, the peer's rows among
// them (chart.go; default the repository's docs/load.png). Then an
// open-loop load at a constant rate (default 10,000 requests/s) on the
// same endpoints, reporting p50/p99 measured from each
// request's scheduled start, so a stall cannot hide its queue (no
// coordinated omission), and CPU against the floor and Redis commands per
// request again (rate.go). Unless -sessions is 0, it then grows Redis to
// that many live sessions and measures again (sessions.go). With
// -production it then runs the production-volume round (production.go): the verified-token cache filled past its
// size, among the -sessions live sessions, each path and a mix at a
// constant rate against its floor, on the issuer and through a consumer
// that validates with client.Validator in remote mode (cmd/consumer).
//
// Before any of that (unless -ids=false) it runs the ID-engine comparison
// (ids.go): BenchmarkIDs of this module, snowflakealg beside
// bwmarrin/snowflake and sony/sonyflake from 1, 8 and 16 goroutines sharing
// one generator, -ids-rounds rounds of every case, and prints each case's
// median as a fraction of the 4,096,000 IDs/s limit with the load average
// around the rounds. With -ids-only it runs that alone:
//
//	cd bench && go run ./cmd/load -ids-only
//
// With -extauthz-only it runs the ext_authz Check rows alone (extauthz.go),
// after the build, redis-server and the issuer:
//
//	cd bench && go run ./cmd/load -extauthz-only -d 3s -rounds 1
//
// With -revocation it runs the revocation scenario alone instead
// (revocation.go), after the build and redis-server:
//
//	cd bench && go run ./cmd/load -revocation
//
// three issuer replicas (production mode, the same Redis, key and clients
// file, worker IDs 1 to 3) under a constant validation load
// (-revocation-rate, spread over them), and a consumer (cmd/consumer -mode
// follow) that validates JWTs locally and follows replica 1's revocation
// feed, failing closed. It prints the replicas' Redis commands per hot
// validation with nothing else going on for -rate-d, then runs -revocations
// revocations, -revocation-c at once: each token is issued, validated once
// on every replica and (a JWT) on the consumer, revoked, and each of them
// polled until it answers 401; it prints each one's time from the revoke's
// 200 to that 401 (p50, p99 against the target of 100 ms, max), and fails
// if a replica or the consumer accepted a revoked token past
// -revocation-timeout. -revocation-parent revokes a parent instead and
// polls a token exchanged from it (the cascade; cascade.go).
// -revocation-consumer=false leaves the consumer out. The issuers inherit this
// process's environment, so SNOWTOKEN_REVLOG_THRESHOLD=off go run ./cmd/load
// -revocation -revocation-consumer=false measures them with the revocation
// log off (on an issuer that has the setting; with no log there is no feed
// to follow).
//
// It needs redis-server, redis-cli and wrk on PATH (Debian packages).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

var (
	duration    = flag.Duration("d", 10*time.Second, "duration of each wrk run")
	rounds      = flag.Int("rounds", 3, "wrk rounds: each runs every endpoint once, one after another; the table shows the median round")
	connections = flag.Int("c", 64, "wrk connections")
	rate        = flag.Int("rate", 10000, "requests/s of the constant-rate runs (0 skips them)")
	rateFor     = flag.Duration("rate-d", 10*time.Second, "duration of each constant-rate run")
	idBench     = flag.Bool("ids", true, "also run the ID-engine comparison (go test -bench BenchmarkIDs in this module, ids.go) first")
	sessions    = flag.Int("sessions", 1_000_000, "live sessions to grow Redis to for the memory and flat-latency figures (0 skips)")
)

func run() (err error) {
	flag.Parse()
	if *revocation {
		if err := revocationFlags(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "snowtoken-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer func() {
		if err != nil {
			logTails(dir)
		}
	}()
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	if *idsOnly || *idBench && !*revocation && !*extAuthzOnly {
		// The ID engine beside bwmarrin/snowflake and sony/sonyflake, before
		// any server runs, so that nothing else shares the cores (ids.go).
		if err := runIDs(dir); err != nil {
			return err
		}
		if *idsOnly {
			return nil
		}
	}
	// Build the issuer, the bare handler, the consumer and the peer the way
	// the Dockerfile builds the issuer.
	bin := func(name string) string { return filepath.Join(dir, name) }
	builds := []struct{ out, pkg, wd string }{{bin("snowtoken"), ".", root}, {bin("bare"), "./cmd/bare", "."}, {bin("consumer"), "./cmd/consumer", "."}}
	if *revocation {
		builds = slices.Delete(builds, 1, 2) // the issuer and the consumer
	} else if *withPeer {
		builds = append(builds, struct{ out, pkg, wd string }{bin("peer"), "./cmd/peer", "."})
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.out, b.pkg)
		cmd.Dir, cmd.Stderr = b.wd, os.Stderr
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", b.pkg, err)
		}
	}

	redisPort, _ := freePort()
	redis, err := start(dir, "redis-server", nil, "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	defer redis.stop()
	if err := waitRedis(redisPort); err != nil {
		return err
	}
	usedEmpty, err := usedMemory(redisPort)
	if err != nil {
		return err
	}

	// A signing key and a clients file, made by the binary itself: a JWT
	// client, an opaque one and one without a secret.
	keyPath := filepath.Join(dir, "key.pem")
	if out, err := exec.Command(bin("snowtoken"), "keys", "new", "-out", keyPath).CombinedOutput(); err != nil {
		return fmt.Errorf("keys new: %v: %s", err, out)
	}
	secret, entry, err := newClient(bin("snowtoken"), "bench")
	if err != nil {
		return err
	}
	basic := basicAuth("bench", secret)
	// The JWT client also exchanges its own tokens (the exchange row):
	// token exchange without an actor is impersonation, opted in to.
	for _, f := range [...]string{"token_exchange", "impersonation"} {
		if entry, err = withField(entry, f, true); err != nil {
			return err
		}
	}
	opaqueSecret, opaqueEntry, err := newClient(bin("snowtoken"), "bench-opaque")
	if err != nil {
		return err
	}
	opaqueBasic := basicAuth("bench-opaque", opaqueSecret)
	if opaqueEntry, err = withField(opaqueEntry, "token_format", "opaque"); err != nil {
		return err
	}
	// A client with no secret: it authenticates by private_key_jwt
	// (assertion.go).
	assertionKey, err := newProofKey("EdDSA")
	if err != nil {
		return err
	}
	keyEntry, err := keyClient(bin("snowtoken"), dir, assertionClient, assertionKey)
	if err != nil {
		return err
	}
	entries := []string{entry, opaqueEntry, keyEntry}
	// The revocation scenario's consumer follows the revocation feed as a
	// client of its own.
	feed := feedClient{id: "bench-feed"}
	if *revocation {
		var feedEntry string
		if feed.secret, feedEntry, err = newClient(bin("snowtoken"), feed.id); err != nil {
			return err
		}
		if feedEntry, err = withField(feedEntry, "revocation_feed", true); err != nil {
			return err
		}
		entries = append(entries, feedEntry)
	}
	clientsPath := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(clientsPath, []byte(`{"clients":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		return err
	}
	cfg := issuerConfig{redisPort: redisPort, keyPath: keyPath, clientsPath: clientsPath}
	if *revocation {
		return revocationScenario(dir, bin("snowtoken"), bin("consumer"), cfg, basic, opaqueBasic, feed)
	}

	issuerPort, _ := freePort()
	barePort, _ := freePort()
	issuerURL := fmt.Sprintf("http://127.0.0.1:%d", issuerPort)
	cfg.issuerURL = issuerURL
	bareURL := fmt.Sprintf("http://127.0.0.1:%d", barePort)
	issuerEnv, metrics := withProfiles(cfg.env(issuerPort, 1))
	// Transaction Tokens on, for the row of a validation that mints one.
	issuerEnv = append(issuerEnv, "SNOWTOKEN_TXN_TRUST_DOMAIN="+txnTrustDomain)
	// The ext_authz listener, and the bare grpc-go server beside it
	// (extauthz.go).
	checkPort, bareCheckPort := 0, 0
	if *extAuthzRows || *extAuthzOnly {
		checkPort, _ = freePort()
		bareCheckPort, _ = freePort()
		issuerEnv = append(issuerEnv, "SNOWTOKEN_EXTAUTHZ_ADDR=127.0.0.1:"+strconv.Itoa(checkPort))
	}
	issuerMetrics = metrics
	issuer, err := start(dir, bin("snowtoken"), issuerEnv)
	if err != nil {
		return err
	}
	defer issuer.stop()
	bare, err := start(dir, bin("bare"), nil, "-addr", "127.0.0.1:"+strconv.Itoa(barePort))
	if err != nil {
		return err
	}
	defer bare.stop()
	// The bare handler again, reading one key of Redis (db 2) per request
	// with plain go-redis: what waiting on one round trip costs a handler.
	bareRedisPort, _ := freePort()
	bareRedisURL := fmt.Sprintf("http://127.0.0.1:%d", bareRedisPort)
	bareRedis, err := start(dir, bin("bare"), nil, "-addr", "127.0.0.1:"+strconv.Itoa(bareRedisPort),
		"-redis", fmt.Sprintf("redis://127.0.0.1:%d/2", redisPort))
	if err != nil {
		return err
	}
	defer bareRedis.stop()
	for _, url := range []string{issuerURL + "/readyz", bareURL + "/", bareRedisURL + "/"} {
		if err := waitHTTP(url); err != nil {
			return err
		}
	}
	if *extAuthzOnly {
		return checkRows(dir, bin("bare"), issuerURL, basic, bareCheckPort, checkPort, issuer.cmd.Process.Pid, redisPort)
	}
	var pr *peer
	if *withPeer {
		if pr, err = startPeer(dir, bin("peer"), redisPort); err != nil {
			return err
		}
		defer pr.stop()
	}
	s := servers{
		issuerURL: issuerURL, bareURL: bareURL, basic: basic, opaqueBasic: opaqueBasic, peer: pr,
		bareRedisURL: bareRedisURL, bareRedisPid: bareRedis.cmd.Process.Pid,
		issuerPid: issuer.cmd.Process.Pid, barePid: bare.cmd.Process.Pid, redisPid: redis.cmd.Process.Pid,
		redisPort: redisPort, usedEmpty: usedEmpty, assertionKey: assertionKey,
	}

	// Redis bytes per session first, while nothing else has grown Redis.
	sources := []sessionSource{{name: "snowtoken JWT", url: issuerURL, basic: basic}, {name: "snowtoken opaque", url: issuerURL, basic: opaqueBasic}}
	if pr != nil {
		sources = append(sources, sessionSource{name: peerPrefix + peerAlg + " JWT", url: pr.url, basic: pr.basic, db: peerDB, note: peerMemoryNote})
	}
	if err := sessionMemory(redisPort, sources); err != nil {
		return err
	}

	// The first 1,000 tokens probe validate latency while only they are
	// live, to compare with the same tokens among -sessions sessions later.
	probe := make([]string, 1000)
	var few latencyProbe
	if *sessions > 0 {
		if err := issueN(issuerURL, basic, int64(len(probe)), probe); err != nil {
			return err
		}
		if few, err = probeValidate(issuerURL, probe, 10, 8); err != nil {
			return err
		}
		if few.live, err = dbsize(redisPort, 0); err != nil {
			return err
		}
	}
	// The never-seen rows need the verified-token cache full first.
	if _, err := fillCache(issuerURL, basic); err != nil {
		return err
	}
	fmt.Println()

	eps, err := s.endpoints()
	if err != nil {
		return err
	}
	var rows []*row
	byName := map[string]*row{}
	for i, e := range eps {
		r := &row{name: e.name, url: e.url + e.req.path, server: e.pid, redis: e.redis,
			floor: e.floor, target: e.target, cmdsTarget: e.cmdsTarget}
		if e.profile {
			r.profile = fileName(r.name)
		}
		if e.fresh != nil {
			var refs []*row
			for _, name := range e.fresh.sizedBy {
				ref, ok := byName[name]
				if !ok {
					return fmt.Errorf("%s: its pool is sized from %q, which no row before it is", e.name, name)
				}
				refs = append(refs, ref)
			}
			r = e.fresh.pool(dir, r, refs)
		} else {
			name := filepath.Join(dir, fmt.Sprintf("%d.lua", len(rows)))
			if err := os.WriteFile(name, []byte(e.req.lua()), 0o600); err != nil {
				return err
			}
			r.script = filepath.Base(name)
		}
		rows = append(rows, r)
		byName[r.name] = r
		for _, ns := range neverSeenRows(i, dir, issuerURL, basic, r, s.issuerPid, s.redisPid) {
			rows = append(rows, ns) // right after its cached twin, whose rate sizes its pool
			byName[ns.name] = ns
		}
	}
	if err := wrkTable(dir, rows, redisPort); err != nil {
		return err
	}
	if *extAuthzRows {
		if err := checkRows(dir, bin("bare"), issuerURL, basic, bareCheckPort, checkPort, s.issuerPid, redisPort); err != nil {
			return err
		}
	}
	if *chartPath != "" {
		if err := writeChart(*chartPath, chartTitle(len(rows[0].all)), chartBars(rows)); err != nil {
			return err
		}
		fmt.Printf("\nchart: %s\n", *chartPath)
	}

	// The constant rate before and after Redis grows by -sessions.
	ratePhase := func() error {
		if *rate <= 0 {
			return nil
		}
		paths := make([]*loadPath, len(eps))
		for i, e := range eps {
			paths[i] = &loadPath{name: e.name, url: e.url, pid: e.pid, floor: e.floor, target: e.target, cmdsTarget: e.cmdsTarget, request: same(e.req)}
			if e.fresh != nil {
				e.fresh.ratePath(paths[i])
			}
		}
		return rateTable(s, paths)
	}
	if err := ratePhase(); err != nil {
		return err
	}
	if *sessions > 0 {
		if err := sessionsPhase(issuerURL, basic, redisPort, usedEmpty, probe, few); err != nil {
			return err
		}
		if err := ratePhase(); err != nil {
			return err
		}
	}
	if *production {
		consumerPort, _ := freePort()
		consumerURL := fmt.Sprintf("http://127.0.0.1:%d", consumerPort)
		consumer, err := start(dir, bin("consumer"), nil, "-addr", "127.0.0.1:"+strconv.Itoa(consumerPort), "-issuer", issuerURL)
		if err != nil {
			return err
		}
		defer consumer.stop()
		if err := waitHTTP(consumerURL + "/healthz"); err != nil {
			return err
		}
		s.consumerURL, s.consumerPid = consumerURL, consumer.cmd.Process.Pid
		if err := productionRound(s); err != nil {
			return err
		}
	}
	fmt.Printf("\nissuer peak RSS (VmHWM): %s\n", peakRSS(s.issuerPid))
	return nil
}
