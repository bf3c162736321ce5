// Command load measures the issuer under load, side by side with a bare
// net/http handler and a peer on the same machine, in one run:
//
//	cd bench && go run ./cmd/load
//
// It starts its own redis-server, issuer (production mode, real Redis; a
// JWT client and an opaque one), bare handler and peer (cmd/peer: a
// go-oauth2/oauth2 v4 server with its Redis token store, in db 1; peer.go)
// on loopback. It first measures the Redis bytes per session of each
// format and of the peer, one after another (memory.go), and fills the
// issuer's verified-token cache past its size (cold.go). Then it runs wrk
// (64 connections) against the bare handler and each endpoint (endpoints.go)
// and prints a table of requests/s, latency and the ratio to the bare
// handler, and each row's server CPU per request against its floor with
// issue 16's target (floor.go): the bare handler's CPU per request, plus
// one Ed25519 signature or verification measured in this process, in the
// same round, and the Redis commands per request of each row that uses
// Redis (commands.go: INFO commandstats over the run ÷ the requests wrk
// counted; the issuer's lease renewals and revocation-log heartbeats count,
// amortised; the target for hot validation is ≤ 0.01). Its never-seen row
// validates JWTs that no request has used, a fresh pool each round
// (cold.go). Then an open-loop load at a constant rate (default 10,000
// requests/s) on the same endpoints, reporting p50/p99 measured from each
// request's scheduled start, so a stall cannot hide its queue (no
// coordinated omission), and CPU against the floor and Redis commands per
// request again (rate.go). Unless -sessions is 0, it then grows Redis to
// that many live sessions and measures again (sessions.go). With
// -production it then runs the production-volume round of issue 19 (production.go): the verified-token cache filled past its
// size, among the -sessions live sessions, each path and a mix at a
// constant rate against its floor, on the issuer and through a consumer
// that validates with client.Validator in remote mode (cmd/consumer).
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
// -revocation-timeout. -revocation-consumer=false leaves the consumer out. The issuers inherit this
// process's environment, so SNOWTOKEN_REVLOG_THRESHOLD=0s go run ./cmd/load
// -revocation -revocation-consumer=false measures them with the revocation
// log off (on an issuer that has the setting; with no log there is no feed
// to follow).
//
// It needs redis-server, redis-cli and wrk on PATH (Debian packages).
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	idBench     = flag.Bool("ids", true, "also run the ID-engine comparison (go test -bench BenchmarkIDs in this module) first")
	chart       = flag.String("png", "", "also draw the wrk table as a PNG chart into this file")
	sessions    = flag.Int("sessions", 1_000_000, "live sessions to grow Redis to for the memory and flat-latency figures (0 skips)")
)

type proc struct{ cmd *exec.Cmd }

func (p *proc) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts the program name with args and env added to this
// process's, its output in dir/NAME.log, NAME its base name.
func start(dir, name string, env []string, args ...string) (*proc, error) {
	return startAs(dir, filepath.Base(name), name, env, args...)
}

// startAs is start with the output in dir/logName.log: one of several
// processes of the same program.
func startAs(dir, logName, name string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(dir, logName+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd}, nil
}

func waitHTTP(url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become ready", url)
}

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
	if *idBench && !*revocation {
		// The ID engine beside bwmarrin/snowflake and sony/sonyflake, before
		// any server runs, so that nothing else shares the cores.
		fmt.Println("ID engine (go test -run '^$' -bench BenchmarkIDs -benchtime 2s):")
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkIDs", "-benchtime", "2s", ".")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ID benchmark: %w", err)
		}
		fmt.Println()
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
	// client and an opaque one.
	keyPath := filepath.Join(dir, "key.pem")
	if out, err := exec.Command(bin("snowtoken"), "keys", "new", "-out", keyPath).CombinedOutput(); err != nil {
		return fmt.Errorf("keys new: %v: %s", err, out)
	}
	secret, entry, err := newClient(bin("snowtoken"), "bench")
	if err != nil {
		return err
	}
	basic := basicAuth("bench", secret)
	opaqueSecret, opaqueEntry, err := newClient(bin("snowtoken"), "bench-opaque")
	if err != nil {
		return err
	}
	opaqueBasic := basicAuth("bench-opaque", opaqueSecret)
	if opaqueEntry, err = withField(opaqueEntry, "token_format", "opaque"); err != nil {
		return err
	}
	entries := []string{entry, opaqueEntry}
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
	issuer, err := start(dir, bin("snowtoken"), cfg.env(issuerPort, 1))
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
		redisPort: redisPort, usedEmpty: usedEmpty,
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
	for i, e := range eps {
		name := filepath.Join(dir, fmt.Sprintf("%d.lua", len(rows)))
		if err := os.WriteFile(name, []byte(e.req.lua()), 0o600); err != nil {
			return err
		}
		rows = append(rows, &row{name: e.name, url: e.url + e.req.path, script: filepath.Base(name), server: e.pid, redis: e.redis,
			floor: e.floor, target: e.target, cmdsTarget: e.cmdsTarget})
		if i == hotJWT { // never-seen right after hot, whose rate sizes its pool
			ns := &neverSeen{dir: dir, issuerURL: issuerURL, basic: basic, hot: rows[len(rows)-1]}
			rows = append(rows, &row{name: "GET /token/validate, never-seen JWTs (cache full)", url: issuerURL + "/token/validate",
				server: s.issuerPid, redis: s.redisPid, floor: floorVerify, target: 1.6, prepare: ns.prepare, check: ns.check})
		}
	}
	if err := wrkTable(dir, rows, redisPort); err != nil {
		return err
	}
	if *chart != "" {
		bars := make([]bar, len(rows))
		for i, r := range rows {
			bars[i] = bar{label: r.name, value: r.res.rps, ratio: r.ratio}
		}
		title := fmt.Sprintf("requests/s, wrk %d connections, median of %d rounds of %v, same machine, one run", *connections, len(rows[0].all), *duration)
		if err := writeChart(*chart, title, bars); err != nil {
			return err
		}
		fmt.Printf("\nchart: %s\n", *chart)
	}

	// The constant rate before and after Redis grows by -sessions.
	ratePhase := func() error {
		if *rate <= 0 {
			return nil
		}
		paths := make([]*loadPath, len(eps))
		for i, e := range eps {
			paths[i] = &loadPath{name: e.name, url: e.url, pid: e.pid, floor: e.floor, target: e.target, cmdsTarget: e.cmdsTarget, request: same(e.req)}
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

// issuerConfig is what every issuer the tool starts shares: one Redis,
// one signing key, one clients file and one SNOWTOKEN_ISSUER, as replicas
// of one deployment do.
type issuerConfig struct {
	issuerURL            string
	redisPort            int
	keyPath, clientsPath string
}

// env is the environment of an issuer in production mode listening on
// port with worker ID worker.
func (c issuerConfig) env(port, worker int) []string {
	return []string{
		"SNOWTOKEN_ENV=production", "SNOWTOKEN_ADDR=127.0.0.1:" + strconv.Itoa(port),
		fmt.Sprintf("SNOWTOKEN_REDIS_URL=redis://127.0.0.1:%d/0", c.redisPort),
		"SNOWTOKEN_ISSUER=" + c.issuerURL, "SNOWTOKEN_SIGNING_KEYS=" + c.keyPath,
		"SNOWTOKEN_CLIENTS_FILE=" + c.clientsPath, "SNOWTOKEN_WORKER_ID=" + strconv.Itoa(worker),
		"SNOWTOKEN_LOG_LEVEL=warn",   // a 503's cause is a warning; a run that goes well logs none
		"SNOWTOKEN_METRICS_ADDR=off", // not measured; and 9090 may be taken
	}
}

// logTails prints the last lines of the servers' logs in dir, which a
// failed run removes.
func logTails(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil || len(b) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintf(os.Stderr, "%s, its last lines:\n%s\n", filepath.Base(name), strings.Join(lines[max(0, len(lines)-10):], "\n"))
	}
}

// newClient makes a client with scopes read and write by the issuer's own
// `client new`, and returns its secret and its clients-file entry.
func newClient(issuerBin, id string) (secret, entry string, err error) {
	out, err := exec.Command(issuerBin, "client", "new", "-id", id, "-scopes", "read,write").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("client new: %v: %s", err, out)
	}
	return parseClientNew(out)
}

// basicAuth is the Authorization header value of client id with secret
// (its ID and secret are URL-safe, as `client new` makes them).
func basicAuth(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

// withField is a clients-file entry with its field name set to value, such
// as token_format or revocation_feed: `client new` has no flag for them.
func withField(entry, name string, value any) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(entry), &fields); err != nil {
		return "", fmt.Errorf("client new entry: %w", err)
	}
	f, err := json.Marshal(value)
	if err != nil {
		return "", err
	}
	fields[name] = f
	b, err := json.Marshal(fields)
	return string(b), err
}

func parseClientNew(out []byte) (secret, entry string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "client_secret:"); ok {
			secret = strings.TrimSpace(s)
		}
		if strings.HasPrefix(line, "{") {
			entry = line
		}
	}
	if secret == "" || entry == "" {
		return "", "", fmt.Errorf("unexpected client new output: %s", out)
	}
	return secret, entry, nil
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func issue(issuerURL, basic string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, issuerURL+"/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic)
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("POST /token: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.AccessToken, nil
}

// issueN issues n tokens with 64 concurrent clients and keeps them in into,
// unless into is nil; else len(into) is n.
func issueN(issuerURL, basic string, n int64, into []string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				t, err := issue(issuerURL, basic)
				if err != nil {
					errc <- err
					return
				}
				if into != nil {
					into[i] = t
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// cpuTime is the CPU time (user + system) process pid has used so far, from
// /proc/pid/stat, in Linux's USER_HZ clock ticks of 10 ms.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of the whole line
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// peakRSS reads the high-water resident set size of a process.
func peakRSS(pid int) string { return procStatus(pid, "VmHWM") }

// procStatus is one field of /proc/pid/status, such as VmRSS.
func procStatus(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
