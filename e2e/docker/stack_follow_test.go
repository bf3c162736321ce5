package docker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// followRequests is how many requests checkFollowConsumer sends
// consumer-follow while it counts the issuers' validations.
const followRequests = 200

// revokeToRefusal is the product's promise for a consumer that follows the
// revocation feed: a token revoked through the gateway is refused there
// within this time of the revocation request being sent.
const revokeToRefusal = 100 * time.Millisecond

// revokeTrials is how many revocations checkFollowConsumer times.
const revokeTrials = 3

// checkFollowConsumer: consumer-follow (client.Local with Follow) accepts a
// token through the gateway with no call to the issuer per request: the
// issuers' snowtoken_http_requests_total for /token/validate, read from
// every replica's metrics listener, does not move over followRequests
// requests to it, and moves for one request to /orders (auth_request), so
// the count can see a call. Then a token revoked through the gateway (POST
// /token/revoke, as its client would) is refused there within
// revokeToRefusal: the clock starts when the revocation request is sent, and
// stops when the first refusal (401) of a loop of requests to /follow/orders,
// running back to back since before it was sent, comes back.
func (s *stack) checkFollowConsumer(ctx context.Context, t *testing.T, g *gateway) {
	tok, err := g.tryIssue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The consumer answers 503 until its feed is fresh.
	deadline := time.Now().Add(time.Minute)
	for {
		status, body, err := g.follow(ctx, tok)
		if err == nil && status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer-follow did not accept a token in a minute: %d %s %v", status, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	before := s.issuerRequests(ctx, t)
	start := time.Now()
	for i := range followRequests {
		if status, body, err := g.follow(ctx, tok); err != nil || status != http.StatusOK {
			t.Fatalf("request %d to consumer-follow: %d %s %v, want 200", i, status, body, err)
		}
	}
	took := time.Since(start)
	after := s.issuerRequests(ctx, t)
	t.Logf("%d requests to consumer-follow through nginx in %v (%v each); the issuers' requests by route meanwhile: %v",
		followRequests, took.Round(time.Millisecond), (took / followRequests).Round(time.Microsecond), diffCounts(before, after))
	if d := after["/token/validate"] - before["/token/validate"]; d != 0 {
		t.Errorf("the issuers validated %v tokens over %d requests to consumer-follow, want none: it asks the issuer per request", d, followRequests)
	}
	if d := after["/token/introspect"] - before["/token/introspect"]; d != 0 {
		t.Errorf("the issuers answered %v introspections over %d requests to consumer-follow, want none", d, followRequests)
	}
	g.mustValidate(ctx, tok) // /orders: one auth_request
	if again := s.issuerRequests(ctx, t); again["/token/validate"] <= after["/token/validate"] {
		t.Errorf("one request to /orders (auth_request) moved the issuers' /token/validate count from %v to %v: the count sees no call, and proved nothing",
			after["/token/validate"], again["/token/validate"])
	}

	for trial := range revokeTrials {
		tok, err := g.tryIssue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if status, body, err := g.follow(ctx, tok); err != nil || status != http.StatusOK {
			t.Fatalf("consumer-follow with a new token: %d %s %v, want 200", status, body, err)
		}
		m := g.timeRevoke(ctx, t, tok)
		t.Logf("revocation %d through the gateway: refused at consumer-follow %v after the revoke request was sent, "+
			"%v after its 200 came back (the revoke took %v); the last request accepted was sent at %v from the revoke (negative: before it), "+
			"and %d more were sent from the revoke to the refusal",
			trial+1, m.refused.Round(100*time.Microsecond), (m.refused - m.revoked).Round(100*time.Microsecond),
			m.revoked.Round(100*time.Microsecond), m.lastAccepted.Round(100*time.Microsecond), m.requests)
		if m.refused > revokeToRefusal {
			t.Errorf("revocation %d: refused at consumer-follow %v after the revoke was sent, want within %v", trial+1, m.refused, revokeToRefusal)
		}
	}
}

// revokeTiming is what timeRevoke measured, each from when the revoke
// request was sent.
type revokeTiming struct {
	revoked      time.Duration // its 200 came back
	refused      time.Duration // the first 401 from consumer-follow came back
	lastAccepted time.Duration // the last 200 from consumer-follow was asked for
	requests     int           // accepted by consumer-follow, sent from the revoke to the first refusal
}

// timeRevoke revokes tok through the gateway (POST /token/revoke as its
// client, demo) while a loop sends consumer-follow requests with it back to
// back, and times the first refusal.
func (g *gateway) timeRevoke(ctx context.Context, t *testing.T, tok issued) revokeTiming {
	t.Helper()
	type answer struct {
		sent, back time.Time
		status     int
		err        error
	}
	answers := make(chan answer, 1<<16)
	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for loopCtx.Err() == nil {
			sent := time.Now()
			status, _, err := g.follow(loopCtx, tok)
			answers <- answer{sent, time.Now(), status, err}
			if status == http.StatusUnauthorized {
				return
			}
		}
	}()
	defer func() { stop(); <-done }()
	// The loop runs before the revocation is sent.
	first := <-answers
	if first.err != nil || first.status != http.StatusOK {
		t.Fatalf("consumer-follow before the revocation: %d %v, want 200", first.status, first.err)
	}

	form := url.Values{"token": {tok.AccessToken}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, stackGateway+"/token/revoke", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("demo", g.secret)
	sent := time.Now()
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Since(sent)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /token/revoke: %s %s", resp.Status, body)
	}

	m := revokeTiming{revoked: revoked}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case a := <-answers:
			switch {
			case a.err != nil:
				t.Fatalf("consumer-follow after the revocation: %v", a.err)
			case a.status == http.StatusOK:
				m.lastAccepted = a.sent.Sub(sent)
			case a.status == http.StatusUnauthorized:
				m.refused = a.back.Sub(sent)
				return m
			default:
				t.Fatalf("consumer-follow after the revocation answered %d, want 200 until it refuses the token with 401", a.status)
			}
			if !a.sent.Before(sent) {
				m.requests++
			}
		case <-timeout:
			t.Fatal("consumer-follow still accepts the revoked token 5 s after the revocation")
		}
	}
}

// follow sends GET /follow/orders (consumer-follow) through nginx with tok.
func (g *gateway) follow(ctx context.Context, tok issued) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, stackGateway+"/follow/orders", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body), err
}

// issuerRequests sums snowtoken_http_requests_total by route over every
// running issuer replica, read from its metrics listener (:9090, on the
// backend network) from inside the nginx container, which is on it.
func (s *stack) issuerRequests(ctx context.Context, t *testing.T) map[string]float64 {
	t.Helper()
	nginx := s.running(ctx, "nginx")
	if len(nginx) != 1 {
		t.Fatalf("%d nginx containers running, want 1", len(nginx))
	}
	out := map[string]float64{}
	for _, addr := range s.issuers(ctx) {
		text := s.run(ctx, time.Minute, "docker", "exec", nginx[0], "wget", "-q", "-O", "-", "http://"+addr.String()+":9090/metrics")
		counts, err := requestsByRoute(text)
		if err != nil {
			t.Fatalf("issuer %v's metrics: %v", addr, err)
		}
		for route, n := range counts {
			out[route] += n
		}
	}
	return out
}

// requestsByRoute sums the samples of snowtoken_http_requests_total in a
// Prometheus text exposition by their route label.
func requestsByRoute(text string) (map[string]float64, error) {
	const name = "snowtoken_http_requests_total{"
	out := map[string]float64{}
	seen := false
	for line := range strings.Lines(text) {
		labels, ok := strings.CutPrefix(strings.TrimSpace(line), name)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(labels, "} ")
		_, route, found := strings.Cut(labels, `route="`)
		route, _, closed := strings.Cut(route, `"`)
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || !found || !closed || err != nil {
			return nil, fmt.Errorf("unreadable sample %q", strings.TrimSpace(line))
		}
		out[route] += n
		seen = true
	}
	if !seen {
		return nil, fmt.Errorf("no %s samples", strings.TrimSuffix(name, "{"))
	}
	return out, nil
}

func TestRequestsByRoute(t *testing.T) {
	text := `# HELP snowtoken_http_requests_total HTTP requests by route and status.
# TYPE snowtoken_http_requests_total counter
snowtoken_http_requests_total{route="/token",status="200"} 3
snowtoken_http_requests_total{route="/token/validate",status="200"} 7
snowtoken_http_requests_total{route="/token/validate",status="401"} 2
snowtoken_http_request_duration_seconds_count{route="/token",status="200"} 3
`
	got, err := requestsByRoute(text)
	if err != nil || len(got) != 2 || got["/token"] != 3 || got["/token/validate"] != 9 {
		t.Errorf("requestsByRoute = %v, %v; want /token 3, /token/validate 9", got, err)
	}
	for _, bad := range []string{"", `snowtoken_http_requests_total{route="/token"} x`, `snowtoken_http_requests_total{status="200"} 1`} {
		if got, err := requestsByRoute(bad); err == nil {
			t.Errorf("requestsByRoute(%q) = %v, want an error", bad, got)
		}
	}
}

// diffCounts is after less before, the routes that moved.
func diffCounts(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for route, n := range after {
		if d := n - before[route]; d != 0 {
			out[route] = d
		}
	}
	return out
}
