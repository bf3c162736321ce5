package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"snowtoken/config"
	"snowtoken/internal/redistest"
	"snowtoken/redisconf"
	"snowtoken/token"
)

const composeFile = "docker-compose.yml"

// loadCompose loads docker-compose.yml as `docker compose` would, with an
// empty environment, so that nothing depends on the shell the test runs in;
// interpolate=false keeps ${...} as written.
func loadCompose(tb testing.TB, interpolate bool) *types.Project {
	tb.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("."),
		cli.WithInterpolation(interpolate),
	)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		tb.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

func service(tb testing.TB, p *types.Project, name string) types.ServiceConfig {
	tb.Helper()
	s, ok := p.Services[name]
	if !ok {
		tb.Fatalf("%s has no service %q", composeFile, name)
	}
	return s
}

// env returns a service's environment; a variable without a value is an error,
// since it would come from the operator's shell.
func env(tb testing.TB, s types.ServiceConfig) map[string]string {
	tb.Helper()
	out := make(map[string]string, len(s.Environment))
	for k, v := range s.Environment {
		if v == nil {
			tb.Errorf("service %s: %s has no value (it would be taken from the shell)", s.Name, k)
			continue
		}
		out[k] = *v
	}
	return out
}

func volume(tb testing.TB, s types.ServiceConfig, target string) types.ServiceVolumeConfig {
	tb.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v
		}
	}
	tb.Fatalf("service %s mounts nothing at %s", s.Name, target)
	return types.ServiceVolumeConfig{}
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t, true)
	if got, want := slices.Sorted(maps.Keys(p.Services)), []string{"consumer", "init", "issuer", "nginx", "redis"}; !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	if p.Name != "snowtoken" {
		t.Errorf("project name = %q, want snowtoken", p.Name)
	}
}

// TestComposeHasNoVariables: the file says everything itself; nothing in it
// comes from the environment or an .env file of whoever runs compose.
func TestComposeHasNoVariables(t *testing.T) {
	raw, err := loadCompose(t, false).MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\$\{?[A-Za-z_]`).Find(raw); m != nil {
		t.Errorf("%s uses a variable (%s): say the value instead", composeFile, m)
	}
}

func TestComposeRedis(t *testing.T) {
	r := service(t, loadCompose(t, true), "redis")
	if !strings.HasPrefix(r.Image, "redis:7") {
		t.Errorf("redis image %q, want redis:7", r.Image)
	}
	if !strings.Contains(strings.Join(r.Command, " "), "--appendonly yes") {
		t.Errorf("redis command %q, want --appendonly yes (sessions survive a restart)", r.Command)
	}
	// The settings the command gives, over Redis's defaults, are ones the
	// issuer's /readyz accepts (package redisconf), and memory is capped.
	cfg := map[string]string{"maxmemory-policy": "noeviction", "appendonly": "no", "appendfsync": "everysec", "save": "3600 1 300 100 60 10000"}
	for i := 1; i+1 < len(r.Command); i++ {
		if name, ok := strings.CutPrefix(r.Command[i], "--"); ok {
			cfg[name] = r.Command[i+1]
		}
	}
	for _, p := range redisconf.Evaluate(cfg) {
		t.Errorf("redis command %q: the issuer would not be ready: %s", r.Command, p)
	}
	if cfg["maxmemory"] == "" || cfg["maxmemory-policy"] != "noeviction" {
		t.Errorf("redis command %q: want --maxmemory and --maxmemory-policy noeviction: a full Redis refuses new sessions instead of evicting live ones", r.Command)
	}
	if v := volume(t, r, "/data"); v.Type != types.VolumeTypeVolume || v.ReadOnly {
		t.Errorf("redis /data is %s read_only=%v, want a named volume, writable", v.Type, v.ReadOnly)
	}
	hc := r.HealthCheck
	if hc == nil || hc.Disable || !strings.Contains(strings.Join(hc.Test, " "), "redis-cli ping") {
		t.Errorf("redis healthcheck %+v, want redis-cli ping", hc)
	}
}

func TestComposeInitAndIssuer(t *testing.T) {
	p := loadCompose(t, true)
	initSvc, issuer := service(t, p, "init"), service(t, p, "issuer")

	// init builds the image both run; the issuer never pulls it.
	if initSvc.Image == "" || initSvc.Image != issuer.Image {
		t.Errorf("init image %q, issuer image %q: want the same image", initSvc.Image, issuer.Image)
	}
	b := initSvc.Build
	if b == nil {
		t.Fatal("init has no build section")
	}
	root := repoRoot(t)
	if b.Context != root || b.Dockerfile != "docker/Dockerfile" || b.Target != issuerStage {
		t.Errorf("init build = context %s, dockerfile %s, target %s; want %s, docker/Dockerfile, %s", b.Context, b.Dockerfile, b.Target, root, issuerStage)
	}
	if initSvc.PullPolicy != types.PullPolicyBuild || issuer.PullPolicy != types.PullPolicyNever {
		t.Errorf("pull_policy init %q, issuer %q; want build and never (a local image name must not be pulled from a registry)", initSvc.PullPolicy, issuer.PullPolicy)
	}

	// init: a one-shot that writes the secrets volume.
	if initSvc.Restart != "no" {
		t.Errorf("init restart %q, want \"no\"", initSvc.Restart)
	}
	args := []string(initSvc.Command)
	if len(args) < 3 || args[0] != "init" || args[1] != "-dir" {
		t.Fatalf("init command %q, want [init -dir DIR]", args)
	}
	secretsDir := args[2]
	iv := volume(t, initSvc, secretsDir)
	if iv.Type != types.VolumeTypeVolume || iv.ReadOnly {
		t.Errorf("init mounts %s as %s read_only=%v, want the named volume, writable", secretsDir, iv.Type, iv.ReadOnly)
	}

	// The issuer reads the same volume, read-only.
	sv := volume(t, issuer, secretsDir)
	if sv.Source != iv.Source || !sv.ReadOnly {
		t.Errorf("issuer mounts %s from %q read_only=%v; want %q read-only", secretsDir, sv.Source, sv.ReadOnly, iv.Source)
	}
	e := env(t, issuer)
	for _, name := range []string{"SNOWTOKEN_SIGNING_KEYS", "SNOWTOKEN_CLIENTS_FILE"} {
		if dir := filepath.Dir(e[name]); dir != secretsDir {
			t.Errorf("%s=%s is not in %s, where init writes", name, e[name], secretsDir)
		}
	}

	if n := issuer.GetScale(); n != 3 {
		t.Errorf("issuer replicas = %d, want 3", n)
	}
	if len(issuer.Ports) != 0 {
		t.Errorf("issuer publishes %v: clients reach it only through nginx", issuer.Ports)
	}
	for _, tc := range []struct{ dep, cond string }{
		{"redis", types.ServiceConditionHealthy},
		{"init", types.ServiceConditionCompletedSuccessfully},
	} {
		if got := issuer.DependsOn[tc.dep].Condition; got != tc.cond {
			t.Errorf("issuer depends_on %s: condition %q, want %q", tc.dep, got, tc.cond)
		}
	}
	// The issuer's health check is the image's HEALTHCHECK; the Compose file
	// must not turn it off, since nginx and the consumer wait for it.
	if hc := issuer.HealthCheck; hc != nil && (hc.Disable || len(hc.Test) > 0 && hc.Test[0] == "NONE") {
		t.Errorf("issuer healthcheck disabled: %+v", hc)
	}
	stageNamed(t, loadDockerfile(t), issuerStage).one(t, "HEALTHCHECK")

	for _, s := range []types.ServiceConfig{initSvc, issuer} {
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("service %s: read_only=%v cap_drop=%v, want a read-only root and no capabilities", s.Name, s.ReadOnly, s.CapDrop)
		}
	}
}

// TestComposeNetworkGivesDistinctWorkerIDs: the issuers take their worker ID
// from the last octet of their address, which is distinct only within a /24.
func TestComposeNetworkGivesDistinctWorkerIDs(t *testing.T) {
	p := loadCompose(t, true)
	issuer := service(t, p, "issuer")
	if got := slices.Collect(maps.Keys(issuer.Networks)); len(got) != 1 {
		t.Fatalf("issuer networks %v, want exactly one (the worker ID comes from its one interface)", got)
	}
	var netName string
	for n := range issuer.Networks {
		netName = n
	}
	nw, ok := p.Networks[netName]
	if !ok {
		t.Fatalf("network %q not declared", netName)
	}
	if len(nw.Ipam.Config) != 1 {
		t.Fatalf("network %s has %d ipam pools, want one fixed subnet", netName, len(nw.Ipam.Config))
	}
	prefix, err := netip.ParsePrefix(nw.Ipam.Config[0].Subnet)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParsePrefix("172.28.0.0/24"); prefix != want {
		t.Errorf("subnet %v, want %v", prefix, want)
	}
	if prefix.Bits() < 24 || !prefix.Addr().Is4() {
		t.Errorf("subnet %v: wider than /24 lets two containers share a last octet, so a worker ID", prefix)
	}
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Bits.CheckWorker(255); err != nil {
		t.Errorf("the default layout cannot hold every last octet: %v", err)
	}
	for name, s := range p.Services {
		if name != "init" && len(s.Networks) == 0 {
			t.Errorf("service %s is on no network", name)
		}
	}
	if initSvc := service(t, p, "init"); initSvc.NetworkMode != "none" {
		t.Errorf("init network_mode %q, want none: it needs no network", initSvc.NetworkMode)
	}
}

// TestComposeIssuerEnvironment checks the issuer's variables against
// config.Vars, and runs config.Load on them.
func TestComposeIssuerEnvironment(t *testing.T) {
	p := loadCompose(t, true)
	e := env(t, service(t, p, "issuer"))

	known := map[string]bool{}
	for _, v := range config.Vars {
		known[v.Name] = true
	}
	for k := range e {
		if strings.HasPrefix(k, "SNOWTOKEN_") && !known[k] {
			t.Errorf("issuer sets %s, which config.Vars does not list (a typo is silently ignored)", k)
		}
	}
	for _, k := range []string{"SNOWTOKEN_ENV", "SNOWTOKEN_REDIS_URL", "SNOWTOKEN_SIGNING_KEYS", "SNOWTOKEN_CLIENTS_FILE", "SNOWTOKEN_ISSUER"} {
		if e[k] == "" {
			t.Errorf("issuer does not set %s", k)
		}
	}

	cfg, err := config.Load(func(k string) string { return e[k] })
	if err != nil {
		t.Fatalf("config.Load with the issuer's environment: %v", err)
	}
	if !cfg.Production {
		t.Error("the issuer does not run with SNOWTOKEN_ENV=production")
	}

	// Redis is the redis service.
	u, err := url.Parse(cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Services[u.Hostname()]; !ok || u.Port() != "6379" {
		t.Errorf("SNOWTOKEN_REDIS_URL %s: want the redis service on 6379", cfg.RedisURL)
	}
	// The issuer URL is where clients reach the gateway.
	nginx := service(t, p, "nginx")
	iss, err := url.Parse(cfg.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if len(nginx.Ports) != 1 || nginx.Ports[0].Published != iss.Port() || iss.Hostname() != "localhost" {
		t.Errorf("SNOWTOKEN_ISSUER %s but nginx publishes %+v", cfg.Issuer, nginx.Ports)
	}
}

// secretName matches variable names whose value would be a secret.
var secretName = regexp.MustCompile(`(?i)secret|password|passwd|token|private|credential|api_?key`)

// literalSecret reports why an environment value looks like a secret itself
// rather than a reference to one, or "".
func literalSecret(name, value string) string {
	if u, err := url.Parse(value); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return "a URL with a password"
		}
	}
	if strings.Contains(value, "PRIVATE KEY") {
		return "a PEM key"
	}
	if regexp.MustCompile(`^[A-Za-z0-9_\-+/=]{32,}$`).MatchString(value) && !strings.HasPrefix(value, "/") {
		return "a long random-looking string"
	}
	if secretName.MatchString(strings.TrimPrefix(name, "SNOWTOKEN_")) && !strings.HasPrefix(value, "/") {
		return "a secret's name with a value that is not a file path"
	}
	return ""
}

func TestLiteralSecret(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		secret      bool
	}{
		{"SNOWTOKEN_SIGNING_KEYS", "/secrets/signing-key.pem", false},
		{"SNOWTOKEN_REDIS_URL", "redis://redis:6379/0", false},
		{"SNOWTOKEN_ISSUER_URL", "http://issuer:8080", false},
		{"SNOWTOKEN_REDIS_URL", "redis://:hunter2@redis:6379/0", true},
		{"CLIENT_SECRET", "abc", true},
		{"DB_PASSWORD", "pw", true},
		{"X", "k3J9sd8f7GH2jk4l5m6n7b8v9c0x1z2a3s4d5f6g", true},
		{"X", "-----BEGIN PRIVATE KEY-----", true},
	} {
		if got := literalSecret(tc.name, tc.value) != ""; got != tc.secret {
			t.Errorf("literalSecret(%s=%s) = %v, want %v", tc.name, tc.value, got, tc.secret)
		}
	}
}

func TestComposeHasNoLiteralSecrets(t *testing.T) {
	p := loadCompose(t, true)
	for name, s := range p.Services {
		for k, v := range env(t, s) {
			if why := literalSecret(k, v); why != "" {
				t.Errorf("service %s: %s is %s; mount a file instead", name, k, why)
			}
		}
		if len(s.EnvFiles) > 0 {
			t.Errorf("service %s reads env_file %v: keep secrets in the secrets volume", name, s.EnvFiles)
		}
	}
}

func TestComposeConsumer(t *testing.T) {
	p := loadCompose(t, true)
	c := service(t, p, "consumer")
	if c.Build == nil || c.Build.Target != consumerStage || c.Build.Dockerfile != "docker/Dockerfile" {
		t.Errorf("consumer build %+v, want docker/Dockerfile target %s", c.Build, consumerStage)
	}
	e := env(t, c)
	u, err := url.Parse(e["SNOWTOKEN_ISSUER_URL"])
	if err != nil || u.Hostname() != "issuer" || u.Port() != "8080" {
		t.Errorf("consumer SNOWTOKEN_ISSUER_URL=%q, want http://issuer:8080", e["SNOWTOKEN_ISSUER_URL"])
	}
	if _, port, _ := net.SplitHostPort(e["CONSUMER_ADDR"]); port != "8081" {
		t.Errorf("consumer CONSUMER_ADDR=%q, want :8081 (the image EXPOSEs it and nginx proxies to it)", e["CONSUMER_ADDR"])
	}
	if len(c.Ports) != 0 {
		t.Errorf("consumer publishes %v: clients reach it only through nginx", c.Ports)
	}
}

func TestComposeNginx(t *testing.T) {
	p := loadCompose(t, true)
	n := service(t, p, "nginx")
	if !strings.HasPrefix(n.Image, "nginx:1.") {
		t.Errorf("nginx image %q, want a pinned nginx:1.x", n.Image)
	}
	if len(n.Ports) != 1 || n.Ports[0].Target != 8080 || n.Ports[0].Published != "8080" || n.Ports[0].HostIP != "127.0.0.1" {
		t.Errorf("nginx ports %+v, want 127.0.0.1:8080:8080", n.Ports)
	}
	v := volume(t, n, "/etc/nginx/conf.d/default.conf")
	if v.Type != types.VolumeTypeBind || !v.ReadOnly {
		t.Errorf("nginx config mounted as %s read_only=%v, want a read-only bind", v.Type, v.ReadOnly)
	}
	if want, _ := filepath.Abs(filepath.Join("nginx", "default.conf")); v.Source != want {
		t.Errorf("nginx config from %s, want %s", v.Source, want)
	}
	conf, err := os.ReadFile(v.Source)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*listen 8080;`).Match(conf) {
		t.Error("nginx/default.conf does not listen on 8080, the published port's target")
	}
	for _, up := range []string{"issuer:8080", "consumer:8081"} {
		if !strings.Contains(string(conf), "server "+up+";") {
			t.Errorf("nginx/default.conf has no upstream server %s", up)
		}
	}
	if got := n.DependsOn["issuer"].Condition; got != types.ServiceConditionHealthy {
		t.Errorf("nginx depends_on issuer %q, want service_healthy: nginx resolves the replicas once, at start", got)
	}
	if _, ok := n.DependsOn["consumer"]; !ok {
		t.Error("nginx does not depend on consumer: nginx fails to start when an upstream name does not resolve")
	}
}

// TestComposeIssuerStarts runs what the Compose stack runs, with the binary
// the Dockerfile builds: `init -dir` as the init service, then the issuer
// with the issuer service's environment. Only these differ from the stack:
// the secrets directory is a temporary one, Redis is a test server, the
// address is a free loopback port, and SNOWTOKEN_WORKER_IP stands in for the
// container's address on the Compose network. Then the image's HEALTHCHECK
// command must pass.
func TestComposeIssuerStarts(t *testing.T) {
	bin := builtBinaries(t)["snowtoken"]
	p := loadCompose(t, true)
	initSvc, issuer := service(t, p, "init"), service(t, p, "issuer")
	secretsDir := initSvc.Command[2]

	dir := filepath.Join(t.TempDir(), "secrets")
	initArgs := slices.Clone([]string(initSvc.Command))
	initArgs[2] = dir
	out, err := exec.Command(bin, initArgs...).CombinedOutput()
	if err != nil {
		t.Fatalf("snowtoken %q: %v\n%s", initArgs, err, out)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "demo.secret"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), strings.TrimSpace(string(secret))) {
		t.Errorf("init printed the secret:\n%s", out)
	}
	// The second start of the stack runs init again: a no-op.
	if out, err := exec.Command(bin, initArgs...).CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing to do") {
		t.Errorf("second init: %v\n%s", err, out)
	}

	e := env(t, issuer)
	for k, v := range e {
		if rest, ok := strings.CutPrefix(v, secretsDir+"/"); ok {
			e[k] = filepath.Join(dir, rest)
		}
	}
	ks, err := token.LoadKeySet(e["SNOWTOKEN_SIGNING_KEYS"])
	if err != nil {
		t.Fatalf("the key init wrote: %v", err)
	}
	clients, err := token.LoadClients(e["SNOWTOKEN_CLIENTS_FILE"])
	if err != nil {
		t.Fatalf("the clients file init wrote: %v", err)
	}
	if _, err := clients.Authenticate("demo", strings.TrimSpace(string(secret))); err != nil {
		t.Errorf("demo.secret does not authenticate client demo: %v", err)
	}

	redisSrv := redistest.NewServer(t)
	e["SNOWTOKEN_REDIS_URL"] = redisSrv.URL()
	e["SNOWTOKEN_ADDR"] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	e["SNOWTOKEN_METRICS_ADDR"] = "127.0.0.1:0"
	e["SNOWTOKEN_WORKER_IP"] = "172.28.0.7"
	environ := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range e {
		environ = append(environ, k+"="+v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin)
	serve.Env = environ
	serve.Cancel = func() error { return serve.Process.Signal(os.Interrupt) }
	serve.WaitDelay = 20 * time.Second
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stdout = stdoutW
	var stderr strings.Builder
	serve.Stderr = &stderr
	err = serve.Start()
	stdoutW.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Every JSON log line, until the issuer exits; lines nobody waits for are dropped.
	logs := make(chan map[string]any, 64)
	go func() {
		defer close(logs)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case logs <- m:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		if err := serve.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("issuer did not stop cleanly on SIGINT: %v\n%s", err, stderr.String())
		}
		stdout.Close() // only now: the issuer would die of SIGPIPE writing to a closed pipe
	})

	// It says it listens, as worker 7 with the key init wrote, in production.
	var listening map[string]any
	timeout := time.After(15 * time.Second)
	for listening == nil {
		select {
		case m, ok := <-logs:
			if !ok {
				t.Fatalf("issuer exited before listening\n%s", stderr.String())
			}
			if m["msg"] == "listening" {
				listening = m
			}
		case <-timeout:
			t.Fatalf("issuer did not log \"listening\" in 15s\n%s", stderr.String())
		}
	}
	for k, want := range map[string]any{"worker_id": float64(7), "production": true, "kid": ks.SigningKeyID(), "issuer": e["SNOWTOKEN_ISSUER"]} {
		if listening[k] != want {
			t.Errorf("listening log %s = %v, want %v", k, listening[k], want)
		}
	}

	// The image's HEALTHCHECK, run with the container's environment.
	hc := stageNamed(t, loadDockerfile(t), issuerStage).one(t, "HEALTHCHECK")
	_, cmdJSON, _ := strings.Cut(hc.Args, "CMD ")
	argv := execForm(t, hc, cmdJSON)
	if argv[0] != "/snowtoken" {
		t.Fatalf("HEALTHCHECK runs %s, not the issuer binary", argv[0])
	}
	check := exec.Command(bin, argv[1:]...)
	check.Env = environ
	// A first start on an empty Redis is not ready for one worker-lease TTL
	// (10 s by default: package lease, Lost state); then the check passes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := check.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HEALTHCHECK %q failed: %v\n%s", argv, err, out)
		}
		time.Sleep(100 * time.Millisecond)
		check = exec.Command(bin, argv[1:]...)
		check.Env = environ
	}

	// And it fails while Redis is down, so Docker marks the replica unhealthy.
	redisSrv.Stop()
	check = exec.Command(bin, argv[1:]...)
	check.Env = environ
	if out, err := check.CombinedOutput(); err == nil {
		t.Errorf("HEALTHCHECK passed with Redis down:\n%s", out)
	}
}

func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
