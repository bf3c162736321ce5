package e2e

// The tests in this file run the real snowtoken binary as separate processes,
// the way replicas run behind a load balancer: one Redis, one signing key and
// one clients file, each replica with its own address and worker ID.
// SNOWTOKEN_WORKER_IP=127.0.0.11 gives worker 11; Linux routes all of 127/8
// to the loopback interface, so the replica can listen on that address too.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/internal/timingtest"
	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

const (
	// fleetWait bounds every wait on a process or a Redis; it is a deadline
	// for a hung test, never a timing the test depends on.
	fleetWait = 30 * time.Second
	// fleetIssuer is the SNOWTOKEN_ISSUER of every process of a test.
	fleetIssuer = "https://snowtoken.test"
	// fleetLeaseTTL is the SNOWTOKEN_WORKER_LEASE_TTL of every process: a
	// renewal every second.
	fleetLeaseTTL   = 3 * time.Second
	fleetRenewEvery = fleetLeaseTTL / 3
)

var fleetBuild struct {
	once sync.Once
	path string
	err  error
}

// fleetBinary builds the snowtoken binary once per test run and returns its
// path. It goes to a directory of the temp dir named after this checkout, so
// that each run replaces the last build instead of leaving another copy.
func fleetBinary(tb testing.TB) string {
	tb.Helper()
	fleetBuild.once.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			fleetBuild.err = err
			return
		}
		sum := sha256.Sum256([]byte(wd))
		dir := filepath.Join(os.TempDir(), "snowtoken-e2e-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fleetBuild.err = err
			return
		}
		f, err := os.CreateTemp(dir, "build-*")
		if err != nil {
			fleetBuild.err = err
			return
		}
		f.Close()
		build := exec.Command("go", "build", "-o", f.Name(), ".")
		build.Dir = ".." // the repository root: package main
		if out, err := build.CombinedOutput(); err != nil {
			os.Remove(f.Name())
			fleetBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		path := filepath.Join(dir, "snowtoken")
		if err := os.Rename(f.Name(), path); err != nil {
			fleetBuild.err = err
			return
		}
		fleetBuild.path = path
	})
	if fleetBuild.err != nil {
		tb.Fatalf("building snowtoken: %v", fleetBuild.err)
	}
	return fleetBuild.path
}

// fleetRedis returns the URL of a Redis that only this test's processes use,
// and a client on it: a redis-server of the test's own or, without the
// binary, a free database of the Redis SNOWTOKEN_TEST_REDIS_URL names (the
// program's keys have fixed names, so a key prefix cannot keep tests apart).
// It skips the test when there is neither.
func fleetRedis(tb testing.TB) (string, *redis.Client) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err == nil {
		s := redistest.NewServer(tb)
		return s.URL(), s.Client()
	}
	if !redistest.Real() {
		tb.Skipf("needs redis-server on PATH or %s (Debian: apt-get install redis-server)", redistest.EnvURL)
	}
	u, err := url.Parse(os.Getenv(redistest.EnvURL))
	if err != nil {
		tb.Fatalf("%s: %v", redistest.EnvURL, err)
	}
	ctx := tb.Context()
	owner := rand.Text()
	for db := 15; db >= 1; db-- {
		u.Path = "/" + strconv.Itoa(db)
		opt, err := redis.ParseURL(u.String())
		if err != nil {
			tb.Fatalf("%s: %v", redistest.EnvURL, err)
		}
		rdb := redis.NewClient(opt)
		const lock = "snowtoken-e2e:lock"
		ok, err := rdb.SetNX(ctx, lock, owner, 15*time.Minute).Result()
		if err != nil {
			rdb.Close()
			tb.Fatalf("%s: %v", redistest.EnvURL, err)
		}
		if n, _ := rdb.DBSize(ctx).Result(); !ok || n != 1 {
			if ok {
				rdb.Del(ctx, lock)
			}
			rdb.Close()
			continue
		}
		tb.Cleanup(func() { // after the processes are killed; tb.Context is done by then
			rdb.FlushDB(context.Background())
			rdb.Close()
		})
		return u.String(), rdb
	}
	tb.Fatalf("%s: no empty database among 1 to 15 for the program's fixed keys", redistest.EnvURL)
	return "", nil
}

// fleetAddr returns a free host:port on ip.
func fleetAddr(tb testing.TB, ip string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		tb.Fatalf("listening on %s (Linux routes all of 127/8 to loopback): %v", ip, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fleetClient is a client of the clients file and its secret.
type fleetClient struct{ id, secret string }

// fleetCreds are a signing key and a clients file made with the binary's own
// `keys new` and `client new`, shared by every process of a test: svc may set
// the subject, admin may revoke a subject's tokens.
type fleetCreds struct {
	keyPath, clientsPath string
	svc, admin           fleetClient
	opaque               fleetClient // svc's rights, token_format opaque
}

func newFleetCreds(tb testing.TB, bin string) fleetCreds {
	tb.Helper()
	dir := tb.TempDir()
	c := fleetCreds{keyPath: filepath.Join(dir, "signing.pem"), clientsPath: filepath.Join(dir, "clients.json")}
	fleetCommand(tb, bin, "keys", "new", "-out", c.keyPath)
	secretRE := regexp.MustCompile(`(?m)^client_secret:\s*(\S+)$`)
	var entries []string
	for _, n := range []struct {
		client *fleetClient
		args   []string
	}{
		{&c.svc, []string{"-id", "svc", "-scopes", "read,write", "-may-set-subject"}},
		{&c.admin, []string{"-id", "admin", "-scopes", "read", "-admin"}},
		{&c.opaque, []string{"-id", "opaque", "-scopes", "read,write", "-may-set-subject"}},
	} {
		out := fleetCommand(tb, bin, append([]string{"client", "new"}, n.args...)...)
		m := secretRE.FindStringSubmatch(out)
		_, entry, ok := strings.Cut(out, "clients-file entry:\n")
		if m == nil || !ok {
			tb.Fatalf("client new %v printed no secret or no entry:\n%s", n.args, out)
		}
		*n.client = fleetClient{id: n.args[1], secret: m[1]}
		entries = append(entries, strings.TrimSpace(entry))
	}
	entries[2] = strings.Replace(entries[2], "{", `{"token_format": "opaque",`, 1)
	file := `{"clients": [` + strings.Join(entries, ",\n") + `]}`
	if err := os.WriteFile(c.clientsPath, []byte(file), 0o600); err != nil {
		tb.Fatal(err)
	}
	return c
}

// env is a production configuration on addr with worker IP workerIP; redis
// holds the SNOWTOKEN_REDIS_* variables, more any others as name, value pairs.
func (c fleetCreds) env(redis map[string]string, addr, workerIP string, more ...string) map[string]string {
	env := map[string]string{
		"SNOWTOKEN_ENV":              "production",
		"SNOWTOKEN_ADDR":             addr,
		"SNOWTOKEN_SIGNING_KEYS":     c.keyPath,
		"SNOWTOKEN_CLIENTS_FILE":     c.clientsPath,
		"SNOWTOKEN_ISSUER":           fleetIssuer,
		"SNOWTOKEN_WORKER_IP":        workerIP,
		"SNOWTOKEN_WORKER_LEASE_TTL": fleetLeaseTTL.String(),
	}
	for k, v := range redis {
		env[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// fleetCommand runs the binary to its end and returns its output.
func fleetCommand(tb testing.TB, bin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("snowtoken %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// fleetIDTime returns the millisecond an ID of the default layout was issued in.
func fleetIDTime(id snowflakealg.ID) time.Time {
	return id.Time(bitsalloc.Default(), snowflakealg.DefaultEpoch)
}

// fleetIDWorker is the worker ID in an ID of the default layout.
func fleetIDWorker(id snowflakealg.ID) int64 {
	return id.Worker(bitsalloc.Default())
}

// workerKeys returns worker id's lease key and high-water key.
func workerKeys(id int64) (leaseKey, hwKey string) {
	leaseKey = lease.DefaultKeyPrefix + "{" + strconv.FormatInt(id, 10) + "}"
	return leaseKey, leaseKey + ":hw"
}

// startFleet starts three replicas on redisURL with worker IPs 127.0.0.11,
// .12 and .13, listening on those addresses.
func startFleet(tb testing.TB, bin string, creds fleetCreds, redisURL string) []*issuer {
	tb.Helper()
	var reps []*issuer
	for w := 11; w <= 13; w++ {
		reps = append(reps, fleet{bin, creds}.start(tb, replica{name: fmt.Sprintf("replica %d", w), ip: fmt.Sprintf("127.0.0.%d", w),
			redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}}))
	}
	return reps
}

// TestReplicasShareSessions runs three replicas on one Redis: each leases the
// worker of its IP, a token of any replica validates at every replica, and a
// revocation at one is seen by all at once.
func TestReplicasShareSessions(t *testing.T) {
	redisURL, _ := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	reps := startFleet(t, bin, creds, redisURL)

	toks := make([]fleetToken, len(reps))
	for i, p := range reps {
		want := int64(11 + i)
		if got := p.worker(t); got != want {
			t.Fatalf("%s logged worker %d, want %d", p.name, got, want)
		}
		toks[i] = p.issue(t, creds.svc, "")
		if got := reps[(i+1)%3].decodeWorker(t, toks[i].TokenID); got != want {
			t.Fatalf("token %d of %s decodes to worker %d, want %d", toks[i].TokenID, p.name, got, want)
		}
	}
	for i, tok := range toks {
		for _, p := range reps {
			p.mustValidate(t, tok, int64(11+i))
		}
	}

	// RFC 7009 revocation at one replica, by the client the token belongs to.
	tok := reps[0].issue(t, creds.svc, "")
	for _, p := range reps {
		p.mustValidate(t, tok, 11)
	}
	if status := reps[1].revoke(t, creds.svc, tok); status != http.StatusOK {
		t.Fatalf("POST /token/revoke at %s: %d, want 200", reps[1].name, status)
	}
	for _, p := range reps {
		p.mustReject(t, tok, "right after its revocation at "+reps[1].name)
	}

	// Every token of a subject, revoked by an admin at one replica.
	var alice []fleetToken
	for _, p := range reps {
		alice = append(alice, p.issue(t, creds.svc, "alice"))
	}
	bob := reps[0].issue(t, creds.svc, "bob")
	for i, tok := range alice {
		reps[(i+1)%3].mustValidate(t, tok, int64(11+i))
	}
	if status := reps[0].revokeSubject(t, creds.svc, "alice"); status != http.StatusForbidden {
		t.Fatalf("DELETE /subjects/alice/tokens by a client that is not an admin: %d, want 403", status)
	}
	reps[1].mustValidate(t, alice[0], 11)
	if status := reps[2].revokeSubject(t, creds.admin, "alice"); status != http.StatusNoContent {
		t.Fatalf("DELETE /subjects/alice/tokens at %s: %d, want 204", reps[2].name, status)
	}
	for _, tok := range alice {
		for _, p := range reps {
			p.mustReject(t, tok, "right after alice's tokens were revoked at "+reps[2].name)
		}
	}
	for _, p := range reps {
		p.mustValidate(t, bob, 11)
	}
	fresh := reps[1].issue(t, creds.svc, "alice")
	for _, p := range reps {
		p.mustValidate(t, fresh, 12)
	}
}

// TestReplicasIssueUniqueIDsUnderLoad issues 3 × 100,000 tokens concurrently
// across three replicas and requires every token ID to be different.
func TestReplicasIssueUniqueIDsUnderLoad(t *testing.T) {
	const (
		perReplica = 100_000
		conns      = 32 // concurrent keep-alive HTTP connections, spread over the replicas
	)
	redisURL, rdb := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	reps := startFleet(t, bin, creds, redisURL)

	var left [3]atomic.Int64
	for i := range left {
		left[i].Store(perReplica)
	}
	var (
		wg       sync.WaitGroup
		retries  atomic.Int64
		failed   atomic.Bool
		firstErr error
		errOnce  sync.Once
	)
	ids := make([][]snowflakealg.ID, conns)
	start := time.Now()
	for c := range conns {
		r := c % len(reps)
		wg.Go(func() {
			conn := newFleetConn(reps[r].addr, creds.svc)
			defer conn.close()
			mine := make([]snowflakealg.ID, 0, perReplica/(conns/len(reps)))
			defer func() { ids[c] = mine }()
			for !failed.Load() && left[r].Add(-1) >= 0 {
				for attempt := 0; ; attempt++ {
					id, err := conn.issue()
					if err == nil {
						mine = append(mine, id)
						break
					}
					if errors.Is(err, errFleetRetry) && attempt < 100 {
						retries.Add(1)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", reps[r].name, err) })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		t.Fatal(firstErr)
	}

	all := slices.Concat(ids...)
	perWorker := map[int64]int{}
	for _, id := range all {
		perWorker[id.Worker(bitsalloc.Default())]++
	}
	slices.Sort(all)
	dups := 0
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups++
		}
	}
	t.Logf("%d tokens across %d replicas by %d keep-alive connections in %v: %.0f tokens/s; per worker %v; duplicate IDs %d; 503 retries %d",
		len(all), len(reps), conns, elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), perWorker, dups, retries.Load())
	if want := perReplica * len(reps); len(all) != want {
		t.Fatalf("issued %d tokens, want %d", len(all), want)
	}
	if dups != 0 {
		t.Fatalf("%d duplicate token IDs among %d", dups, len(all))
	}
	for w := int64(11); w <= 13; w++ {
		if perWorker[w] != perReplica {
			t.Errorf("worker %d issued %d tokens, want %d (per worker: %v)", w, perWorker[w], perReplica, perWorker)
		}
	}
	// Nothing is returned unless its session is stored: one key per token.
	if n, err := rdb.DBSize(t.Context()).Result(); err != nil || n < int64(len(all)) {
		t.Errorf("Redis holds %d keys (%v), want at least one session per token, %d", n, err, len(all))
	}
}

// errFleetRetry is a 503: the replica asks to be asked again.
var errFleetRetry = errors.New("503 service unavailable")

// fleetConn is a bare HTTP/1.1 keep-alive connection that asks for tokens:
// under the race detector net/http's client costs more CPU than the replica
// it loads, and the load test shares two cores with three replicas.
type fleetConn struct {
	addr string
	req  []byte
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

func newFleetConn(addr string, c fleetClient) *fleetConn {
	return newFleetSubjectConn(addr, c, "")
}

// newFleetSubjectConn is newFleetConn for tokens of subject (c must be
// allowed to set it); "" is the client itself.
func newFleetSubjectConn(addr string, c fleetClient, subject string) *fleetConn {
	form := "grant_type=client_credentials"
	if subject != "" {
		form += "&subject=" + url.QueryEscape(subject)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.id) + ":" + url.QueryEscape(c.secret)))
	req := "POST /token HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Basic " + auth +
		"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " + strconv.Itoa(len(form)) + "\r\n\r\n" + form
	return &fleetConn{addr: addr, req: []byte(req), body: make([]byte, 0, 2048)}
}

func (f *fleetConn) close() {
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
}

// issue asks for one token and returns its ID; a 503 is errFleetRetry.
func (f *fleetConn) issue() (snowflakealg.ID, error) {
	if f.conn == nil {
		c, err := net.DialTimeout("tcp", f.addr, fleetWait)
		if err != nil {
			return 0, err
		}
		f.conn, f.r = c, bufio.NewReaderSize(c, 4096)
	}
	f.conn.SetDeadline(time.Now().Add(fleetWait))
	status, body, err := f.roundTrip()
	if err != nil {
		f.close()
		return 0, err
	}
	switch status {
	case http.StatusOK:
	case http.StatusServiceUnavailable:
		return 0, errFleetRetry
	default:
		return 0, fmt.Errorf("POST /token: %d %s", status, body)
	}
	const field = `"jti":"`
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		return 0, fmt.Errorf("POST /token: no jti in %s", body)
	}
	body = body[i+len(field):]
	j := bytes.IndexByte(body, '"')
	if j < 0 {
		return 0, fmt.Errorf("POST /token: unterminated jti")
	}
	return snowflakealg.ParseID(string(body[:j]))
}

// roundTrip writes the request and reads a response with a Content-Length.
func (f *fleetConn) roundTrip() (int, []byte, error) {
	if _, err := f.conn.Write(f.req); err != nil {
		return 0, nil, err
	}
	line, err := f.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	var proto string
	var status int
	if _, err := fmt.Sscanf(string(line), "%s %d", &proto, &status); err != nil {
		return 0, nil, fmt.Errorf("status line %q: %v", line, err)
	}
	length, keep := -1, true
	for {
		line, err := f.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		name, value, ok := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
		if !ok {
			break // the empty line after the headers
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, fmt.Errorf("Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		}
	}
	if length < 0 {
		return 0, nil, errors.New("response without Content-Length")
	}
	f.body = slices.Grow(f.body[:0], length)[:length]
	if _, err := io.ReadFull(f.r, f.body); err != nil {
		return 0, nil, err
	}
	if !keep {
		f.close()
	}
	return status, f.body, nil
}

// TestReplicaWorkerIDConflicts starts a replica whose worker IP is that of a
// running one: it takes another worker ID and says so, or, in strict mode,
// refuses to start.
func TestReplicaWorkerIDConflicts(t *testing.T) {
	redisURL, _ := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	rv := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}
	holder := fleet{bin, creds}.start(t, replica{name: "replica 11", ip: "127.0.0.11", redis: rv})
	if w := holder.worker(t); w != 11 {
		t.Fatalf("%s has worker %d, want 11", holder.name, w)
	}

	second := fleet{bin, creds}.start(t, replica{name: "second replica on 127.0.0.11", ip: "127.0.0.11", listen: "127.0.0.14", redis: rv})
	rec := second.waitLog(t, "lease: candidate worker id is held, took the lowest free one")
	got, _ := rec["worker_id"].(float64)
	if rec["level"] != "WARN" || rec["candidate"] != float64(11) || got == 11 {
		t.Fatalf("%s logged %v; want a warning with candidate 11 and another worker", second.name, rec)
	}
	if w := second.worker(t); w != int64(got) {
		t.Fatalf("%s listens as worker %d, but its lease log says %v", second.name, w, got)
	}
	tok := second.issue(t, creds.svc, "")
	holder.mustValidate(t, tok, int64(got))
	holder.mustValidate(t, holder.issue(t, creds.svc, ""), 11)

	strict := fleet{bin, creds}.launch(t, replica{name: "strict replica on 127.0.0.11", ip: "127.0.0.11", listen: "127.0.0.15", redis: rv, env: []string{"SNOWTOKEN_WORKER_ID_STRICT", "true"}})
	err := strict.exited(t)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("strict replica with a held worker IP exited with %v, want a non-zero exit", err)
	}
	out := strict.out.String()
	for _, want := range []string{"SNOWTOKEN_WORKER_ID_STRICT=true", lease.ErrCandidateTaken.Error(), "worker 11"} {
		if !strings.Contains(out, want) {
			t.Errorf("strict replica's output does not name %q:\n%s", want, out)
		}
	}
	if strict.findLog("listening") != nil {
		t.Errorf("strict replica listened before it refused:\n%s", out)
	}
	holder.mustValidate(t, holder.issue(t, creds.svc, ""), 11)
}

// TestReplicaLeaseLostAndRegained deletes a replica's lease key in Redis: it
// answers POST /token with 503 within one renewal interval, and 200 again once
// it has claimed its worker back.
func TestReplicaLeaseLostAndRegained(t *testing.T) {
	redisURL, rdb := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	reps := startFleet(t, bin, creds, redisURL)
	p := reps[0]
	last := p.issue(t, creds.svc, "")
	leaseKey, _ := workerKeys(11)
	ctx := t.Context()

	if n, err := rdb.Del(ctx, leaseKey).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s: %d, %v; want 1", leaseKey, n, err)
	}
	deleted := time.Now()
	limit := fleetRenewEvery + time.Second // a renewal, plus slack for a busy machine; the TTL is 3s
	var lostAfter time.Duration
	for {
		status, h, tok, body := p.tryIssue(t, creds.svc, "")
		if status == http.StatusServiceUnavailable {
			lostAfter = time.Since(deleted)
			if h.Get("Retry-After") == "" || !bytes.Contains(body, []byte(`"temporarily_unavailable"`)) {
				t.Errorf("503 without Retry-After or temporarily_unavailable: %v %s", h, body)
			}
			break
		}
		if status != http.StatusOK {
			t.Fatalf("POST /token with the lease key gone: %d %s, want 200 or 503", status, body)
		}
		if tok.TokenID <= last.TokenID {
			t.Fatalf("token ID %d after %d", tok.TokenID, last.TokenID)
		}
		last = tok
		if since := time.Since(deleted); since > timingtest.HangFactor*limit {
			t.Fatalf("%s still issues %v after its lease key was deleted; renewals run every %v", p.name, since, fleetRenewEvery)
		}
		time.Sleep(5 * time.Millisecond)
	}
	timingtest.Within(t, p.name+" issuing after its lease key was deleted", lostAfter, limit)
	// The other replicas are not disturbed.
	reps[1].mustValidate(t, reps[1].issue(t, creds.svc, ""), 12)

	deadline := time.Now().Add(fleetWait)
	var tok fleetToken
	for {
		status, _, tk, body := p.tryIssue(t, creds.svc, "")
		if status == http.StatusOK {
			tok = tk
			break
		}
		if status != http.StatusServiceUnavailable {
			t.Fatalf("POST /token while the lease is lost: %d %s, want 503", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not issue again within %v", p.name, fleetWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	backAfter := time.Since(deleted)
	if tok.TokenID <= last.TokenID || fleetIDTime(tok.TokenID).Before(fleetIDTime(last.TokenID)) {
		t.Fatalf("first token after the re-claim %d is not after the last before %d", tok.TokenID, last.TokenID)
	}
	reps[2].mustValidate(t, tok, 11)
	if owner, err := rdb.Get(ctx, leaseKey).Result(); err != nil || len(owner) != 32 {
		t.Fatalf("lease key after the re-claim: %q, %v", owner, err)
	}
	for _, msg := range []string{"lease: lost worker id", "lease: claimed lost worker id again"} {
		if p.findLog(msg) == nil {
			t.Errorf("%s did not log %q", p.name, msg)
		}
	}
	t.Logf("lease key deleted: 503 after %v, 200 again after %v", lostAfter.Round(time.Millisecond), backAfter.Round(time.Millisecond))
}

// TestReplicaShutdownReleasesLease sends SIGTERM to a replica under load: it
// finishes, saves a mark covering every ID it issued and frees its worker; a
// replica started again on that worker issues only above the mark.
func TestReplicaShutdownReleasesLease(t *testing.T) {
	redisURL, rdb := fleetRedis(t)
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	rv := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}
	p := fleet{bin, creds}.start(t, replica{name: "replica 13", ip: "127.0.0.13", redis: rv})
	if w := p.worker(t); w != 13 {
		t.Fatalf("%s has worker %d, want 13", p.name, w)
	}

	// Load that runs into the shutdown: every token answered with 200 counts.
	var (
		stop      atomic.Bool
		signalled atomic.Bool
		issued    atomic.Int64
		maxID     atomic.Int64
		badErr    atomic.Pointer[error]
		wg        sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			conn := newFleetConn(p.addr, creds.svc)
			defer conn.close()
			for !stop.Load() {
				id, err := conn.issue()
				if err != nil {
					if !signalled.Load() {
						badErr.CompareAndSwap(nil, &err)
						return
					}
					continue
				}
				issued.Add(1)
				for {
					old := maxID.Load()
					if int64(id) <= old || maxID.CompareAndSwap(old, int64(id)) {
						break
					}
				}
			}
		})
	}
	for issued.Load() < 500 && badErr.Load() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	signalled.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitErr := p.exited(t)
	stop.Store(true)
	wg.Wait()
	if e := badErr.Load(); e != nil {
		t.Fatalf("POST /token before SIGTERM: %v", *e)
	}
	if exitErr != nil {
		t.Fatalf("%s exited with %v after SIGTERM, want 0", p.name, exitErr)
	}
	if p.findLog("released the worker id lease") == nil || p.findLog("stopped") == nil {
		t.Fatalf("%s did not log that it released its lease and stopped", p.name)
	}

	ctx := t.Context()
	leaseKey, hwKey := workerKeys(13)
	if n, err := rdb.Exists(ctx, leaseKey).Result(); err != nil || n != 0 {
		t.Fatalf("lease key %s after SIGTERM: exists %d, %v; want it gone", leaseKey, n, err)
	}
	hw, err := rdb.HGetAll(ctx, hwKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	mark, err := strconv.ParseInt(hw["ms"], 10, 64)
	lastMs := fleetIDTime(snowflakealg.ID(maxID.Load())).UnixMilli()
	if err != nil || mark < lastMs {
		t.Fatalf("saved mark %v after SIGTERM, want at least the last issued ID's %d (of %d tokens)", hw, lastMs, issued.Load())
	}
	if _, ok := hw["until"]; ok {
		t.Errorf("high-water hash after a clean release still has an until: %v", hw)
	}
	t.Logf("%d tokens issued into the shutdown; saved mark %d ms, last ID at %d ms", issued.Load(), mark, lastMs)

	// Another holder's clock ran 1.5 s ahead: its mark is ahead of ours.
	ahead := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	if err := rdb.HSet(ctx, hwKey, "ms", ahead).Err(); err != nil {
		t.Fatal(err)
	}
	q := fleet{bin, creds}.start(t, replica{name: "replica 13 again", ip: "127.0.0.13", redis: rv})
	if w := q.worker(t); w != 13 {
		t.Fatalf("%s has worker %d, want 13", q.name, w)
	}
	deadline := time.Now().Add(fleetWait)
	unavailable := 0
	for {
		status, _, tok, body := q.tryIssue(t, creds.svc, "")
		if status == http.StatusOK {
			if got := fleetIDTime(tok.TokenID).UnixMilli(); got <= ahead {
				t.Fatalf("first ID of the restarted replica is at %d ms, not above the saved mark %d ms", got, ahead)
			}
			if w := q.decodeWorker(t, tok.TokenID); w != 13 {
				t.Fatalf("first ID of the restarted replica has worker %d, want 13", w)
			}
			break
		}
		if status != http.StatusServiceUnavailable {
			t.Fatalf("POST /token behind the mark: %d %s, want 503 or 200", status, body)
		}
		unavailable++
		if time.Now().After(deadline) {
			t.Fatalf("restarted replica did not issue within %v", fleetWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("restarted replica answered 503 %d times while its clock was behind the mark", unavailable)
}
