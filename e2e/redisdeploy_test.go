package e2e

// The tests in this file run the real snowtoken binary against the Redis
// deployments it supports besides a plain single server: a Redis Cluster of
// three masters (SNOWTOKEN_REDIS_CLUSTER_URL and _ADDRS), a master with a
// replica watched by three Sentinels (SNOWTOKEN_REDIS_SENTINEL_URL, and
// _MASTER with _ADDRS), and a single server with TLS, all started by the test
// on loopback. Every server requires a password, and so does every Sentinel.
// They use the helpers of replicas_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// deployRequireEnv, when 1, turns a missing Redis binary into a failure
// instead of a skip; CI sets it so that these tests cannot pass by not running.
const deployRequireEnv = "SNOWTOKEN_TEST_REQUIRE_REDIS_DEPLOYMENTS"

// deploySubjects hash to slots served by all three masters of a cluster made
// by `redis-cli --cluster create` (alice 749, bob 8955, erin 12069, heidi 509);
// TestRedisClusterDeployment checks that they do.
var deploySubjects = []string{"alice", "bob", "erin", "heidi"}

// The credentials of every deployment: the servers' default user has
// deployPassword, and deployACLUser is a second user with deployACLPassword;
// the Sentinels require deploySentinelPassword. No snowtoken output may show
// any of them.
const (
	deployPassword         = "server-pw-7f3a"
	deployACLUser          = "snowtoken"
	deployACLPassword      = "acl-pw-5d0e"
	deploySentinelPassword = "sentinel-pw-91c2"
)

// deploySecretFile writes a mounted-secret style file, with its trailing
// newline, and returns its path.
func deploySecretFile(tb testing.TB, secret string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// deployNoSecrets fails tb if the output of p shows a password.
func deployNoSecrets(tb testing.TB, p *issuer) {
	tb.Helper()
	for _, s := range []string{deployPassword, deployACLPassword, deploySentinelPassword} {
		if strings.Contains(p.out.String(), s) {
			tb.Errorf("the output of %s shows a password:\n%s", p.name, p.out.String())
		}
	}
}

// deployRefused launches r of f and checks that it stops before serving,
// because Redis refused it: its output holds want, and no password.
func deployRefused(tb testing.TB, f fleet, r replica, want string) {
	tb.Helper()
	p := f.launch(tb, r)
	name := p.name
	if p.exited(tb) == nil {
		tb.Fatalf("%s exited 0, want it to refuse to start", name)
	}
	out := p.out.String()
	_, line, found := strings.Cut(out, "snowtoken: redis does not answer")
	line, _, _ = strings.Cut(line, "\n")
	if !found || !strings.Contains(line, want) {
		tb.Errorf("%s: output %q, want the Redis error, with %q", name, out, want)
	}
	tb.Logf("%s: redis does not answer%s", name, line)
	deployNoSecrets(tb, p)
}

// deployNeeds skips the test when a binary is missing, or redis-server is
// older than the 6.2 these deployments need (ACL users, Sentinel's own
// password, TLS), unless deployRequireEnv is set: then it fails. A real Redis
// in SNOWTOKEN_TEST_REDIS_URL does not ask for these: it may well run in a
// container, with no redis-server on this host.
func deployNeeds(tb testing.TB, bins ...string) {
	tb.Helper()
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	var why string
	switch {
	case len(missing) > 0:
		why = fmt.Sprintf("needs %s on PATH (Debian: apt-get install redis-server redis-tools)", strings.Join(missing, " and "))
	case slices.Contains(bins, "redis-server"):
		out, _ := exec.Command("redis-server", "--version").Output()
		if v, ok := redisServerVersion(string(out)); !ok || slices.Compare(v, []int{6, 2}) < 0 {
			why = fmt.Sprintf("needs redis-server 6.2 or later (ACL users, sentinel-pass, TLS); this one says %q", strings.TrimSpace(string(out)))
		}
	}
	if why == "" {
		return
	}
	if os.Getenv(deployRequireEnv) == "1" {
		tb.Fatalf("%s; %s=1, so this test must run", why, deployRequireEnv)
	}
	tb.Skipf("%s (set %s=1 to make this a failure)", why, deployRequireEnv)
}

// redisServerVersion reads major and minor out of redis-server --version's
// "Redis server v=7.0.15 sha=...".
func redisServerVersion(s string) ([]int, bool) {
	_, v, ok := strings.Cut(s, " v=")
	v, _, _ = strings.Cut(v, " ")
	parts := strings.Split(v, ".")
	if !ok || len(parts) < 2 {
		return nil, false
	}
	var out []int
	for _, p := range parts[:2] {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func TestRedisServerVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0\n", []int{7, 0}},
		{"Redis server v=5.0.7 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64 build=66bd629f924ac924\n", []int{5, 0}},
		{"Valkey server v=8.0.1 sha=00000000:0\n", []int{8, 0}},
		{"", nil},
		{"Redis server v=x.y\n", nil},
	} {
		if got, ok := redisServerVersion(c.in); !slices.Equal(got, c.want) || ok != (c.want != nil) {
			t.Errorf("redisServerVersion(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
}

// deployWait calls cond until it returns nil, and fails with its last error
// after fleetWait.
func deployWait(tb testing.TB, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deployRedisServer starts redis-server on 127.0.0.1:port with the
// credentials of the deployment tests and extra args, and returns once it
// answers PING. With tlsFiles it serves TLS only, with their certificate.
func deployRedisServer(tb testing.TB, dir string, port int, tlsFiles *redistest.TLSFiles, extra ...string) *issuer {
	tb.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	opt := &redis.Options{Addr: addr, Password: deployPassword, MaxRetries: -1, DialTimeout: time.Second}
	args := []string{"--port", strconv.Itoa(port)}
	if tlsFiles != nil {
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", tlsFiles.Cert,
			"--tls-key-file", tlsFiles.Key, "--tls-ca-cert-file", tlsFiles.CA, "--tls-auth-clients", "no"}
		opt.TLSConfig = tlsFiles.ClientConfig(tb)
	}
	args = append(append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		"--requirepass", deployPassword, "--masterauth", deployPassword,
		"--user", deployACLUser, "on", ">"+deployACLPassword, "~*", "&*", "+@all"), extra...)
	p := spawnProc(tb, "redis-server "+addr, nil, "redis-server", args...)
	p.addr = addr
	c := redis.NewClient(opt)
	defer c.Close()
	deployWait(tb, "redis-server on "+addr, func() error {
		select {
		case <-p.done:
			tb.Fatalf("redis-server on %s exited: %v; log:\n%s", addr, p.err, deployLog(dir, port))
		default:
		}
		return c.Ping(tb.Context()).Err()
	})
	return p
}

func deployLog(dir string, port int) string {
	b, _ := os.ReadFile(filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"))
	return lastLines(string(b), 20)
}

// deployPort returns a free port on 127.0.0.1.
func deployPort(tb testing.TB) int {
	tb.Helper()
	_, port, _ := net.SplitHostPort(fleetAddr(tb, "127.0.0.1"))
	n, _ := strconv.Atoi(port)
	return n
}

// deployClusterPort returns a free port P below 30000 whose cluster bus port,
// P+10000, is free too (an ephemeral port plus 10000 may not exist).
func deployClusterPort(tb testing.TB) int {
	tb.Helper()
	free := func(port int) bool {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		ln.Close()
		return true
	}
	for range 200 {
		if p := 20000 + rand.IntN(10000); free(p) && free(p+10000) {
			return p
		}
	}
	tb.Fatal("no free port pair P, P+10000 below 40000")
	return 0
}

// startRedisCluster starts three cluster-enabled redis-servers, joins them
// with `redis-cli --cluster create` and returns their addresses once every
// node reports all 16384 slots served.
func startRedisCluster(tb testing.TB) []string {
	tb.Helper()
	dir := tb.TempDir()
	var addrs []string
	for range 3 {
		port := deployClusterPort(tb)
		p := strconv.Itoa(port)
		deployRedisServer(tb, dir, port, nil, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+p+".conf",
			"--cluster-node-timeout", "5000")
		addrs = append(addrs, "127.0.0.1:"+p)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), fleetWait)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	cli := exec.CommandContext(ctx, "redis-cli", args...)
	cli.Env = append(os.Environ(), "REDISCLI_AUTH="+deployPassword)
	if out, err := cli.CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: deployPassword})
		deployWait(tb, "cluster node "+addr, func() error {
			info, err := c.ClusterInfo(tb.Context()).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:3"} {
				if !strings.Contains(info, want) {
					return fmt.Errorf("CLUSTER INFO lacks %s:\n%s", want, info)
				}
			}
			return nil
		})
		c.Close()
	}
	return addrs
}

// deployExercise issues, validates, revokes and revokes all tokens of every
// subject at p; check, if set, looks at each subject's keys in Redis.
func deployExercise(tb testing.TB, p *issuer, creds fleetCreds, worker int64, subjects []string,
	check func(subject string, tok fleetToken)) {
	tb.Helper()
	for _, s := range subjects {
		t1, t2 := p.issue(tb, creds.svc, s), p.issue(tb, creds.svc, s)
		for _, tok := range []fleetToken{t1, t2} {
			p.mustValidate(tb, tok, worker)
			if _, cl := p.validate(tb, tok); cl.Subject != s {
				tb.Fatalf("token of %s validates with sub %q", s, cl.Subject)
			}
		}
		if check != nil {
			check(s, t2)
		}
		if status := p.revoke(tb, creds.svc, t1); status != http.StatusOK {
			tb.Fatalf("POST /token/revoke of %s's token: %d, want 200", s, status)
		}
		p.mustReject(tb, t1, "after its revocation")
		p.mustValidate(tb, t2, worker)
		if status := p.revokeSubject(tb, creds.admin, s); status != http.StatusNoContent {
			tb.Fatalf("DELETE /subjects/%s/tokens: %d, want 204", s, status)
		}
		p.mustReject(tb, t2, "after all of "+s+"'s tokens were revoked")
		p.mustValidate(tb, p.issue(tb, creds.svc, s), worker)
	}
	// A client's revocation lives in a key of its own slot: on a Cluster,
	// validation reads it beside the subject's keys in one pipeline.
	adminTok, svcTok := p.issue(tb, creds.admin, ""), p.issue(tb, creds.svc, subjects[0])
	if status, _, body := fleetCall(tb, http.MethodDelete, p.url("/clients/admin/tokens"), &creds.admin, "", nil); status != http.StatusNoContent {
		tb.Fatalf("DELETE /clients/admin/tokens: %d %s, want 204", status, body)
	}
	p.mustReject(tb, adminTok, "after all of its client's tokens were revoked")
	p.mustValidate(tb, svcTok, worker)
	// Until its IDs are past the revocation (the leeway, 5 s), the client
	// gets 503 with Retry-After, never a token that would not validate.
	deployWait(tb, "a token for the client past its revocation", func() error {
		status, h, tok, body := p.tryIssue(tb, creds.admin, "")
		switch {
		case status == http.StatusOK:
			p.mustValidate(tb, tok, worker)
			return nil
		case status != http.StatusServiceUnavailable || h.Get("Retry-After") == "":
			tb.Fatalf("POST /token right after the client's revocation: %d %s, want 503 with Retry-After or a token that validates", status, body)
		}
		return fmt.Errorf("POST /token: %d %s", status, body)
	})
}

// TestRedisClusterDeployment runs snowtoken on a three-master Redis Cluster
// that requires a password: the worker lease and the sessions of subjects in
// every master's slots, as an ACL user named in SNOWTOKEN_REDIS_CLUSTER_URL;
// then as the default user of SNOWTOKEN_REDIS_CLUSTER_ADDRS with
// SNOWTOKEN_REDIS_PASSWORD_FILE, and without the password, refused.
func TestRedisClusterDeployment(t *testing.T) {
	deployNeeds(t, "redis-server", "redis-cli")
	bin := fleetBinary(t)
	addrs := startRedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: deployPassword})
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()

	masters := map[string][]string{}
	for _, s := range deploySubjects {
		m, err := cc.MasterForKey(ctx, redisstore.DefaultKeyPrefix+"{"+s+"}:gen")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = append(masters[m.Options().Addr], s)
	}
	if len(masters) != len(addrs) {
		t.Fatalf("subjects by master %v: want every one of the %d masters", masters, len(addrs))
	}

	creds := newFleetCreds(t, bin)
	deployRefused(t, fleet{bin, creds}, replica{name: "snowtoken on the cluster without a password", ip: "127.0.0.21",
		redis: map[string]string{"SNOWTOKEN_REDIS_CLUSTER_ADDRS": strings.Join(addrs, ",")}}, "NOAUTH")
	clusterURL := "redis://" + deployACLUser + ":" + deployACLPassword + "@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	p := fleet{bin, creds}.start(t, replica{name: "snowtoken on the cluster", ip: "127.0.0.21", redis: map[string]string{"SNOWTOKEN_REDIS_CLUSTER_URL": clusterURL}})
	if w := p.worker(t); w != 21 {
		t.Fatalf("worker %d, want 21", w)
	}
	leaseKey, _ := workerKeys(21)
	if n, err := cc.Exists(ctx, leaseKey).Result(); err != nil || n != 1 {
		t.Fatalf("lease key %s in the cluster: exists %d, %v", leaseKey, n, err)
	}
	deployExercise(t, p, creds, 21, deploySubjects, func(s string, tok fleetToken) {
		key := redisstore.DefaultKeyPrefix + "{" + s + "}:" + tok.TokenID.String()
		if n, err := cc.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("session key %s in the cluster: exists %d, %v", key, n, err)
		}
	})
	for _, s := range deploySubjects {
		if n, err := cc.Exists(ctx, redisstore.DefaultKeyPrefix+"{"+s+"}:gen").Result(); err != nil || n != 1 {
			t.Errorf("revocation marker of %s in the cluster: exists %d, %v", s, n, err)
		}
	}
	// The same with opaque tokens, whose records are found by their IDs,
	// in other slots than their subjects' markers: two round trips.
	opaque := creds
	opaque.svc = creds.opaque
	deployExercise(t, p, opaque, 21, deploySubjects, func(s string, tok fleetToken) {
		if !strings.HasPrefix(tok.AccessToken, token.OpaquePrefix) {
			t.Fatalf("the opaque client got %.12q…", tok.AccessToken)
		}
		key := redisstore.DefaultKeyPrefix + "o:" + tok.TokenID.String()
		if n, err := cc.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("opaque session key %s in the cluster: exists %d, %v", key, n, err)
		}
	})
	// Every revocation above appended to the revocation log, one Stream in
	// one slot ({revlog}), on whichever master holds it: a token and its
	// subject per subject and format, the admin client once per format.
	logKey := redisstore.DefaultKeyPrefix + "{revlog}"
	msgs, err := cc.XRange(ctx, logKey, "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", logKey, err)
	}
	kinds := map[string]int{}
	for _, m := range msgs {
		kinds[fmt.Sprint(m.Values["k"])]++
	}
	if want := map[string]int{"t": 2 * len(deploySubjects), "s": 2 * len(deploySubjects), "c": 2}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("revocation log entries by kind %v, want %v", kinds, want)
	}
	logMaster, err := cc.MasterForKey(ctx, logKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("revocation log %s: slot %d on %s, %d entries", logKey, cc.ClusterKeySlot(ctx, logKey).Val(), logMaster.Options().Addr, len(msgs))
	deployNoSecrets(t, p)

	q := fleet{bin, creds}.start(t, replica{name: "snowtoken on the cluster by addresses", ip: "127.0.0.23", redis: map[string]string{
		"SNOWTOKEN_REDIS_CLUSTER_ADDRS": strings.Join(addrs, ","),
		"SNOWTOKEN_REDIS_PASSWORD_FILE": deploySecretFile(t, deployPassword),
	}})
	for _, s := range deploySubjects {
		q.mustValidate(t, q.issue(t, creds.svc, s), 23)
	}
	deployNoSecrets(t, q)
	t.Logf("subjects by master: %v", masters)
}

// TestRedisSentinelDeployment runs snowtoken on a master and a replica watched
// by three Sentinels, all requiring passwords, kills the master and checks that
// snowtoken works again on the promoted replica, and that no revoked token
// validates meanwhile. It runs on SNOWTOKEN_REDIS_SENTINEL_URL as an ACL user;
// before the failover also on _MASTER and _ADDRS with the password files, and
// without either password, refused.
// deploySentinel is a master, its replica and three sentinels that watch
// it (deploySentinelName), all on this host, as startSentinel left them.
type deploySentinel struct {
	master, replica *issuer
	rc              *redis.Client // the replica's
	addrs           []string      // the sentinels'
	scs             []*redis.SentinelClient
}

// deploySentinelName is the master's name at the sentinels.
const deploySentinelName = "mymaster"

// startSentinel starts a master, its replica and three sentinels in dir,
// and returns once every sentinel knows the others and the replica.
func startSentinel(t *testing.T, dir string) *deploySentinel {
	t.Helper()
	ctx := t.Context()
	master := deployRedisServer(t, dir, deployPort(t), nil)
	replica := deployRedisServer(t, dir, deployPort(t), nil, "--replicaof", "127.0.0.1", strings.TrimPrefix(master.addr, "127.0.0.1:"))
	rc := redis.NewClient(&redis.Options{Addr: replica.addr, Password: deployPassword})
	t.Cleanup(func() { rc.Close() })
	deployWait(t, "replica link to the master", func() error {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("master_link_status is not up")
		}
		return err
	})

	name := deploySentinelName
	var sentinels []string
	for range 3 {
		port := deployPort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", port))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"requirepass %s\nsentinel sentinel-pass %s\n"+
			"sentinel monitor %s 127.0.0.1 %s 2\n"+
			"sentinel auth-pass %s %s\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\n",
			port, dir, filepath.Join(dir, fmt.Sprintf("sentinel-%d.log", port)),
			deploySentinelPassword, deploySentinelPassword,
			name, strings.TrimPrefix(master.addr, "127.0.0.1:"), name, deployPassword, name, name)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		spawnProc(t, fmt.Sprintf("sentinel :%d", port), nil, "redis-server", conf, "--sentinel")
		sentinels = append(sentinels, "127.0.0.1:"+strconv.Itoa(port))
	}
	scs := make([]*redis.SentinelClient, len(sentinels))
	for i, addr := range sentinels {
		scs[i] = redis.NewSentinelClient(&redis.Options{Addr: addr, Password: deploySentinelPassword, MaxRetries: -1})
		t.Cleanup(func() { scs[i].Close() })
		deployWait(t, "sentinel "+addr+" knows the other sentinels and the replica", func() error {
			others, err := scs[i].Sentinels(ctx, name).Result()
			if err != nil {
				return err
			}
			replicas, err := scs[i].Replicas(ctx, name).Result()
			if err != nil {
				return err
			}
			if len(others) != len(sentinels)-1 || len(replicas) != 1 || replicas[0]["flags"] != "slave" {
				return fmt.Errorf("sentinels %v, replicas %v", others, replicas)
			}
			return nil
		})
	}

	return &deploySentinel{master: master, replica: replica, rc: rc, addrs: sentinels, scs: scs}
}

func TestRedisSentinelDeployment(t *testing.T) {
	deployNeeds(t, "redis-server")
	bin := fleetBinary(t)
	dir := t.TempDir()
	ctx := t.Context()

	sn := startSentinel(t, dir)
	master, standby, rc, sentinels, scs, name := sn.master, sn.replica, sn.rc, sn.addrs, sn.scs, deploySentinelName

	creds := newFleetCreds(t, bin)
	byAddrs := map[string]string{
		"SNOWTOKEN_REDIS_SENTINEL_MASTER":        name,
		"SNOWTOKEN_REDIS_SENTINEL_ADDRS":         strings.Join(sentinels, ","),
		"SNOWTOKEN_REDIS_PASSWORD_FILE":          deploySecretFile(t, deployPassword),
		"SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE": deploySecretFile(t, deploySentinelPassword),
	}
	for _, missing := range []struct{ name, want string }{
		{"SNOWTOKEN_REDIS_PASSWORD_FILE", "NOAUTH"},
		{"SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE", "sentinels specified in configuration are unreachable: NOAUTH"},
	} {
		env := maps.Clone(byAddrs)
		delete(env, missing.name)
		deployRefused(t, fleet{bin, creds}, replica{name: "snowtoken on sentinel without " + missing.name, ip: "127.0.0.24", redis: env}, missing.want)
	}
	q := fleet{bin, creds}.start(t, replica{name: "snowtoken on sentinel by addresses", ip: "127.0.0.24", redis: byAddrs})
	q.mustValidate(t, q.issue(t, creds.svc, "alice"), 24)
	deployNoSecrets(t, q)
	q.kill()

	sentinelURL := "redis://:" + deploySentinelPassword + "@" + sentinels[0] + "?master_name=" + name +
		"&addr=" + sentinels[1] + "&addr=" + sentinels[2] + "&username=" + deployACLUser
	p := fleet{bin, creds}.start(t, replica{name: "snowtoken on sentinel", ip: "127.0.0.22", redis: map[string]string{
		"SNOWTOKEN_REDIS_SENTINEL_URL":  sentinelURL,
		"SNOWTOKEN_REDIS_PASSWORD_FILE": deploySecretFile(t, deployACLPassword),
	}})
	if w := p.worker(t); w != 22 {
		t.Fatalf("worker %d, want 22", w)
	}
	defer deployNoSecrets(t, p)
	mc := redis.NewClient(&redis.Options{Addr: master.addr, Password: deployPassword})
	t.Cleanup(func() { mc.Close() })
	deployExercise(t, p, creds, 22, deploySubjects, func(s string, tok fleetToken) {
		key := redisstore.DefaultKeyPrefix + "{" + s + "}:" + tok.TokenID.String()
		if n, err := mc.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("session key %s on the master: exists %d, %v", key, n, err)
		}
	})

	// Tokens whose fate must survive the failover.
	live := p.issue(t, creds.svc, "carol")
	revoked := p.issue(t, creds.svc, "carol")
	if status := p.revoke(t, creds.svc, revoked); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d", status)
	}
	subjectRevoked := p.issue(t, creds.svc, "dave")
	if status := p.revokeSubject(t, creds.admin, "dave"); status != http.StatusNoContent {
		t.Fatalf("DELETE /subjects/dave/tokens: %d", status)
	}
	// Replication is asynchronous: a revocation the master acknowledged but
	// had not yet sent to the replica when it died would be lost. Wait until
	// the replica has everything, so that the test checks snowtoken, not that.
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 on the master: %d, %v", n, err)
	}

	// Watch the revoked tokens through the failover: a 503 is fine, a 200 never.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		statuses sync.Map // status -> *atomic.Int64
		pollErr  atomic.Pointer[error]
	)
	for i := range 4 { // several, since a request waits while Redis has no master
		tok := []fleetToken{revoked, subjectRevoked}[i%2]
		wg.Go(func() {
			for !stop.Load() {
				status, err := deployValidateStatus(p, tok)
				if err != nil {
					pollErr.CompareAndSwap(nil, &err)
					continue
				}
				n, _ := statuses.LoadOrStore(status, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	killed := time.Now()
	master.kill()
	deployWait(t, "sentinels promote the replica", func() error {
		addr, err := scs[0].GetMasterAddrByName(ctx, name).Result()
		if err == nil && strings.Join(addr, ":") != standby.addr {
			err = fmt.Errorf("master is %v, want the replica %s", addr, standby.addr)
		}
		return err
	})
	promoted := time.Since(killed)
	unavailable := 0
	deployWait(t, "snowtoken issues on the promoted replica", func() error {
		status, _, _, body := p.tryIssue(t, creds.svc, "")
		switch status {
		case http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			unavailable++
		default:
			t.Fatalf("POST /token during the failover: %d %s, want 503 or 200", status, body)
		}
		return fmt.Errorf("POST /token: %d %s", status, body)
	})
	recovered := time.Since(killed)

	p.mustValidate(t, live, 22)
	p.mustReject(t, revoked, "revoked before the failover")
	p.mustReject(t, subjectRevoked, "of a subject revoked before the failover")
	deployExercise(t, p, creds, 22, deploySubjects, func(s string, tok fleetToken) {
		key := redisstore.DefaultKeyPrefix + "{" + s + "}:" + tok.TokenID.String()
		if n, err := rc.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("session key %s on the promoted replica: exists %d, %v", key, n, err)
		}
	})

	stop.Store(true)
	wg.Wait()
	seen := map[int]int64{}
	statuses.Range(func(k, v any) bool {
		seen[k.(int)] = v.(*atomic.Int64).Load()
		return true
	})
	if e := pollErr.Load(); e != nil {
		t.Errorf("validating revoked tokens during the failover: %v", *e)
	}
	if seen[http.StatusOK] != 0 {
		t.Fatalf("a revoked token validated %d times during the failover (statuses seen: %v)", seen[http.StatusOK], seen)
	}
	if seen[http.StatusUnauthorized] == 0 {
		t.Errorf("the watch saw no 401 for the revoked tokens: statuses %v", seen)
	}
	t.Logf("master killed: replica promoted after %v, snowtoken issued again after %v (%d × 503 before); revoked tokens during the failover: %v",
		promoted.Round(time.Millisecond), recovered.Round(time.Millisecond), unavailable, seen)
}

// TestRedisTLSDeployment runs snowtoken on a redis-server that serves TLS
// only, with a certificate of a CA the test makes: as an ACL user of a
// rediss:// URL with the CA in SNOWTOKEN_REDIS_TLS_CA_FILE; without the CA,
// or without TLS, refused.
func TestRedisTLSDeployment(t *testing.T) {
	deployNeeds(t, "redis-server")
	bin := fleetBinary(t)
	files := redistest.NewTLSFiles(t)
	srv := deployRedisServer(t, t.TempDir(), deployPort(t), &files)
	creds := newFleetCreds(t, bin)
	on := func(name, url string, more ...string) replica {
		return replica{name: name, ip: "127.0.0.25", redis: map[string]string{"SNOWTOKEN_REDIS_URL": url}, env: more}
	}
	f := fleet{bin, creds}
	tlsURL := "rediss://" + deployACLUser + ":" + deployACLPassword + "@" + srv.addr + "/0"
	deployRefused(t, f, on("snowtoken on TLS without the CA", tlsURL), "certificate signed by unknown authority")
	deployRefused(t, f, on("snowtoken on TLS without TLS", "redis://:"+deployPassword+"@"+srv.addr+"/0"), "")

	p := f.start(t, on("snowtoken on TLS", tlsURL, "SNOWTOKEN_REDIS_TLS_CA_FILE", files.CA))
	if w := p.worker(t); w != 25 {
		t.Fatalf("worker %d, want 25", w)
	}
	sc := redis.NewClient(&redis.Options{Addr: srv.addr, Password: deployPassword, TLSConfig: files.ClientConfig(t)})
	t.Cleanup(func() { sc.Close() })
	deployExercise(t, p, creds, 25, deploySubjects[:1], func(s string, tok fleetToken) {
		key := redisstore.DefaultKeyPrefix + "{" + s + "}:" + tok.TokenID.String()
		if n, err := sc.Exists(t.Context(), key).Result(); err != nil || n != 1 {
			t.Fatalf("session key %s on the TLS server: exists %d, %v", key, n, err)
		}
	})
	deployNoSecrets(t, p)
}

// deployValidateStatus validates a token at p and returns the status, without
// failing the test: for goroutines other than the test's.
func deployValidateStatus(p *issuer, tok fleetToken) (int, error) {
	req, err := http.NewRequest(http.MethodGet, p.url("/token/validate"), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// TestRedisSentinelFailoverLosesWrites: a Sentinel failover that loses
// writes the master acknowledged. The master drops its
// replica's link (a frozen replica overruns the master's output buffer
// limit for it), then acknowledges a token's and a subject's revocation
// that the replica never gets, and dies; the sentinels promote the
// replica. snowtoken, following the revocation log, finds the log set back
// on the new master, writes the lost revocations again and moves to a new
// epoch: the revoked tokens stay refused, a live one still validates.
func TestRedisSentinelFailoverLosesWrites(t *testing.T) {
	deployNeeds(t, "redis-server")
	bin := fleetBinary(t)
	ctx := t.Context()
	sn := startSentinel(t, t.TempDir())
	mc := redis.NewClient(&redis.Options{Addr: sn.master.addr, Password: deployPassword})
	t.Cleanup(func() { mc.Close() })

	creds := newFleetCreds(t, bin)
	p := fleet{bin, creds}.start(t, replica{name: "snowtoken on sentinel", ip: "127.0.0.25", redis: map[string]string{
		"SNOWTOKEN_REDIS_SENTINEL_MASTER":        deploySentinelName,
		"SNOWTOKEN_REDIS_SENTINEL_ADDRS":         strings.Join(sn.addrs, ","),
		"SNOWTOKEN_REDIS_PASSWORD_FILE":          deploySecretFile(t, deployPassword),
		"SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE": deploySecretFile(t, deploySentinelPassword),
	}})
	live := p.issue(t, creds.svc, "grace")
	revoked := p.issue(t, creds.svc, "grace")
	subjectRevoked := p.issue(t, creds.svc, "heidi")
	p.mustValidate(t, live, 25)
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 on the master: %d, %v", n, err) // the tokens themselves survive
	}

	// The master lets go of its replica: frozen, the replica reads nothing,
	// and 8 MiB more than the 1 MiB the master may hold for it ends the link.
	if err := mc.ConfigSet(ctx, "client-output-buffer-limit", "replica 1048576 1048576 0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := sn.replica.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			sn.replica.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	junk := strings.Repeat("x", 1<<20)
	deployWait(t, "the master drops its frozen replica", func() error {
		if err := mc.Set(ctx, "deploy:junk", junk, 0).Err(); err != nil {
			return err
		}
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "connected_slaves:0") {
			err = errors.New("the replica is still connected")
		}
		return err
	})

	// Acknowledged by the master alone.
	if status := p.revoke(t, creds.svc, revoked); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d", status)
	}
	if status := p.revokeSubject(t, creds.admin, "heidi"); status != http.StatusNoContent {
		t.Fatalf("DELETE /subjects/heidi/tokens: %d", status)
	}
	p.mustReject(t, revoked, "revoked on the master")
	p.mustReject(t, subjectRevoked, "of a subject revoked on the master")

	killed := time.Now()
	sn.master.kill()
	if err := sn.replica.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen = false
	deployWait(t, "sentinels promote the replica", func() error {
		addr, err := sn.scs[0].GetMasterAddrByName(ctx, deploySentinelName).Result()
		if err == nil && strings.Join(addr, ":") != sn.replica.addr {
			err = fmt.Errorf("master is %v, want the replica %s", addr, sn.replica.addr)
		}
		return err
	})
	// The promoted replica never had the revocations: the revoked token's
	// record, which the revocation deleted on the old master, is still
	// there. (Its log may already hold the revocations again: snowtoken's
	// follower writes them as soon as it finds them lost.)
	record := redisstore.DefaultKeyPrefix + "{grace}:" + revoked.TokenID.String()
	if n, err := sn.rc.Exists(ctx, record).Result(); err != nil || n != 1 {
		t.Fatalf("the revoked token's record %s on the promoted replica: exists %d, %v; want it there (the revocation lost)", record, n, err)
	}

	rec := p.waitLog(t, "revocations the revocation log lost written again")
	t.Logf("master killed; the lost revocations written again after %v (%v)", time.Since(killed).Round(time.Millisecond), rec["events"])
	entries, err := sn.rc.XRange(ctx, redisstore.DefaultKeyPrefix+"{revlog}", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	relogged := map[string]bool{}
	for _, e := range entries {
		relogged[fmt.Sprint(e.Values["k"], ":", e.Values["i"])] = true
	}
	for _, want := range []string{"t:" + revoked.TokenID.String(), "s:heidi"} {
		if !relogged[want] {
			t.Errorf("the new master's revocation log %v lacks %s, which the old master lost", entries, want)
		}
	}
	p.mustReject(t, revoked, "revoked on the master lost in the failover")
	p.mustReject(t, subjectRevoked, "of a subject revoked on the master lost in the failover")
	deployWait(t, "snowtoken issues on the promoted replica", func() error {
		if status, _, _, body := p.tryIssue(t, creds.svc, ""); status != http.StatusOK {
			return fmt.Errorf("POST /token: %d %s", status, body)
		}
		return nil
	})
	p.mustValidate(t, live, 25)
}
