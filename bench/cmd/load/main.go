// Command load measures the issuer under load, side by side with a bare
// net/http handler on the same machine, in one run:
//
//	cd bench && go run ./cmd/load
//
// It starts its own redis-server and issuer (production mode, real Redis) on
// loopback, warms up, then runs wrk (64 connections) against the bare handler
// and each endpoint and prints a table of requests/s, latency and the ratio to
// the bare handler; then an open-loop load at a constant rate (default 10,000
// requests/s) for issue and validate, reporting p50/p99 measured from each
// request's scheduled start, so a stall cannot hide its queue (no coordinated
// omission). With -production it then runs the production-volume round of
// issue 19 (production.go): the verified-token cache filled past its size,
// among the -sessions live sessions, each path and a mix at a constant rate
// against its floor, on the issuer and through a consumer that validates
// with client.Validator in remote mode (cmd/consumer). It needs
// redis-server and wrk on PATH (Debian packages).
package main

import (
	"bufio"
	"bytes"
	"cmp"
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
	tokens      = flag.Int("tokens", 20000, "distinct tokens for the cold validate run")
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

func start(dir, name string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(dir, filepath.Base(name)+".log"))
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

func run() error {
	flag.Parse()
	dir, err := os.MkdirTemp("", "snowtoken-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	if *idBench {
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
	// Build the issuer and the bare handler the way the Dockerfile does.
	issuerBin, bareBin, consumerBin := filepath.Join(dir, "snowtoken"), filepath.Join(dir, "bare"), filepath.Join(dir, "consumer")
	for _, b := range []struct{ out, pkg, wd string }{{issuerBin, ".", root}, {bareBin, "./cmd/bare", "."}, {consumerBin, "./cmd/consumer", "."}} {
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

	// A signing key and a clients file, made by the binary itself.
	keyPath := filepath.Join(dir, "key.pem")
	if out, err := exec.Command(issuerBin, "keys", "new", "-out", keyPath).CombinedOutput(); err != nil {
		return fmt.Errorf("keys new: %v: %s", err, out)
	}
	out, err := exec.Command(issuerBin, "client", "new", "-id", "bench", "-scopes", "read,write").CombinedOutput()
	if err != nil {
		return fmt.Errorf("client new: %v: %s", err, out)
	}
	secret, entry, err := parseClientNew(out)
	if err != nil {
		return err
	}
	clientsPath := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(clientsPath, []byte(`{"clients":[`+entry+`]}`), 0o600); err != nil {
		return err
	}

	issuerPort, _ := freePort()
	barePort, _ := freePort()
	issuerURL := fmt.Sprintf("http://127.0.0.1:%d", issuerPort)
	bareURL := fmt.Sprintf("http://127.0.0.1:%d", barePort)
	issuer, err := start(dir, issuerBin, []string{
		"SNOWTOKEN_ENV=production", "SNOWTOKEN_ADDR=127.0.0.1:" + strconv.Itoa(issuerPort),
		fmt.Sprintf("SNOWTOKEN_REDIS_URL=redis://127.0.0.1:%d/0", redisPort),
		"SNOWTOKEN_ISSUER=" + issuerURL, "SNOWTOKEN_SIGNING_KEYS=" + keyPath,
		"SNOWTOKEN_CLIENTS_FILE=" + clientsPath, "SNOWTOKEN_WORKER_ID=1", "SNOWTOKEN_LOG_LEVEL=error",
		"SNOWTOKEN_METRICS_ADDR=off", // not measured; and 9090 may be taken
	})
	if err != nil {
		return err
	}
	defer issuer.stop()
	bare, err := start(dir, bareBin, nil, "-addr", "127.0.0.1:"+strconv.Itoa(barePort))
	if err != nil {
		return err
	}
	defer bare.stop()
	if err := waitHTTP(issuerURL + "/readyz"); err != nil {
		return err
	}
	if err := waitHTTP(bareURL + "/"); err != nil {
		return err
	}

	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("bench:"+secret))
	hot, err := issue(issuerURL, basic)
	if err != nil {
		return err
	}
	// Distinct tokens for the cold run, fetched before measuring. The first
	// 1,000 also probe validate latency while only they are live, to compare
	// with the same tokens among a million sessions later.
	cold := make([]string, *tokens)
	fetch := func(from, to int) error { return issueN(issuerURL, basic, int64(to-from), cold[from:to]) }
	probeN := min(1000, len(cold))
	if err := fetch(0, probeN); err != nil {
		return err
	}
	var few latencyProbe
	if *sessions > 0 {
		if few, err = probeValidate(issuerURL, cold[:probeN], 10, 8); err != nil {
			return err
		}
		if few.live, err = dbsize(redisPort); err != nil {
			return err
		}
	}
	if err := fetch(probeN, len(cold)); err != nil {
		return err
	}
	coldFile := filepath.Join(dir, "tokens.txt")
	if err := os.WriteFile(coldFile, []byte(strings.Join(cold, "\n")+"\n"), 0o600); err != nil {
		return err
	}

	scripts := map[string]string{
		"issue.lua": fmt.Sprintf(`wrk.method = "POST"
wrk.body = "grant_type=client_credentials&scope=read"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = %q
`, basic),
		"hot.lua": fmt.Sprintf(`wrk.headers["Authorization"] = "Bearer %s"
`, hot),
		"introspect.lua": fmt.Sprintf(`wrk.method = "POST"
wrk.body = "token=%s"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = %q
`, hot, basic),
		"cold.lua": fmt.Sprintf(`local tokens = {}
for line in io.lines(%q) do tokens[#tokens + 1] = line end
local i = 0
request = function()
  i = i %% #tokens + 1
  return wrk.format("GET", nil, { Authorization = "Bearer " .. tokens[i] })
end
`, coldFile),
		"status.lua": `local bad = 0
response = function(status) if status ~= 200 then bad = bad + 1 end end
done = function() end
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}

	type row struct {
		name, url, script string
		server, redis     int         // pids whose CPU time the run measures (redis 0: none)
		res               wrkResult   // of the median round by ratio to bare
		ratio             float64     // to bare, median of the rounds
		ratios            []float64   // to bare, round by round
		all               []wrkResult // round by round
	}
	issuerPid, barePid, redisPid := issuer.cmd.Process.Pid, bare.cmd.Process.Pid, redis.cmd.Process.Pid
	rows := []*row{
		{name: "bare net/http, fixed JSON", url: bareURL + "/", server: barePid},
		{name: "POST /token", url: issuerURL + "/token", script: "issue.lua", server: issuerPid, redis: redisPid},
		{name: "GET /token/validate, hot (same token)", url: issuerURL + "/token/validate", script: "hot.lua", server: issuerPid, redis: redisPid},
		{name: "GET /token/validate, cold (distinct tokens)", url: issuerURL + "/token/validate", script: "cold.lua", server: issuerPid, redis: redisPid},
		{name: "POST /token/introspect", url: issuerURL + "/token/introspect", script: "introspect.lua", server: issuerPid, redis: redisPid},
	}
	// Warm up every route, then measure.
	for _, r := range rows {
		if _, err := runWrk(dir, r.url, r.script, 2*time.Second, r.server, r.redis); err != nil {
			return err
		}
	}
	// Rounds: every endpoint right after the baseline, so that each ratio
	// compares runs minutes apart at most; noise that lasts a round moves
	// that round's ratios, and the median round leaves it out.
	for range max(*rounds, 1) {
		for _, r := range rows {
			res, err := runWrk(dir, r.url, r.script, *duration, r.server, r.redis)
			if err != nil {
				return err
			}
			r.all = append(r.all, res)
			r.ratios = append(r.ratios, res.rps/rows[0].all[len(r.all)-1].rps)
		}
	}
	for _, r := range rows {
		order := make([]int, len(r.all))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(r.ratios[a], r.ratios[b]) })
		if r == rows[0] { // all ratios 1: the median round by requests/s
			slices.SortFunc(order, func(a, b int) int { return cmp.Compare(r.all[a].rps, r.all[b].rps) })
		}
		mid := order[len(order)/2]
		r.res, r.ratio = r.all[mid], r.ratios[mid]
	}
	fmt.Printf("wrk, %d connections, %d rounds of %v per endpoint, one run (%s); each row is its median round:\n\n",
		*connections, len(rows[0].all), *duration, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| endpoint | requests/s | ratio to bare | ratio, lowest–highest round | p50 | p99 | non-2xx | server CPU/req | Redis CPU/req | wrk CPU/req |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
	for _, r := range rows {
		redisCPU := "—"
		if r.redis != 0 {
			redisCPU = us(r.res.redisCPU)
		}
		fmt.Printf("| %s | %.0f | %.2f× | %.2f–%.2f | %s | %s | %d | %s | %s | %s |\n", r.name, r.res.rps, r.ratio,
			slices.Min(r.ratios), slices.Max(r.ratios), r.res.p50, r.res.p99, r.res.non2xx, us(r.res.serverCPU), redisCPU, us(r.res.wrkCPU))
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
		live, err := dbsize(redisPort)
		if err != nil {
			return err
		}
		fmt.Printf("\nconstant %d requests/s with %d keys in Redis, %d rounds of %v per endpoint (open loop, latency from the scheduled start); each row is its round with the median p99:\n\n",
			*rate, live, max(*rounds, 1), *rateFor)
		fmt.Println("| endpoint | sent | errors | p50 | p99 | max | p99, lowest–highest round |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
		cases := []struct {
			name, url, req string
			all            []rateResult
		}{
			// The bare handler first: the latency floor of this machine at this rate.
			{name: "bare net/http, fixed JSON", url: bareURL, req: bareRequest},
			{name: "POST /token", url: issuerURL, req: issueRequest(basic)},
			{name: "GET /token/validate (hot)", url: issuerURL, req: validateRequest(hot)},
		}
		for range max(*rounds, 1) {
			for i := range cases {
				req := []byte(cases[i].req)
				lat, failed, err := constantRate(*rate, *rateFor, strings.TrimPrefix(cases[i].url, "http://"), func(int) []byte { return req })
				if err != nil {
					return err
				}
				cases[i].all = append(cases[i].all, summarize(lat, failed))
			}
		}
		for _, c := range cases {
			slices.SortFunc(c.all, func(a, b rateResult) int { return cmp.Compare(a.p99, b.p99) })
			res := c.all[len(c.all)/2]
			fmt.Printf("| %s | %d | %d | %v | %v | %v | %v–%v |\n", c.name, res.sent, res.errors, res.p50, res.p99, res.max,
				c.all[0].p99, c.all[len(c.all)-1].p99)
		}
		return nil
	}
	if err := ratePhase(); err != nil {
		return err
	}
	if *sessions > 0 {
		if err := sessionsPhase(issuerURL, basic, redisPort, usedEmpty, cold[:probeN], few); err != nil {
			return err
		}
		if err := ratePhase(); err != nil {
			return err
		}
	}
	if *production {
		consumerPort, _ := freePort()
		consumerURL := fmt.Sprintf("http://127.0.0.1:%d", consumerPort)
		consumer, err := start(dir, consumerBin, nil, "-addr", "127.0.0.1:"+strconv.Itoa(consumerPort), "-issuer", issuerURL)
		if err != nil {
			return err
		}
		defer consumer.stop()
		if err := waitHTTP(consumerURL + "/healthz"); err != nil {
			return err
		}
		err = productionRound(servers{
			issuerURL: issuerURL, bareURL: bareURL, basic: basic,
			issuerPid: issuerPid, barePid: barePid, redisPid: redisPid, redisPort: redisPort, usedEmpty: usedEmpty,
			consumerURL: consumerURL, consumerPid: consumer.cmd.Process.Pid,
		})
		if err != nil {
			return err
		}
	}
	fmt.Printf("\nissuer peak RSS (VmHWM): %s\n", peakRSS(issuer.cmd.Process.Pid))
	return nil
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
