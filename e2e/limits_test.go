package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/cmd/server"
)

// TestMetricsListener: /metrics is served on SNOWTOKEN_METRICS_ADDR, not on
// the API's port, and not at all with SNOWTOKEN_METRICS_ADDR=off; with
// SNOWTOKEN_PPROF=true, so are Go's profiles.
func TestMetricsListener(t *testing.T) {
	p := startProgram(t, devEnvVars())
	tok := p.issueForm(t, p.dev, url.Values{})
	if status, body := p.validateRaw(t, tok); status != http.StatusOK {
		t.Fatalf("validate: %d %s", status, body)
	}
	get := func(target string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		status, body := doRequest(t, req)
		return status, string(body)
	}
	if status, body := get(p.url("/metrics")); status != http.StatusNotFound {
		t.Errorf("GET /metrics on the API port: %d, want 404\n%.300s", status, body)
	}
	if p.metricsAddr == "" || p.metricsAddr == p.addr {
		t.Fatalf("metrics_addr %q, want a listener apart from the API's %s", p.metricsAddr, p.addr)
	}
	status, body := get("http://" + p.metricsAddr + "/metrics")
	if status != http.StatusOK || !strings.Contains(body, `snowtoken_tokens_issued_total{format="jwt"} 1`+"\n") ||
		!strings.Contains(body, `snowtoken_validations_total{format="jwt",outcome="valid"} 1`+"\n") {
		t.Errorf("GET /metrics on the metrics listener: %d, want 200 with the counts of one issue and one validation\n%s", status, body)
	}
	head, err := http.NewRequest(http.MethodHead, "http://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := doRequest(t, head); status != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD /metrics on the metrics listener: %d with %d bytes, want 200 without a body (RFC 9110 §9.3.2)", status, len(body))
	}
	if status, _ := get("http://" + p.metricsAddr + "/token/validate"); status != http.StatusNotFound {
		t.Errorf("GET /token/validate on the metrics listener: %d, want 404", status)
	}
	if status, _ := get("http://" + p.metricsAddr + "/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ without SNOWTOKEN_PPROF: %d, want 404", status)
	}

	// SNOWTOKEN_PPROF=true: the profiles on the metrics listener, never on the API's port.
	env := devEnvVars()
	env["SNOWTOKEN_PPROF"] = "true"
	q := startProgram(t, env)
	if status, body := get("http://" + q.metricsAddr + "/debug/pprof/heap?debug=1"); status != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("SNOWTOKEN_PPROF=true: GET /debug/pprof/heap on the metrics listener: %d, want 200 with a heap profile\n%.300s", status, body)
	}
	if status, _ := get(q.url("/debug/pprof/")); status != http.StatusNotFound {
		t.Errorf("SNOWTOKEN_PPROF=true: GET /debug/pprof/ on the API port: %d, want 404", status)
	}

	env = devEnvVars()
	env["SNOWTOKEN_METRICS_ADDR"] = "off"
	if q := startProgram(t, env); q.metricsAddr != "off" {
		t.Errorf("SNOWTOKEN_METRICS_ADDR=off: metrics_addr %q, want off", q.metricsAddr)
	}
}

// rawTokenRequest is POST /token for c, as written on the wire, on a
// connection the server closes after answering.
func rawTokenRequest(c fleetClient) string {
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	req, _ := http.NewRequest(http.MethodPost, "http://issuer/token", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	req.Close = true
	var b strings.Builder
	if err := req.Write(&b); err != nil {
		panic(err)
	}
	return b.String()
}

// holdConns opens n connections to addr that never send a byte, as a
// hostile client holding them would, and closes them when tb ends.
func holdConns(tb testing.TB, addr string, n int) []net.Conn {
	tb.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, fleetWait)
		if err != nil {
			tb.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		tb.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns
}

// wantToken reads the answer to rawTokenRequest from r, the reader of
// conn, and fails tb unless it is a 200 within a second; when says what
// happened just before.
func wantToken(tb testing.TB, conn net.Conn, r *bufio.Reader, when string) {
	tb.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		tb.Fatalf("%s: no answer within a second: %v", when, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Errorf("%s: POST /token %d, want 200", when, resp.StatusCode)
	}
}

// TestConnectionCap: with SNOWTOKEN_MAX_CONNS connections held open and
// silent, more wait in the kernel's backlog, among them a real client; once
// one held connection closes, that client is answered within a second.
func TestConnectionCap(t *testing.T) {
	const maxConns = 4
	p := startIssuer(t, issuerOpts{env: []string{"SNOWTOKEN_MAX_CONNS", strconv.Itoa(maxConns)}})
	creds := p.creds

	held := holdConns(t, p.addr, maxConns)
	client := holdConns(t, p.addr, 1)[0] // in the backlog, ahead of the next ones
	if _, err := client.Write([]byte(rawTokenRequest(creds.svc))); err != nil {
		t.Fatal(err)
	}
	holdConns(t, p.addr, 2*maxConns) // more than the cap, behind the client

	answer := bufio.NewReader(client)
	// While the cap is held the client is not answered. (Without a cap it
	// is at once; a slow machine can only make this pass, not fail.)
	client.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := answer.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("with %d connections held at a cap of %d, the client got an answer (%v), want it to wait", 3*maxConns, maxConns, err)
	}

	held[0].Close()
	wantToken(t, client, answer, "one held connection released")
	if strings.Contains(p.out.String(), "too many open files") {
		t.Errorf("the issuer ran out of file descriptors:\n%s", lastLines(p.out.String(), 20))
	}
}

// TestConnectionFlood runs the issuer with an open-file limit of 64 and its
// default connection cap, and opens many more connections than that: the
// issuer never runs out of file descriptors, and once the flood is gone a
// client gets a token at once.
func TestConnectionFlood(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux) to lower the issuer's open-file limit")
	}
	const fdLimit, flood = 64, 200
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	redisURL, _ := fleetRedis(t)
	p := fleet{bin, creds}.launch(t, replica{redis: map[string]string{"SNOWTOKEN_REDIS_URL": redisURL},
		wrap: []string{prlimit, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit)}})
	if got, want := p.waitLog(t, "listening")["max_conns"], float64(server.MaxConnsFor(fdLimit)); got != want {
		t.Errorf("max_conns %v with an open-file limit of %d, want %v", got, fdLimit, want)
	}
	waitReady(t, p.url("/readyz"), fleetWait)

	conns := holdConns(t, p.addr, flood)
	// A client behind the flood waits; the flood goes, and it is answered.
	client := holdConns(t, p.addr, 1)[0]
	if _, err := client.Write([]byte(rawTokenRequest(creds.svc))); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		c.Close()
	}
	wantToken(t, client, bufio.NewReader(client), "the flood released")
	if status, _, _, body := p.tryIssue(t, creds.svc, ""); status != http.StatusOK {
		t.Errorf("after the flood: POST /token %d %s, want 200", status, body)
	}
	if strings.Contains(p.out.String(), "too many open files") {
		t.Errorf("the issuer ran out of file descriptors:\n%s", lastLines(p.out.String(), 20))
	}
}

// TestConnectionCapClosesIdle: keep-alive connections left idle do not hold
// the cap: at the cap the issuer closes them, so a new client is answered
// at once instead of after their idle timeout (120 s).
func TestConnectionCapClosesIdle(t *testing.T) {
	const maxConns = 4
	p := startIssuer(t, issuerOpts{env: []string{"SNOWTOKEN_MAX_CONNS", strconv.Itoa(maxConns)}})
	creds := p.creds

	for i, c := range holdConns(t, p.addr, maxConns) {
		c.SetDeadline(time.Now().Add(fleetWait))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: issuer\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("keep-alive connection %d: %v", i+1, err)
		}
		resp.Body.Close()
	}

	client := holdConns(t, p.addr, 1)[0]
	if _, err := client.Write([]byte(rawTokenRequest(creds.svc))); err != nil {
		t.Fatal(err)
	}
	wantToken(t, client, bufio.NewReader(client), fmt.Sprintf("%d idle keep-alive connections at a cap of %d", maxConns, maxConns))
}
