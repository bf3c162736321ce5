package docker

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/credentials"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/internal/promtest"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// envRequireDocker asks for the stack test, which builds images and runs
// containers for many minutes: without it (set to 1) the test skips, naming
// what it would need; with it, whatever is missing fails the test by name.
// CI sets it.
const envRequireDocker = "SNOWTOKEN_TEST_REQUIRE_DOCKER"

// stackNeeds is what the stack test needs on this host, as its skip names it.
const stackNeeds = "a Docker engine, Compose (docker compose or docker-compose) and what standin/build.sh builds " +
	"the base images from: go, busybox, redis-server, redis-cli, nginx, setpriv, prometheus"

// envCompose names the Compose the stack test runs: "docker compose" (v2,
// the CLI plugin) or "docker-compose" (Debian's 1.29, which CI has). Unset,
// the test takes v2 where it is installed and 1.29 otherwise; set, it takes
// that one alone, so that a machine with both can test 1.29.
const envCompose = "SNOWTOKEN_TEST_COMPOSE"

// stackProject is the Compose project name the stack test runs under: not the
// file's own ("snowtoken"), so that its `down -v` never removes the volumes
// (signing key, clients) of a stack someone runs on the same engine.
const stackProject = "snowtoken-stacktest"

// stackGateway is where docker-compose.yml publishes nginx.
const stackGateway = "http://127.0.0.1:8080"

// requireDocker returns the Compose command to run (see envCompose). Unless
// envRequireDocker is 1 it skips, saying what the test would need: a Docker
// engine and a Compose alone are not enough (standin/build.sh wants more),
// and the build takes minutes, too long for a newcomer's go test ./... .
// Asked for, it fails naming everything missing: no engine answering, no
// Compose, a tool standin/build.sh -check does not find.
func requireDocker(t *testing.T) []string {
	t.Helper()
	if os.Getenv(envRequireDocker) != "1" {
		t.Skipf("builds images and runs the Compose stack for minutes; set %s=1 to run it (needs %s)", envRequireDocker, stackNeeds)
	}
	candidates := [][]string{{"docker", "compose"}, {"docker-compose"}}
	switch want := os.Getenv(envCompose); want {
	case "":
	case "docker compose", "docker-compose":
		candidates = [][]string{strings.Fields(want)}
	default:
		t.Fatalf("%s=%q: want \"docker compose\" or \"docker-compose\"", envCompose, want)
	}
	var whys, composeWhys []string
	if why := tryCommand(t.Context(), "docker", "info"); why != "" {
		whys = append(whys, why)
	}
	var compose []string
	for _, c := range candidates {
		why := tryCommand(t.Context(), slices.Concat(c, []string{"version"})...)
		if why == "" {
			compose = c
			break
		}
		composeWhys = append(composeWhys, why)
	}
	if compose == nil {
		whys = append(whys, composeWhys...)
	}
	if why := tryCommand(t.Context(), "bash", filepath.Join("standin", "build.sh"), "-check"); why != "" {
		whys = append(whys, why)
	}
	if len(whys) > 0 {
		t.Fatalf("%s=1, but %s", envRequireDocker, strings.Join(whys, "; "))
	}
	return compose
}

// tryCommand runs argv and returns why it failed, or "".
func tryCommand(ctx context.Context, argv ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(lastLines(string(out), 3)))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stack runs Compose (the command in composeCmd, see envCompose) on
// docker-compose.yml as project stackProject.
type stack struct {
	t          *testing.T
	composeCmd []string
	env        []string
	since      time.Time // of the last cutFromRedis
}

// run runs argv within timeout and returns its standard output; a failure
// ends the test with its output.
func (s *stack) run(ctx context.Context, timeout time.Duration, argv ...string) string {
	s.t.Helper()
	out, err := s.try(ctx, timeout, argv...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) try(ctx context.Context, timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = s.env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	s.t.Logf("%s: %v", strings.Join(argv, " "), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		return stdout.String(), fmt.Errorf("%s: %v\n%s%s", strings.Join(argv, " "), err, lastLines(stdout.String(), 20), lastLines(stderr.String(), 40))
	}
	return stdout.String(), nil
}

// composeArgv is the command line of Compose's ARGS on the stack.
func (s *stack) composeArgv(args ...string) []string {
	return slices.Concat(s.composeCmd, []string{"-p", stackProject, "-f", composeFile}, args)
}

func (s *stack) compose(ctx context.Context, timeout time.Duration, args ...string) string {
	s.t.Helper()
	return s.run(ctx, timeout, s.composeArgv(args...)...)
}

// running returns the IDs of the service's running containers (docker ps:
// docker-compose 1.29's ps lists stopped ones too).
func (s *stack) running(ctx context.Context, service string) []string {
	s.t.Helper()
	return strings.Fields(s.run(ctx, time.Minute, "docker", "ps", "-q",
		"--filter", "label=com.docker.compose.project="+stackProject,
		"--filter", "label=com.docker.compose.service="+service))
}

// issuers returns the running issuer replicas: container ID to its address
// on the backend network.
func (s *stack) issuers(ctx context.Context) map[string]netip.Addr {
	s.t.Helper()
	ids := s.running(ctx, "issuer")
	out := make(map[string]netip.Addr, len(ids))
	for _, id := range ids {
		ip := strings.TrimSpace(s.run(ctx, time.Minute, "docker", "inspect", "-f",
			fmt.Sprintf(`{{(index .NetworkSettings.Networks "%s_backend").IPAddress}}`, stackProject), id))
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			s.t.Fatalf("issuer %s: backend address %q: %v", id, ip, err)
		}
		out[id] = addr
	}
	return out
}

// TestStack brings docker-compose.yml up for real, with the images built here
// from docker/Dockerfile (and stand-ins for the base images, see
// docker/standin/build.sh, where nothing can be pulled): a token issued
// through nginx with the secret init wrote is accepted by the consumer, and a
// DPoP-bound one by consumer-dpop (checkDPoPConsumer); the consumer calls
// billing with the Txn-Token nginx minted (checkCallChain); the
// three issuer replicas have distinct worker IDs, their addresses' last
// octets; with one replica cut off from Redis, its readiness fails and no
// request through nginx fails; and with that replica killed, the others go on
// issuing tokens the consumer accepts. It runs only when asked for
// (SNOWTOKEN_TEST_REQUIRE_DOCKER=1, see requireDocker).
func TestStack(t *testing.T) {
	composeCmd := requireDocker(t)
	// The build's 20 minutes, and 5 for the rest.
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()

	out, err := exec.CommandContext(ctx, "bash", filepath.Join("standin", "build.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("standin/build.sh: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Logf("standin/build.sh:\n%s", out)
	}
	for addr, what := range map[string]string{"127.0.0.1:8080": "nginx", "127.0.0.1:9090": "prometheus"} {
		if ln, err := net.Listen("tcp", addr); err != nil {
			t.Fatalf("%s, where the stack publishes %s, is taken: %v", addr, what, err)
		} else {
			ln.Close()
		}
	}

	// v2 without buildx builds with a BuildKit client of its own under
	// DOCKER_BUILDKIT=1. docker-compose 1.29 runs `docker build`, which under
	// DOCKER_BUILDKIT=1 wants buildx: with 0 it is the legacy builder, which
	// the Dockerfile allows for (TestDockerfileBuildsWithoutBuildKit).
	buildkit := "DOCKER_BUILDKIT=1"
	if composeCmd[0] == "docker-compose" {
		buildkit = "DOCKER_BUILDKIT=0"
	}
	t.Logf("Compose: %s", strings.Join(composeCmd, " "))
	s := &stack{t: t, composeCmd: composeCmd, env: append(os.Environ(), buildkit)}
	// Leftovers of an earlier run that was killed.
	s.compose(ctx, 2*time.Minute, "down", "-v", "--remove-orphans")
	t.Cleanup(func() {
		// t.Context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			if logs, err := s.try(ctx, time.Minute, s.composeArgv("logs", "--no-color", "--tail", "30")...); err == nil {
				t.Logf("the stack's logs:\n%s", logs)
			}
		}
		if _, err := s.try(ctx, 2*time.Minute, s.composeArgv("down", "-v", "--remove-orphans")...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// A cold build compiles the issuer and the consumer from nothing on
	// the stand-in golang image (no cache mounts with the legacy builder):
	// about 6 minutes on 2 idle cores, and once 15 with the cores shared
	// by go test -race of the other packages and a load run. The limit
	// catches a build that hangs, not a slow one.
	s.compose(ctx, 20*time.Minute, "build")
	// up returns once every container has started, after the ones its
	// depends_on conditions wait for: init done, Redis and the issuers healthy.
	s.compose(ctx, 5*time.Minute, "up", "-d")

	// The limits and the read-only roots are in force: docker-compose 1.29
	// applies deploy.resources.limits without --compatibility.
	s.checkContainers(ctx)
	// Each issuer read its container's limit from the cgroup: its soft
	// memory limit is under the OOM killer's (memory.go's tuneGC).
	s.checkIssuerMemoryLimit(ctx)
	// The profile observability's Prometheus, started by name once the
	// stack runs: `up` with the profile would also start grafana, which has
	// no stand-in here (no binary; no registry to pull it from).
	s.compose(ctx, 2*time.Minute, "--profile", observabilityProfile, "up", "-d", "--no-deps", "prometheus")

	// docker cp, since docker-compose 1.29 has no cp.
	dir := t.TempDir()
	issuer := s.running(ctx, "issuer")
	if len(issuer) == 0 {
		t.Fatal("no issuer container")
	}
	s.run(ctx, time.Minute, "docker", "cp", issuer[0]+":/secrets/demo.secret", dir)
	secret, err := os.ReadFile(filepath.Join(dir, "demo.secret"))
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, secret: strings.TrimSpace(string(secret)), http: &http.Client{Timeout: 15 * time.Second}}
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}

	// nginx answers once it has started, /orders once billing, which the
	// consumer calls, does: wait for the first token it accepts.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tok, err := g.tryIssue(ctx)
		if err == nil {
			err = g.tryValidate(ctx, tok)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no token through nginx accepted at /orders in 2 minutes: %v", err)
		}
		time.Sleep(time.Second)
	}

	t.Run("DPoP consumer", func(t *testing.T) { checkDPoPConsumer(t, g.secret) })
	t.Run("a client with no secret", func(t *testing.T) { s.checkSecretlessClient(ctx, t) })
	t.Run("a consumer that follows the revocation feed", func(t *testing.T) { s.checkFollowConsumer(ctx, t, g) })
	t.Run("a call chain with a Transaction Token", func(t *testing.T) { checkCallChain(ctx, t, g) })

	// Three replicas, three worker IDs: each its backend address's last octet.
	replicas := s.issuers(ctx)
	if len(replicas) != 3 {
		t.Fatalf("%d issuer replicas running, want 3", len(replicas))
	}
	want := map[int64]string{}
	for id, addr := range replicas {
		want[int64(addr.As4()[3])] = id
	}
	if len(want) != 3 {
		t.Fatalf("issuer addresses %v share a last octet", replicas)
	}
	// nginx spreads requests over the replicas: 30 tokens reach each of them.
	workers := g.issueMany(ctx, 30, cfg)
	if got := slices.Sorted(maps.Keys(workers)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("tokens came from workers %v, want each of %v (the replicas' last octets)", got, slices.Sorted(maps.Keys(want)))
	}
	t.Logf("worker IDs %v, tokens per worker %v", slices.Sorted(maps.Keys(want)), workers)
	t.Run("prometheus", func(t *testing.T) { checkStackPrometheus(ctx, t, len(replicas)) })

	// Cut one replica off from Redis: it refuses to issue or validate (503),
	// and its readiness fails; nginx still routes requests to it (it is in
	// "issuer"'s DNS answer) and retries each it refuses on another replica,
	// so none fails through nginx.
	killed := slices.Sorted(maps.Keys(want))[0]
	s.cutFromRedis(ctx, want[killed])
	failed, cutWorkers := 0, map[int64]int{}
	const cutRequests = 60
	for range cutRequests {
		tok, err := g.tryIssue(ctx)
		if err == nil {
			err = g.tryValidate(ctx, tok)
		}
		if err != nil {
			if failed++; failed <= 3 {
				t.Logf("with worker %d's replica cut off from Redis: %v", killed, err)
			}
			continue
		}
		cutWorkers[tok.JTI.Worker(cfg.Bits)]++
	}
	refused := s.logCount(ctx, want[killed], `"msg":"unavailable"`)
	t.Logf("with worker %d's replica cut off from Redis: %d of %d token requests (each then validated through nginx) failed; tokens per worker %v; the cut-off replica logged %d refusals",
		killed, failed, cutRequests, cutWorkers, refused)
	if failed > 0 {
		t.Errorf("%d of %d requests through nginx failed with one replica of three cut off from Redis, want none: nginx retries a 503 on another replica", failed, cutRequests)
	}
	if _, ok := cutWorkers[killed]; ok || len(cutWorkers) != 2 {
		t.Errorf("with worker %d's replica cut off from Redis, tokens came from workers %v, want each of the two others", killed, slices.Sorted(maps.Keys(cutWorkers)))
	}
	if refused == 0 {
		t.Errorf("worker %d's replica, cut off from Redis, logged no refusal: nginx never sent it a request, and this proved nothing", killed)
	}
	t.Run("prometheus sees the cut", func(t *testing.T) {
		instance := net.JoinHostPort(replicas[want[killed]].String(), "9090")
		expr := stackRules(t).Alert("SnowtokenRedisUnreachable")
		stackPrometheus.WaitFor(t, "holding SnowtokenRedisUnreachable's expression for "+instance, 2*time.Minute, func() bool {
			res, err := stackPrometheus.Query(expr)
			return err == nil && slices.ContainsFunc(res, func(r promtest.Sample) bool { return r.Metric["instance"] == instance })
		})
	})

	// Kill that replica: the others go on issuing, and the consumer accepts.
	s.run(ctx, time.Minute, "docker", "kill", want[killed])
	delete(want, killed)
	// nginx may still try the dead address until its DNS answer is 5 s old
	// (valid=5s); it then retries another replica, so no request fails.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		g.issueMany(ctx, 1, cfg)
	}
	later := g.issueMany(ctx, 20, cfg)
	if got := slices.Sorted(maps.Keys(later)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("after worker %d's replica was killed, tokens came from workers %v, want each of %v", killed, got, slices.Sorted(maps.Keys(want)))
	}
	if running := s.issuers(ctx); len(running) != 2 {
		t.Errorf("%d issuer replicas running after the kill, want 2 (restart: unless-stopped does not restart a killed container)", len(running))
	}
}

// stackPrometheus is the profile observability's Prometheus, where the
// Compose file publishes it.
var stackPrometheus = promtest.Server{URL: "http://127.0.0.1:9090"}

// stackRules reads the rules file the stack's Prometheus loads.
func stackRules(tb testing.TB) promtest.RuleGroups {
	tb.Helper()
	rules, err := promtest.ReadRules(filepath.Join("..", "deploy", "prometheus", "snowtoken-rules.yml"))
	if err != nil {
		tb.Fatal(err)
	}
	return rules
}

// checkStackPrometheus: the stack's Prometheus finds the issuer replicas
// through Docker's DNS and scrapes each, loads the rules, and every rule and
// every dashboard query runs there without error, naming only metrics the
// issuers export (the names it scraped). Not every panel has data here (no
// client's secret expires, nothing was revoked): e2e's
// TestPrometheusScrapesIssuer asks for that.
func checkStackPrometheus(ctx context.Context, t *testing.T, replicas int) {
	ps := stackPrometheus
	ps.WaitFor(t, "scraping every issuer replica", 2*time.Minute, func() bool {
		res, err := ps.Query(`up{job="snowtoken"} == 1`)
		return err == nil && len(res) == replicas
	})
	ps.WaitFor(t, "evaluating the recording rules", 2*time.Minute, func() bool {
		res, err := ps.Query(`count(snowtoken:issue_errors:ratio_rate5m)`)
		return err == nil && len(res) == 1
	})
	names, err := ps.LabelValues(`{job="snowtoken"}`, "__name__")
	if err != nil || len(names) == 0 {
		t.Fatalf("the metric names scraped: %v (%v)", names, err)
	}
	// Series the stack has no cause for: init writes a plain key file
	// (no manifest times) and clients whose secrets do not expire. e2e's
	// TestMetricsReference sees them on a replica that has them.
	absentHere := []string{"snowtoken_signing_key_activated_timestamp_seconds",
		"snowtoken_signing_key_next_signs_from_timestamp_seconds", "snowtoken_client_secret_expiry_timestamp_seconds"}
	// Which alerts hold is logged, not judged: the latency SLOs' can on a
	// test machine as busy as CI's.
	promtest.CheckQueries(t, ps, stackRules(t), filepath.Join("..", "deploy", "grafana", "dashboards"), "snowtoken", "",
		func(name string) bool { return slices.Contains(names, name) || slices.Contains(absentHere, name) }, false)
}

// checkDPoPConsumer gets a DPoP-bound token through the stack's gateway,
// its proofs made by a dpop.Prover for the stack's public URL
// (gatewayPublic, http://localhost:8080: the issuers' SNOWTOKEN_ISSUER,
// consumer-dpop's CONSUMER_PUBLIC_URL but /dpop) while the requests go to
// stackGateway, where nginx is published; consumer-dpop accepts it at
// /dpop/orders with a dpop.Transport's proof, and refuses it as Bearer.
func checkDPoPConsumer(t *testing.T, secret string) {
	base := publicClient(strings.TrimPrefix(stackGateway, "http://"))
	t.Cleanup(base.CloseIdleConnections)
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &dpop.Transport{Base: base, Prover: prover}}
	tok := dpopToken(t, client, secret)
	resp, body := callGateway(t, client, gatewayPublic, "GET", "/dpop/orders", http.Header{"Authorization": {"DPoP " + tok}}, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"subject":"demo"`) {
		t.Errorf("GET /dpop/orders with the bound token and a proof: %s %s, want consumer-dpop's 200", resp.Status, body)
	}
	plain := &http.Client{Timeout: 15 * time.Second, Transport: base}
	resp, body = callGateway(t, plain, gatewayPublic, "GET", "/dpop/orders", http.Header{"Authorization": {"Bearer " + tok}}, "")
	wantDPoPChallenge(t, resp, body, "invalid_token")
}

// checkSecretlessClient adds a private_key_jwt client to the stack's
// clients file as an operator does (snowtoken client new -jwks-file, run in
// the init service, which writes the secrets volume), with only the public
// half of a key this test holds; once the issuers reload the file, it gets
// DPoP-bound tokens through the gateway with client assertions of that key
// (client/credentials), no secret anywhere, and consumer-dpop accepts them.
func (s *stack) checkSecretlessClient(ctx context.Context, t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // the container's user reads it
		t.Fatal(err)
	}
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"batch-1","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), []byte(jwks), 0o644); err != nil {
		t.Fatal(err)
	}
	s.compose(ctx, 2*time.Minute, "run", "--rm", "-T", "--no-deps", "-v", dir+":/in:ro", "init",
		"client", "new", "-file", "/secrets/clients.json", "-id", "batch", "-scopes", "orders:read", "-jwks-file", "/in/jwks.json")

	assertion, err := credentials.KeyAssertion("batch", gatewayPublic, priv, "batch-1")
	if err != nil {
		t.Fatal(err)
	}
	base := publicClient(strings.TrimPrefix(stackGateway, "http://"))
	t.Cleanup(base.CloseIdleConnections)
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	proofs := &dpop.Transport{Base: base, Prover: prover}
	src, err := credentials.New(credentials.Options{TokenURL: gatewayPublic + "/token", ClientID: "batch", Assertion: assertion,
		HTTPClient: &http.Client{Timeout: 15 * time.Second, Transport: proofs}})
	if err != nil {
		t.Fatal(err)
	}
	// Every replica reloads the file within moments; until then a token
	// request may reach one that does not know the client yet.
	deadline := time.Now().Add(time.Minute)
	var tok credentials.Token
	for {
		if tok, err = src.Token(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no token for the private_key_jwt client in a minute: %v", err)
		}
		time.Sleep(time.Second)
	}
	if tok.Type != "DPoP" {
		t.Errorf("token_type %q, want DPoP", tok.Type)
	}
	api := &http.Client{Timeout: 15 * time.Second, Transport: &credentials.Transport{Source: src, Base: proofs}}
	resp, body := callGateway(t, api, gatewayPublic, "GET", "/dpop/orders", nil, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"subject":"batch"`) {
		t.Errorf("GET /dpop/orders as the client with no secret: %s %s, want consumer-dpop's 200 for subject batch", resp.Status, body)
	}
}

// cutFromRedis disconnects the issuer container id from the data network,
// its only way to Redis, and waits until its readiness check (the image's
// HEALTHCHECK command, which asks /readyz as Kubernetes' readinessProbe does)
// fails.
func (s *stack) cutFromRedis(ctx context.Context, id string) {
	s.t.Helper()
	s.since = time.Now()
	s.run(ctx, time.Minute, "docker", "network", "disconnect", stackProject+"_data", id)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := s.try(ctx, 30*time.Second, "docker", "exec", id, "/snowtoken", "healthcheck"); err != nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("issuer %s, cut off from Redis, still passes its readiness check after a minute", id)
		}
		time.Sleep(time.Second)
	}
}

// logCount counts the lines container id logged since the last cutFromRedis
// that hold substr.
func (s *stack) logCount(ctx context.Context, id, substr string) int {
	s.t.Helper()
	out, err := s.try(ctx, time.Minute, "docker", "logs", "--since", s.since.Format(time.RFC3339Nano), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Count(out, substr)
}

// checkContainers checks every container of the stack, init's included,
// against its service in docker-compose.yml: its CPU and memory limits and
// its read-only root.
func (s *stack) checkContainers(ctx context.Context) {
	s.t.Helper()
	p := loadCompose(s.t, true)
	ids := strings.Fields(s.run(ctx, time.Minute, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+stackProject))
	out := s.run(ctx, time.Minute, append([]string{"docker", "inspect", "-f",
		`{{index .Config.Labels "com.docker.compose.service"}} {{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.ReadonlyRootfs}}`}, ids...)...)
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		var (
			name      string
			cpus, mem int64
			readOnly  bool
		)
		if _, err := fmt.Sscan(line, &name, &cpus, &mem, &readOnly); err != nil {
			s.t.Fatalf("docker inspect: %q: %v", line, err)
		}
		seen[name] = true
		svc := service(s.t, p, name)
		if svc.Deploy == nil || svc.Deploy.Resources.Limits == nil {
			s.t.Fatalf("service %s has no limits (TestComposeLimitsAndHealthchecks)", name)
		}
		limits := svc.Deploy.Resources.Limits
		wantCPUs := int64(math.Round(float64(limits.NanoCPUs.Value()) * 1e9))
		if cpus != wantCPUs || mem != int64(limits.MemoryBytes) || readOnly != svc.ReadOnly {
			s.t.Errorf("a %s container: %d nano-CPUs, %d bytes of memory, read-only root %v; want %d, %d, %v",
				name, cpus, mem, readOnly, wantCPUs, int64(limits.MemoryBytes), svc.ReadOnly)
		}
	}
	if got, want := slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		s.t.Errorf("the stack's containers are of services %v, want %v", got, want)
	}
}

// checkIssuerMemoryLimit reads each issuer's "listening" log line: the
// soft memory limit it set is 90% of its container's, read from the cgroup
// inside the real container, not the 256 MiB it takes outside one, which
// equals Compose's limit and would let a full cache reach the OOM killer.
func (s *stack) checkIssuerMemoryLimit(ctx context.Context) {
	s.t.Helper()
	limit := service(s.t, loadCompose(s.t, true), "issuer").Deploy.Resources.Limits.MemoryBytes
	want := int64(float64(limit) * 0.9)
	for _, id := range s.running(ctx, "issuer") {
		var line struct {
			Msg   string `json:"msg"`
			Bytes int64  `json:"memory_limit_bytes"`
			From  string `json:"memory_limit_from"`
		}
		for l := range strings.Lines(s.run(ctx, time.Minute, "docker", "logs", id)) {
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "listening" {
				break
			}
			line.Msg = ""
		}
		if line.Msg == "" {
			s.t.Errorf("issuer %s logged no listening line", id)
			continue
		}
		if line.From != "container" || line.Bytes != want {
			s.t.Errorf("issuer %s: soft memory limit %d bytes from %q; want %d (90%% of the container's %d) from \"container\"",
				id, line.Bytes, line.From, want, int64(limit))
		}
	}
}

// gateway is the stack's nginx, as a client sees it.
type gateway struct {
	t      *testing.T
	secret string
	http   *http.Client
}

type issued struct {
	AccessToken string          `json:"access_token"`
	JTI         snowflakealg.ID `json:"jti"`
}

// tryIssue asks nginx for a token for the demo client (client credentials,
// scope orders:read).
func (g *gateway) tryIssue(ctx context.Context) (issued, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, stackGateway+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		return issued{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("demo", g.secret)
	resp, err := g.http.Do(req)
	if err != nil {
		return issued{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return issued{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return issued{}, fmt.Errorf("POST /token: %s: %s", resp.Status, body)
	}
	var tok issued
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return issued{}, fmt.Errorf("POST /token: %s: no token (%v)", body, err)
	}
	return tok, nil
}

// tryValidate calls the consumer through nginx with the token: nginx has the
// issuer validate it (auth_request), the consumer answers with its orders.
func (g *gateway) tryValidate(ctx context.Context, tok issued) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, stackGateway+"/orders", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET /orders: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Orders []json.RawMessage `json:"orders"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &body) != nil || len(body.Orders) == 0 {
		return fmt.Errorf("GET /orders with token %d: %s: %s", tok.JTI, resp.Status, raw)
	}
	return nil
}

// mustValidate is tryValidate, ending the test on an error.
func (g *gateway) mustValidate(ctx context.Context, tok issued) {
	g.t.Helper()
	if err := g.tryValidate(ctx, tok); err != nil {
		g.t.Fatal(err)
	}
}

// issueMany issues n tokens through nginx, has the consumer accept each, and
// counts them by the worker ID in their token ID.
func (g *gateway) issueMany(ctx context.Context, n int, cfg config.Config) map[int64]int {
	g.t.Helper()
	workers := map[int64]int{}
	for range n {
		tok, err := g.tryIssue(ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		g.mustValidate(ctx, tok)
		workers[tok.JTI.Worker(cfg.Bits)]++
	}
	return workers
}
