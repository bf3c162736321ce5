package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/goccy/go-yaml"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/internal/redisconf"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

const composeFile = "docker-compose.yml"

// loadCompose loads docker-compose.yml as `docker compose` would, with
// docker/.env but an otherwise empty environment, so that nothing depends on
// the shell the test runs in; interpolate=false keeps ${...} as written.
// The services of profiles (--profile) are loaded too.
func loadCompose(tb testing.TB, interpolate bool, profiles ...string) *types.Project {
	tb.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("."),
		cli.WithEnvFiles(),
		cli.WithDotEnv,
		cli.WithInterpolation(interpolate),
		cli.WithProfiles(profiles),
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
	if got, want := slices.Sorted(maps.Keys(p.Services)), []string{"billing", "consumer", "consumer-dpop", "consumer-follow", "init", "issuer", "nginx", "redis"}; !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	if p.Name != "snowtoken" {
		t.Errorf("project name = %q, want snowtoken", p.Name)
	}
}

// TestComposeProjectNameInDotEnv: the project's name is in docker/.env, the
// one way both `docker compose` and docker-compose 1.29 take it from the
// file's directory, and the file has no top-level key 1.29's schema rejects
// (such as "name:"), so CI's docker-compose 1.29 and users' `docker compose`
// run the same stack under the same name. The .env file holds nothing else.
func TestComposeProjectNameInDotEnv(t *testing.T) {
	vars, err := dotenv.Read(".env")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"COMPOSE_PROJECT_NAME": "snowtoken"}; !maps.Equal(vars, want) {
		t.Errorf(".env = %v, want %v", vars, want)
	}

	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	// docker-compose 1.29's compose_spec.json: these and x-* extensions.
	known := []string{"version", "services", "networks", "volumes", "secrets", "configs"}
	for key := range top {
		if !slices.Contains(known, key) && !strings.HasPrefix(key, "x-") {
			t.Errorf("%s has the top-level key %q, which docker-compose 1.29 rejects", composeFile, key)
		}
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

// redisScript returns the redis service's shell script (command: [sh, -c,
// SCRIPT]), the redis-server arguments in it and the file its heredoc reads
// the password from. The script's shape:
//
//	exec docker-entrypoint.sh redis-server - ARGS... <<EOF
//	requirepass $(cat FILE)
//	EOF
func redisScript(tb testing.TB, r types.ServiceConfig) (script string, args []string, passwordFile string) {
	tb.Helper()
	if len(r.Command) != 3 || r.Command[0] != "sh" || r.Command[1] != "-c" {
		tb.Fatalf("redis command %q, want [sh -c SCRIPT]", r.Command)
	}
	script = r.Command[2]
	line, heredoc, ok := strings.Cut(strings.ReplaceAll(script, "\\\n", " "), " <<EOF\n")
	if !ok {
		tb.Fatalf("redis script %q: want a command line ending in <<EOF", script)
	}
	words, err := shellFields(line)
	if err != nil {
		tb.Fatalf("redis script: %v", err)
	}
	if want := []string{"exec", "docker-entrypoint.sh", "redis-server", "-"}; len(words) < len(want) || !slices.Equal(words[:len(want)], want) {
		tb.Fatalf("redis script runs %q, want %q ARGS...: the image's entrypoint drops root, redis-server reads the password from stdin", words, want)
	}
	m := regexp.MustCompile(`^requirepass \$\(cat (/\S+)\)\nEOF\n$`).FindStringSubmatch(heredoc)
	if m == nil {
		tb.Fatalf("redis script heredoc %q, want requirepass $(cat FILE) and EOF", heredoc)
	}
	return script, words[4:], m[1]
}

// initCommand is the init service's command, [init -dir DIR
// -redis-password-file FILE -feed-client-id ID -feed-secret-file FILE
// -service-client-id ID -service-scopes SCOPES -service-secret-file FILE];
// the values are at initDir, initPasswordFile, initFeedID, ...
func initCommand(tb testing.TB, initSvc types.ServiceConfig) []string {
	tb.Helper()
	args := []string(initSvc.Command)
	if len(args) != 15 || args[0] != "init" || args[1] != "-dir" || args[3] != "-redis-password-file" ||
		args[5] != "-feed-client-id" || args[7] != "-feed-secret-file" ||
		args[9] != "-service-client-id" || args[11] != "-service-scopes" || args[13] != "-service-secret-file" {
		tb.Fatalf("init command %q, want [init -dir DIR -redis-password-file FILE -feed-client-id ID -feed-secret-file FILE "+
			"-service-client-id ID -service-scopes SCOPES -service-secret-file FILE]", args)
	}
	return args
}

// Where initCommand's values are.
const (
	initDir               = 2
	initPasswordFile      = 4
	initFeedID            = 6
	initFeedSecretFile    = 8
	initServiceID         = 10
	initServiceScopes     = 12
	initServiceSecretFile = 14
)

// initArgs returns the directory the init service writes the signing key and
// the clients into, and the file it writes the Redis password to.
func initArgs(tb testing.TB, initSvc types.ServiceConfig) (secretsDir, passwordFile string) {
	tb.Helper()
	args := initCommand(tb, initSvc)
	return args[initDir], args[initPasswordFile]
}

func TestComposeRedis(t *testing.T) {
	p := loadCompose(t, true)
	r := service(t, p, "redis")
	_, args, passwordFile := redisScript(t, r)
	if !strings.Contains(strings.Join(args, " "), "--appendonly yes") {
		t.Errorf("redis-server %q, want --appendonly yes (sessions survive a restart)", args)
	}
	// The settings the command gives, over Redis's defaults, are ones the
	// issuer's /readyz accepts (package redisconf), and memory is capped.
	cfg := map[string]string{"maxmemory-policy": "noeviction", "appendonly": "no", "appendfsync": "everysec", "save": "3600 1 300 100 60 10000"}
	for i := 0; i+1 < len(args); i++ {
		if name, ok := strings.CutPrefix(args[i], "--"); ok {
			cfg[name] = args[i+1]
		}
	}
	for _, p := range redisconf.Evaluate(cfg) {
		t.Errorf("redis-server %q: the issuer would not be ready: %s", args, p)
	}
	if cfg["maxmemory"] == "" || cfg["maxmemory-policy"] != "noeviction" {
		t.Errorf("redis-server %q: want --maxmemory and --maxmemory-policy noeviction: a full Redis refuses new sessions instead of evicting live ones", args)
	}
	if v := volume(t, r, "/data"); v.Type != types.VolumeTypeVolume || v.ReadOnly {
		t.Errorf("redis /data is %s read_only=%v, want a named volume, writable", v.Type, v.ReadOnly)
	}
	hc := r.HealthCheck
	if hc == nil || hc.Disable || !strings.Contains(strings.Join(hc.Test, " "), "redis-cli ping") || !strings.Contains(strings.Join(hc.Test, " "), "REDISCLI_AUTH=") {
		t.Errorf("redis healthcheck %+v, want redis-cli ping with REDISCLI_AUTH", hc)
	}

	// The password is the file init writes, on a volume of its own that
	// Redis mounts read-only. Redis mounts nothing else of init's: the
	// signing key and the clients are out of its reach.
	initSvc := service(t, p, "init")
	secretsDir, initPasswordFile := initArgs(t, initSvc)
	if passwordFile != initPasswordFile {
		t.Errorf("redis reads the password from %s, init writes it to %s", passwordFile, initPasswordFile)
	}
	pwVolume, secretsVolume := volume(t, initSvc, filepath.Dir(passwordFile)).Source, volume(t, initSvc, secretsDir).Source
	if pwVolume == secretsVolume {
		t.Errorf("init writes the Redis password into the secrets volume %q: Redis would have to mount the signing key and the clients too", secretsVolume)
	}
	if v := volume(t, r, filepath.Dir(passwordFile)); v.Source != pwVolume || !v.ReadOnly {
		t.Errorf("redis reads %s from %q read_only=%v; want init's volume %q, read-only", passwordFile, v.Source, v.ReadOnly, pwVolume)
	}
	for _, v := range r.Volumes {
		if v.Source == secretsVolume {
			t.Errorf("redis mounts the secrets volume %q at %s: it needs only its password", v.Source, v.Target)
		}
	}
	if got := env(t, service(t, p, "issuer"))["SNOWTOKEN_REDIS_PASSWORD_FILE"]; got != passwordFile {
		t.Errorf("issuer SNOWTOKEN_REDIS_PASSWORD_FILE=%q, want %s, the file Redis's requirepass comes from", got, passwordFile)
	}
	if got := r.DependsOn["init"].Condition; got != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("redis depends_on init %q, want %s: the password file must exist", got, types.ServiceConditionCompletedSuccessfully)
	}
}

// TestComposeRedisRuns runs the redis service's script and health check with
// the local sh and redis-server. Only these differ from the container: the
// secrets directory and the data directory are temporary ones, and
// docker-entrypoint.sh and redis-cli on PATH add the port (the entrypoint
// otherwise only drops root).
func TestComposeRedisRuns(t *testing.T) {
	for _, bin := range []string{"sh", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s on PATH", bin)
		}
	}
	r := service(t, loadCompose(t, true), "redis")
	script, _, passwordFile := redisScript(t, r)
	dir := t.TempDir()
	secrets, data, bin := filepath.Join(dir, "secrets"), filepath.Join(dir, "data"), filepath.Join(dir, "bin")
	for _, d := range []string{secrets, data, bin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(freePort(t))
	redisCLI, _ := exec.LookPath("redis-cli")
	for name, body := range map[string]string{
		"docker-entrypoint.sh": `exec "$@" --port ` + port + ` --bind 127.0.0.1 --dir ` + data + ` --save ""`,
		"redis-cli":            `exec ` + redisCLI + ` -p ` + port + ` "$@"`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const password = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	pwFile := filepath.Join(secrets, filepath.Base(passwordFile))
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rebase := strings.NewReplacer(filepath.Dir(passwordFile)+"/", secrets+"/")
	environ := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))

	srv := exec.Command("sh", "-c", rebase.Replace(script))
	srv.Env = environ
	var log strings.Builder
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		srv.Process.Kill()
		<-exited
	})

	// The health check, as Docker runs it: CMD-SHELL's string through sh -c.
	if len(r.HealthCheck.Test) != 2 || r.HealthCheck.Test[0] != "CMD-SHELL" {
		t.Fatalf("redis healthcheck %q, want [CMD-SHELL ...]", r.HealthCheck.Test)
	}
	healthy := func() error {
		c := exec.Command("sh", "-c", rebase.Replace(r.HealthCheck.Test[1]))
		c.Env = environ
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for err := healthy(); err != nil; err = healthy() {
		if time.Now().After(deadline) {
			t.Fatalf("healthcheck %q never passed: %v\nredis: %s", r.HealthCheck.Test[1], err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Without the password, Redis refuses; the password is on no command line.
	if out, _ := exec.Command(redisCLI, "-p", port, "ping").CombinedOutput(); !strings.Contains(string(out), "NOAUTH") {
		t.Errorf("redis-cli ping without a password = %q, want NOAUTH", out)
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", srv.Process.Pid)); err == nil && strings.Contains(string(cmdline), password) {
		t.Errorf("the password is on redis-server's command line: %q", cmdline)
	}
	// A wrong password fails the health check.
	if err := os.WriteFile(pwFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := healthy(); err == nil {
		t.Error("healthcheck passed with a wrong password")
	}

	// The script execs: the process Docker signals is redis-server itself,
	// which stops cleanly on SIGTERM.
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("redis exited on SIGTERM with %v\n%s", waitErr, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("redis did not stop on SIGTERM: the shell did not exec it\n%s", log.String())
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
	secretsDir, passwordFile := initArgs(t, initSvc)
	// The issuer reads the same volumes, read-only.
	for _, dir := range []string{secretsDir, filepath.Dir(passwordFile)} {
		iv := volume(t, initSvc, dir)
		if iv.Type != types.VolumeTypeVolume || iv.ReadOnly {
			t.Errorf("init mounts %s as %s read_only=%v, want a named volume, writable", dir, iv.Type, iv.ReadOnly)
		}
		if sv := volume(t, issuer, dir); sv.Source != iv.Source || !sv.ReadOnly {
			t.Errorf("issuer mounts %s from %q read_only=%v; want %q read-only", dir, sv.Source, sv.ReadOnly, iv.Source)
		}
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

// subnet returns a declared network's one fixed IPv4 subnet.
func subnet(tb testing.TB, p *types.Project, name string) netip.Prefix {
	tb.Helper()
	nw, ok := p.Networks[name]
	if !ok {
		tb.Fatalf("network %q not declared", name)
	}
	if len(nw.Ipam.Config) != 1 {
		tb.Fatalf("network %s has %d ipam pools, want one fixed subnet", name, len(nw.Ipam.Config))
	}
	prefix, err := netip.ParsePrefix(nw.Ipam.Config[0].Subnet)
	if err != nil {
		tb.Fatal(err)
	}
	return prefix
}

// TestComposeNetworkGivesDistinctWorkerIDs: the issuers take their worker ID
// from the last octet of their address on one named interface, which is
// distinct only within a /24. They are on two networks, so the interface is
// named (SNOWTOKEN_WORKER_INTERFACE=eth0), the backend network is the one
// Compose connects first (the highest priority), and both networks are /24s:
// whichever one an engine made eth0, the last octets are distinct.
func TestComposeNetworkGivesDistinctWorkerIDs(t *testing.T) {
	p := loadCompose(t, true)
	issuer := service(t, p, "issuer")
	if got := env(t, issuer)["SNOWTOKEN_WORKER_INTERFACE"]; got != "eth0" {
		t.Errorf("issuer SNOWTOKEN_WORKER_INTERFACE=%q, want eth0: on two networks, \"the first up interface\" is ambiguous", got)
	}
	byPriority := issuer.NetworksByPriority()
	if len(byPriority) == 0 || byPriority[0] != "backend" {
		t.Fatalf("issuer networks by priority %v, want backend first (eth0)", byPriority)
	}
	if len(byPriority) > 1 && issuer.Networks[byPriority[1]].Priority >= issuer.Networks["backend"].Priority {
		t.Errorf("issuer network %s has priority as high as backend's: which one is eth0 is up to the engine", byPriority[1])
	}
	if want, got := netip.MustParsePrefix("172.28.0.0/24"), subnet(t, p, "backend"); got != want {
		t.Errorf("backend subnet %v, want %v", got, want)
	}
	for _, name := range byPriority {
		if prefix := subnet(t, p, name); prefix.Bits() < 24 || !prefix.Addr().Is4() {
			t.Errorf("issuer network %s subnet %v: wider than an IPv4 /24 lets two containers share a last octet, so a worker ID", name, prefix)
		}
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

// TestComposeNetworkIsolation: Redis is on internal networks only, that
// nginx and the consumers are not on; they reach the issuer on another.
func TestComposeNetworkIsolation(t *testing.T) {
	p := loadCompose(t, true)
	redis, issuer := service(t, p, "redis"), service(t, p, "issuer")
	for n := range redis.Networks {
		if !p.Networks[n].Internal {
			t.Errorf("redis is on network %s, which is not internal: true", n)
		}
		if _, ok := issuer.Networks[n]; !ok {
			t.Errorf("redis is on network %s, the issuer is not", n)
		}
		for _, other := range []string{"nginx", "consumer", "consumer-dpop", "consumer-follow", "billing"} {
			if _, ok := service(t, p, other).Networks[n]; ok {
				t.Errorf("%s shares network %s with redis", other, n)
			}
		}
	}
	for _, other := range []string{"nginx", "consumer", "consumer-dpop", "consumer-follow"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(service(t, p, other).Networks)), func(n string) bool {
			_, ok := issuer.Networks[n]
			return ok
		}) {
			t.Errorf("%s shares no network with the issuer", other)
		}
	}

	// Clients reach the issuer through nginx: it is a trusted proxy, so the
	// failed-authentication limit counts each client, not nginx's one
	// address; and a DPoP forwarder, since its auth_request names the
	// original request of a DPoP proof. consumer-dpop is a DPoP forwarder
	// alone: it names the original request of the proofs it forwards
	// (X-Forwarded-*; it is not behind auth_request, see
	// TestComposeConsumerDPoP), never a client's address, which would let
	// it (or whatever took it over) make each failed login come from
	// another address and escape the limit. Nothing else is in either
	// list. So those two have fixed addresses, outside the range Docker
	// gives out, and the issuers trust those addresses alone.
	fixed := map[string]netip.Prefix{}
	for _, name := range []string{"nginx", "consumer-dpop"} {
		for n, nc := range service(t, p, name).Networks {
			if _, shared := issuer.Networks[n]; !shared {
				continue
			}
			if nc == nil || nc.Ipv4Address == "" {
				t.Errorf("%s has no fixed ipv4_address on network %s: the issuers cannot trust it alone", name, n)
				continue
			}
			addr, err := netip.ParseAddr(nc.Ipv4Address)
			if err != nil {
				t.Fatalf("%s ipv4_address %q: %v", name, nc.Ipv4Address, err)
			}
			pool := p.Networks[n].Ipam.Config[0]
			dynamic, err := netip.ParsePrefix(pool.IPRange)
			switch {
			case !subnet(t, p, n).Contains(addr):
				t.Errorf("%s's address %v is not in network %s's subnet %s", name, addr, n, pool.Subnet)
			case err != nil:
				t.Errorf("network %s ip_range %q: %v; without one, Docker may give %s's address %v to a container that starts first", n, pool.IPRange, err, name, addr)
			case dynamic.Contains(addr) || pool.Gateway == nc.Ipv4Address:
				t.Errorf("%s's address %v is in network %s's ip_range %v (or its gateway %s): Docker may give it to another container", name, addr, n, dynamic, pool.Gateway)
			}
			if _, twice := fixed[name]; twice {
				t.Errorf("%s shares more than one network with the issuers", name)
			}
			fixed[name] = netip.PrefixFrom(addr, addr.BitLen())
		}
	}
	ie := env(t, issuer)
	for _, tc := range []struct {
		name string
		want []string // services
	}{
		{"SNOWTOKEN_TRUSTED_PROXIES", []string{"nginx"}},
		{"SNOWTOKEN_DPOP_FORWARDERS", []string{"nginx", "consumer-dpop"}},
	} {
		got := prefixes(t, tc.name, ie[tc.name])
		var want []netip.Prefix
		for _, name := range tc.want {
			want = append(want, fixed[name])
		}
		slices.SortFunc(want, netip.Prefix.Compare)
		if !slices.Equal(got, want) {
			t.Errorf("%s %v, want the fixed addresses of %v alone: %v", tc.name, got, tc.want, want)
		}
	}
}

// prefixes reads the list of addresses and CIDRs of variable name, sorted.
func prefixes(tb testing.TB, name, value string) []netip.Prefix {
	tb.Helper()
	var out []netip.Prefix
	for _, v := range strings.Split(value, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(v)
		if addr, addrErr := netip.ParseAddr(v); addrErr == nil {
			prefix, err = addr.Prefix(addr.BitLen())
		}
		if err != nil {
			tb.Fatalf("%s %q: %v", name, v, err)
		}
		out = append(out, prefix)
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

// pinnedImage matches an image reference pinned to an exact version: a tag
// with major.minor.patch (v optional, as prom/prometheus writes it, and a
// variant such as -alpine), or a digest.
var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+(:v?[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.]+)?(@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})$`)

func TestPinnedImage(t *testing.T) {
	for image, want := range map[string]bool{
		"redis:7.0.15-alpine":                     true,
		"nginx:1.27.5-alpine":                     true,
		"golang:1.26.8":                           true,
		"prom/prometheus:v2.42.0":                 true,
		"prom/prometheus:v2":                      false,
		"redis@sha256:" + strings.Repeat("a", 64): true,
		"redis:7":           false,
		"nginx:1.27-alpine": false,
		"redis":             false,
		"redis:latest":      false,
		"redis:alpine":      false,
	} {
		if got := pinnedImage.MatchString(image); got != want {
			t.Errorf("pinned(%s) = %v, want %v", image, got, want)
		}
	}
}

// TestComposeImagesPinned: every image pulled from a registry names an exact
// version; only the images built here (pull_policy build or never) do not.
func TestComposeImagesPinned(t *testing.T) {
	for name, s := range loadCompose(t, true).Services {
		if s.PullPolicy == types.PullPolicyBuild || s.PullPolicy == types.PullPolicyNever {
			continue
		}
		if !pinnedImage.MatchString(s.Image) {
			t.Errorf("service %s image %q, want an exact version (such as redis:7.0.15-alpine) or a digest", name, s.Image)
		}
	}
}

// TestComposeLimitsAndHealthchecks: every service has CPU and memory
// limits, and every long-running one a health check: its own, or its image's
// HEALTHCHECK (the Dockerfile stage that builds it).
func TestComposeLimitsAndHealthchecks(t *testing.T) {
	p := loadCompose(t, true)
	stages := loadDockerfile(t)
	builtBy := map[string]string{} // image -> Dockerfile stage
	for _, s := range p.Services {
		if s.Build != nil {
			builtBy[s.Image] = s.Build.Target
		}
	}
	for name, s := range p.Services {
		var cpus float32
		var mem int64
		if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
			cpus, mem = s.Deploy.Resources.Limits.NanoCPUs.Value(), int64(s.Deploy.Resources.Limits.MemoryBytes)
		}
		if cpus <= 0 || mem <= 0 {
			t.Errorf("service %s limits cpus=%v memory=%d, want both (deploy.resources.limits)", name, cpus, mem)
		}
		if s.Restart == "no" {
			continue // a one-shot
		}
		if hc := s.HealthCheck; hc != nil && (hc.Disable || len(hc.Test) > 0 && hc.Test[0] == "NONE") {
			t.Errorf("service %s turns its health check off", name)
			continue
		}
		if s.HealthCheck != nil && len(s.HealthCheck.Test) > 0 {
			continue
		}
		stage, ok := builtBy[s.Image]
		if !ok || len(stageNamed(t, stages, stage).all("HEALTHCHECK")) == 0 {
			t.Errorf("service %s has no health check, and its image %s none of its own", name, s.Image)
		}
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

	// The files init writes, here in a temporary directory: config.Load
	// reads the Redis password file.
	secretsDir, passwordFile := initArgs(t, service(t, p, "init"))
	loadEnv := maps.Clone(e)
	dir, pwDir := t.TempDir(), t.TempDir()
	rebaseSecrets(loadEnv, secretsDir, dir)
	rebaseSecrets(loadEnv, filepath.Dir(passwordFile), pwDir)
	if err := os.WriteFile(filepath.Join(pwDir, filepath.Base(passwordFile)), []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(k string) string { return loadEnv[k] })
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
	// Through nginx, which retries a refusing replica's 503 on another.
	if err != nil || u.Hostname() != "nginx" || u.Port() != "8080" {
		t.Errorf("consumer SNOWTOKEN_ISSUER_URL=%q, want http://nginx:8080, the gateway", e["SNOWTOKEN_ISSUER_URL"])
	}
	if _, port, _ := net.SplitHostPort(e["CONSUMER_ADDR"]); port != "8081" {
		t.Errorf("consumer CONSUMER_ADDR=%q, want :8081 (the image EXPOSEs it and nginx proxies to it)", e["CONSUMER_ADDR"])
	}
	if v, ok := e["CONSUMER_PUBLIC_URL"]; ok {
		t.Errorf("consumer CONSUMER_PUBLIC_URL=%q: the consumer behind auth_request takes bearer tokens only (a DPoP proof the gateway had checked would be a replay)", v)
	}
	if len(c.Ports) != 0 {
		t.Errorf("consumer publishes %v: clients reach it only through nginx", c.Ports)
	}
}

// checkRunsAsConsumer: the service name runs the consumer's image as the
// consumer does: the image the consumer service builds, never pulled nor
// built again, started after the consumer (docker-compose 1.29 makes
// images in start order) and a healthy issuer, with the consumer's
// hardening, limits, restart policy and the image's health check, and no
// port published.
func checkRunsAsConsumer(t *testing.T, p *types.Project, name string) {
	t.Helper()
	c, d := service(t, p, "consumer"), service(t, p, name)
	if d.Image != c.Image || d.PullPolicy != types.PullPolicyNever || d.Build != nil {
		t.Errorf("%s image %q pull_policy %q build %v; want the consumer's image %q, never pulled, not built again", name, d.Image, d.PullPolicy, d.Build, c.Image)
	}
	if _, ok := d.DependsOn["consumer"]; !ok {
		t.Errorf("%s does not depend on consumer, which builds its image: docker-compose 1.29 may try to pull it", name)
	}
	if got := d.DependsOn["issuer"].Condition; got != types.ServiceConditionHealthy {
		t.Errorf("%s depends_on issuer %q, want service_healthy", name, got)
	}
	if !d.ReadOnly || !slices.Contains(d.CapDrop, "ALL") || !slices.Equal(d.CapDrop, c.CapDrop) || !slices.Equal(d.SecurityOpt, c.SecurityOpt) {
		t.Errorf("%s read_only=%v cap_drop=%v security_opt=%v; want the consumer's hardening: true %v %v", name, d.ReadOnly, d.CapDrop, d.SecurityOpt, c.CapDrop, c.SecurityOpt)
	}
	if d.Deploy == nil || c.Deploy == nil || d.Deploy.Resources.Limits == nil || c.Deploy.Resources.Limits == nil ||
		d.Deploy.Resources.Limits.NanoCPUs != c.Deploy.Resources.Limits.NanoCPUs ||
		d.Deploy.Resources.Limits.MemoryBytes != c.Deploy.Resources.Limits.MemoryBytes {
		t.Errorf("%s's CPU and memory limits are not the consumer's", name)
	}
	if d.HealthCheck != nil || d.Restart != c.Restart || len(d.Ports) != 0 {
		t.Errorf("%s healthcheck %+v restart %q ports %v; want the image's health check, the consumer's restart %q, no port published", name, d.HealthCheck, d.Restart, d.Ports, c.Restart)
	}
}

// TestComposeConsumerDPoP: consumer-dpop is the consumer's image, run as
// the consumer is (hardening, limits, the image's health check), for
// DPoP-bound tokens: its public URL is the gateway's and /dpop, where
// nginx routes to it without auth_request (a proof is accepted once); it
// asks the issuer directly (nginx's issuer routes drop X-Forwarded-*), from
// its fixed address, which the issuers list as a DPoP forwarder
// (TestComposeNetworkIsolation).
func TestComposeConsumerDPoP(t *testing.T) {
	p := loadCompose(t, true)
	c, d := service(t, p, "consumer"), service(t, p, "consumer-dpop")
	checkRunsAsConsumer(t, p, "consumer-dpop")
	if _, ok := service(t, p, "nginx").DependsOn["consumer-dpop"]; !ok {
		t.Error("nginx does not depend on consumer-dpop: nginx fails to start when an upstream name does not resolve")
	}

	e, ce := env(t, d), env(t, c)
	if e["CONSUMER_ADDR"] != ce["CONSUMER_ADDR"] {
		t.Errorf("consumer-dpop CONSUMER_ADDR=%q, want the consumer's %q (the image's port, nginx's upstream)", e["CONSUMER_ADDR"], ce["CONSUMER_ADDR"])
	}
	if u, err := url.Parse(e["SNOWTOKEN_ISSUER_URL"]); err != nil || u.Scheme != "http" || u.Host != "issuer:8080" || u.Path != "" {
		t.Errorf("consumer-dpop SNOWTOKEN_ISSUER_URL=%q, want http://issuer:8080: nginx's issuer routes drop the X-Forwarded-* it must send", e["SNOWTOKEN_ISSUER_URL"])
	}
	// The gateway's public URL (the issuers' SNOWTOKEN_ISSUER) and the
	// prefix nginx strips.
	if want := env(t, service(t, p, "issuer"))["SNOWTOKEN_ISSUER"] + "/dpop"; e["CONSUMER_PUBLIC_URL"] != want {
		t.Errorf("consumer-dpop CONSUMER_PUBLIC_URL=%q, want %q", e["CONSUMER_PUBLIC_URL"], want)
	}
	conf, err := os.ReadFile(filepath.Join("nginx", "default.conf"))
	if err != nil {
		t.Fatal(err)
	}
	loc := regexp.MustCompile(`(?s)\n    location = /dpop/orders \{(.*?)\n    \}`).FindSubmatch(conf)
	switch {
	case loc == nil:
		t.Fatal("nginx/default.conf has no location = /dpop/orders")
	case !strings.Contains(string(loc[1]), "proxy_pass http://snowtoken_consumer_dpop/orders;"):
		t.Error("nginx's /dpop/orders does not pass /orders to consumer-dpop (the prefix stripped)")
	case strings.Contains(string(loc[1]), "auth_request"):
		t.Error("nginx's /dpop/orders has an auth_request: the issuer would check each proof there, and refuse it as a replay when consumer-dpop asks")
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
	for _, want := range []string{"set $snowtoken_issuer issuer:8080;", "server consumer:8081;", "server consumer-dpop:8081;", "server consumer-follow:8081;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx/default.conf has no %s", want)
		}
	}
	// The issuer's replicas come and go (--scale): nginx asks Docker's DNS
	// again after a few seconds, through a variable in every issuer proxy_pass.
	if !regexp.MustCompile(`(?m)^\s*resolver 127\.0\.0\.11 valid=[1-9]s ipv6=off;`).Match(conf) {
		t.Error("nginx/default.conf has no `resolver 127.0.0.11 valid=Ns ipv6=off;`: nginx would resolve issuer once, at start")
	}
	for _, m := range regexp.MustCompile(`proxy_pass http://(\S+?)[/;]`).FindAllSubmatch(conf, -1) {
		if host := string(m[1]); strings.Contains(host, "issuer") && host != "$snowtoken_issuer" {
			t.Errorf("nginx/default.conf proxy_pass http://%s: want http://$snowtoken_issuer, so issuer is resolved again", host)
		}
	}
	if regexp.MustCompile(`(?m)^\s*server issuer:`).Match(conf) {
		t.Error("nginx/default.conf has an upstream server issuer: resolved once, at start")
	}
	if got := n.DependsOn["issuer"].Condition; got != types.ServiceConditionHealthy {
		t.Errorf("nginx depends_on issuer %q, want service_healthy: the gateway starts when an issuer can answer", got)
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
	secretsDir, passwordFile := initArgs(t, initSvc)

	dir, pwDir, feedDir := filepath.Join(t.TempDir(), "secrets"), filepath.Join(t.TempDir(), "redis-auth"), filepath.Join(t.TempDir(), "feed-auth")
	args := slices.Clone(initCommand(t, initSvc))
	args[initDir], args[initPasswordFile] = dir, filepath.Join(pwDir, filepath.Base(passwordFile))
	args[initFeedSecretFile] = filepath.Join(feedDir, filepath.Base(args[initFeedSecretFile]))
	args[initServiceSecretFile] = filepath.Join(t.TempDir(), "service-auth", filepath.Base(args[initServiceSecretFile]))
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("snowtoken %q: %v\n%s", args, err, out)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "demo.secret"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), strings.TrimSpace(string(secret))) {
		t.Errorf("init printed the secret:\n%s", out)
	}
	// The second start of the stack runs init again: a no-op.
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing to do") {
		t.Errorf("second init: %v\n%s", err, out)
	}

	e := env(t, issuer)
	rebaseSecrets(e, secretsDir, dir)
	rebaseSecrets(e, filepath.Dir(passwordFile), pwDir)
	ks, err := keyset.Load(e["SNOWTOKEN_SIGNING_KEYS"])
	if err != nil {
		t.Fatalf("the key init wrote: %v", err)
	}
	clients, err := clients.Load(e["SNOWTOKEN_CLIENTS_FILE"])
	if err != nil {
		t.Fatalf("the clients file init wrote: %v", err)
	}
	if _, err := clients.Authenticate("demo", strings.TrimSpace(string(secret)), time.Now()); err != nil {
		t.Errorf("demo.secret does not authenticate client demo: %v", err)
	}
	// consumer-follow's feed client, whose secret is alone in its volume.
	feedSecret, err := os.ReadFile(args[initFeedSecretFile])
	if err != nil {
		t.Fatal(err)
	}
	if c, err := clients.Authenticate(args[initFeedID], strings.TrimSpace(string(feedSecret)), time.Now()); err != nil || !c.MayFollowRevocations() || c.Admin || len(c.Scopes) > 0 {
		t.Errorf("the feed secret init wrote: client %q %+v, %v; want one that may follow the revocation feed alone", args[initFeedID], c, err)
	}
	// The consumer's own client for its calls to billing, its secret alone in its volume.
	serviceSecret, err := os.ReadFile(args[initServiceSecretFile])
	if err != nil {
		t.Fatal(err)
	}
	if c, err := clients.Authenticate(args[initServiceID], strings.TrimSpace(string(serviceSecret)), time.Now()); err != nil ||
		strings.Join(c.Scopes, ",") != args[initServiceScopes] || c.Admin || c.MayFollowRevocations() {
		t.Errorf("the service secret init wrote: client %q %+v, %v; want one with scopes %s alone", args[initServiceID], c, err, args[initServiceScopes])
	}

	// Redis with the password init wrote, as the redis service has it.
	password, err := os.ReadFile(e["SNOWTOKEN_REDIS_PASSWORD_FILE"])
	if err != nil {
		t.Fatalf("the Redis password init wrote: %v", err)
	}
	redisSrv := redistest.NewConfiguredServer(t)
	if err := redisSrv.Client().ConfigSet(t.Context(), "requirepass", strings.TrimSpace(string(password))).Err(); err != nil {
		t.Fatal(err)
	}
	e["SNOWTOKEN_REDIS_URL"] = redisSrv.URL()
	e["SNOWTOKEN_ADDR"] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	e["SNOWTOKEN_METRICS_ADDR"] = "127.0.0.1:0"
	// The address eth0 has on the backend network, as the interface would.
	delete(e, "SNOWTOKEN_WORKER_INTERFACE")
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
	for k, want := range map[string]any{"worker_id": float64(7), "production": true, "signing_kid": ks.SigningKeyID(), "issuer": e["SNOWTOKEN_ISSUER"]} {
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

// rebaseSecrets moves every value of e under the container's secrets
// directory to the same file under dir.
func rebaseSecrets(e map[string]string, secretsDir, dir string) {
	for k, v := range e {
		if rest, ok := strings.CutPrefix(v, secretsDir+"/"); ok {
			e[k] = filepath.Join(dir, rest)
		}
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
