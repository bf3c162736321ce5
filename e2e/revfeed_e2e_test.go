package e2e

// The tests in this file check the revocation feed (package revfeed,
// docs/api.md#revocation-feed) as the real issuer serves it: the binary,
// with the http.Server cmd/server builds (its read and write timeouts, its
// connection cap), its follower of a redis-server of the test's own, and
// live reloads of its clients file. The feed's own tests serve through
// httptest, which has neither timeouts nor a cap.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
)

// feedCutOff is how soon after a replica has loaded a change to the clients
// file that takes a client's right to the feed away its open streams and
// waiting polls must end: docs/security.md's "within about a second".
const feedCutOff = time.Second

// feedThreshold is the follower's threshold of a feed test's issuer: 2 s,
// so that a loaded machine does not make it stale (a poll's heartbeat comes
// only while it is fresh).
var feedThreshold = []string{"SNOWTOKEN_REVLOG_THRESHOLD", "2s"}

// editClients rewrites the clients file at path with edit applied to every
// client, as an operator edits it: a new file renamed over the old.
func editClients(tb testing.TB, path string, edit func(c map[string]any)) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var f struct {
		Clients []map[string]any `json:"clients"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		tb.Fatal(err)
	}
	for _, c := range f.Clients {
		edit(c)
	}
	if data, err = json.MarshalIndent(f, "", "  "); err != nil {
		tb.Fatal(err)
	}
	staged := path + ".new"
	if err := os.WriteFile(staged, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(staged, path); err != nil {
		tb.Fatal(err)
	}
}

// feedNonce is a request's nonce (22 to 128 base64url characters).
func feedNonce() string { return rand.Text() }

// feedLast returns the last event ID of p's revocation state, from its
// snapshot (GET /revocations) read as c: the position a stream or poll
// resumes from.
func feedLast(tb testing.TB, p *issuer, c fleetClient) string {
	tb.Helper()
	status, _, body := fleetCall(tb, http.MethodGet, p.url("/revocations?nonce="+feedNonce()), &c, "", nil)
	if status != http.StatusOK {
		tb.Fatalf("GET /revocations as %s: %d %s", c.id, status, body)
	}
	var cl revocation.SnapshotClaims
	if _, _, err := jwt.NewParser().ParseUnverified(string(body), &cl); err != nil || cl.Last == "" {
		tb.Fatalf("GET /revocations: %v, last %q", err, cl.Last)
	}
	return cl.Last
}

// feedStream is a stream of GET /revocations/events held open.
type feedStream struct {
	ended chan struct{} // closed when the stream ends
}

// openStream opens a stream as c from last, and reads it until it ends or
// tb does.
func openStream(tb testing.TB, p *issuer, c fleetClient, last string) *feedStream {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	req, err := newCall(http.MethodGet, p.url("/revocations/events?nonce="+feedNonce()), &c, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", last)
	resp, err := feedHTTP.Do(req.WithContext(ctx))
	if err != nil {
		tb.Fatalf("GET /revocations/events as %s: %v", c.id, err)
	}
	s := &feedStream{ended: make(chan struct{})}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tb.Fatalf("GET /revocations/events as %s: %d %s", c.id, resp.StatusCode, body)
	}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return s
}

// open reports whether the stream is still open.
func (s *feedStream) open() bool {
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// feedHTTP sends the feed's requests: no timeout (a stream and a poll are
// long by design; the tests bound their waits), and a connection of its
// own for each (no keep-alive), so that what a test holds is what it sees.
var feedHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// pollResult is the answer to a poll, or why there is none.
type pollResult struct {
	status int
	header http.Header
	body   []byte
	err    error
	after  time.Duration // since the poll was sent
}

// startPoll sends a poll as c that waits (returnImmediately false) from
// last; its answer comes on the returned channel. The poll ends with tb.
func startPoll(tb testing.TB, p *issuer, c fleetClient, last string) <-chan pollResult {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	body := fmt.Sprintf(`{"ack":[%q],"returnImmediately":false,"nonce":%q}`, last, feedNonce())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url("/revocations/poll"), strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	req.Header.Set("Content-Type", "application/json")
	out := make(chan pollResult, 1)
	go func() {
		sent := time.Now()
		resp, err := feedHTTP.Do(req)
		if err != nil {
			out <- pollResult{err: err, after: time.Since(sent)}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- pollResult{status: resp.StatusCode, header: resp.Header, body: b, err: err, after: time.Since(sent)}
	}()
	return out
}

// awaitPoll waits for a poll's answer, for at most wait.
func awaitPoll(tb testing.TB, res <-chan pollResult, wait time.Duration) (pollResult, bool) {
	tb.Helper()
	select {
	case r := <-res:
		return r, true
	case <-time.After(wait):
		return pollResult{}, false
	}
}

// code is the OAuth2 error code of a refusal.
func (r pollResult) code() string {
	var e struct{ Error string }
	_ = json.Unmarshal(r.body, &e)
	return e.Error
}

// wantPollsRefused waits until n of the polls whose answers come on results
// are answered, each with status, temporarily_unavailable and Retry-After;
// what names them.
func wantPollsRefused(tb testing.TB, results []<-chan pollResult, n, status int, what string) {
	tb.Helper()
	refused := 0
	deadline := time.After(fleetWait)
	for refused < n {
		for i, res := range results {
			select {
			case r := <-res:
				results[i] = nil
				refused++
				if r.err != nil || r.status != status || r.code() != "temporarily_unavailable" || r.header.Get("Retry-After") == "" {
					tb.Fatalf("%s: %d %s %v (after %v), want %d temporarily_unavailable with Retry-After", what, r.status, r.body, r.err, r.after, status)
				}
			case <-deadline:
				tb.Fatalf("%s: %d refused, want %d", what, refused, n)
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startFollower starts a Validator following p's revocation feed as c
// (client.Local, client.Follow), stopped when tb ends, and returns it once
// it is fresh, as a service's readiness waits for.
func startFollower(tb testing.TB, p *issuer, c fleetClient) *client.Validator {
	tb.Helper()
	v, err := client.New(client.Options{IssuerURL: p.url(""), Issuer: fleetIssuer, Mode: client.Local,
		RevocationCheck: client.Follow, FeedClientID: c.id, FeedClientSecret: c.secret})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithTimeout(tb.Context(), fleetWait)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		tb.Fatalf("a Follow consumer as %s: Start: %v", c.id, err)
	}
	return v
}

// waitSubscribers waits until p serves n streams and waiting polls.
func waitSubscribers(tb testing.TB, p *issuer, n float64) {
	tb.Helper()
	deadline := time.Now().Add(fleetWait)
	for p.metric(tb, "snowtoken_revfeed_subscribers") != n {
		if time.Now().After(deadline) {
			tb.Fatalf("snowtoken_revfeed_subscribers %v, want %v", p.metric(tb, "snowtoken_revfeed_subscribers"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFeedLongPollRealServer: a poll that waits (returnImmediately false)
// is answered at the end of its wait on a quiet log, with no SET and the
// heartbeat, and at once when a revocation comes 12 s into its wait. Both
// outlast the server's 10 s WriteTimeout: before the fix the poll got no
// answer at all ("Empty reply from server"), and a poller on a quiet log
// never went fresh.
func TestFeedLongPollRealServer(t *testing.T) {
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		p := startIssuer(t, issuerOpts{env: feedThreshold})
		creds := p.creds
		r, ok := awaitPoll(t, startPoll(t, p, creds.admin, feedLast(t, p, creds.admin)), revfeed.DefaultPollWait+fleetWait)
		if !ok || r.err != nil {
			t.Fatalf("a poll on a quiet log: no answer (%v after %v), want 200 at the end of its wait (%v)", r.err, r.after, revfeed.DefaultPollWait)
		}
		var pr revocation.PollResponse
		if r.status != http.StatusOK || json.Unmarshal(r.body, &pr) != nil || len(pr.Sets) != 0 || pr.Heartbeat == "" || pr.Reset {
			t.Fatalf("a poll on a quiet log: %d %s, want 200 with no SET and the heartbeat", r.status, r.body)
		}
		if r.after < revfeed.DefaultPollWait {
			t.Errorf("a poll on a quiet log answered after %v, want it to wait %v", r.after, revfeed.DefaultPollWait)
		}
	})
	t.Run("revocation after 12s", func(t *testing.T) {
		t.Parallel()
		p := startIssuer(t, issuerOpts{env: feedThreshold})
		creds := p.creds
		tok := p.issue(t, creds.svc, "")
		res := startPoll(t, p, creds.admin, feedLast(t, p, creds.admin))
		// Past the server's WriteTimeout (10 s), as the finding's case: the
		// wait is what is tested.
		if r, ok := awaitPoll(t, res, 12*time.Second); ok {
			t.Fatalf("the poll answered before any revocation: %d %s %v", r.status, r.body, r.err)
		}
		if status := p.revoke(t, creds.svc, tok); status != http.StatusOK {
			t.Fatalf("POST /token/revoke: %d", status)
		}
		r, ok := awaitPoll(t, res, fleetWait)
		if !ok || r.err != nil {
			t.Fatalf("a poll with a revocation 12 s into its wait: no answer (%v after %v), want 200 with its SET", r.err, r.after)
		}
		var pr revocation.PollResponse
		if r.status != http.StatusOK || json.Unmarshal(r.body, &pr) != nil || len(pr.Sets) != 1 {
			t.Fatalf("a poll with a revocation 12 s into its wait: %d %s, want 200 with one SET", r.status, r.body)
		}
		for _, raw := range pr.Sets {
			var set revocation.SETClaims
			if _, _, err := jwt.NewParser().ParseUnverified(raw, &set); err != nil ||
				set.Events[revocation.EventTokenRevoked].Key != strconv.FormatInt(int64(tok.TokenID), 10) {
				t.Errorf("the SET %+v (%v), want token %d revoked", set, err, tok.TokenID)
			}
		}
	})
}

// TestFeedSlotsPerClient: at SNOWTOKEN_MAX_CONNS=40, one feed client that
// sends 40 long polls gets 8 of them waiting (its bound) and the rest 429
// at once; meanwhile POST /token is answered within a second and another
// client's Follow consumer starts. Feed clients together fill the feed's
// total, half the connection cap (20), past which it is 503, and POST
// /token is still answered: the feed never holds every connection. Before
// the fix the 40 polls held all 40 connections.
func TestFeedSlotsPerClient(t *testing.T) {
	const maxConns, polls = 40, 40
	p := startIssuer(t, issuerOpts{feeds: []string{"feed2", "feed3", "feed4"},
		env: append(slices.Clone(feedThreshold), "SNOWTOKEN_MAX_CONNS", strconv.Itoa(maxConns))})
	creds, feeds := p.creds, p.feeds
	listening := p.waitLog(t, "listening")
	total, perClient := listening["feed_max_subscribers"], listening["feed_max_per_client"]
	if total != float64(maxConns/2) || perClient != float64(revfeed.DefaultMaxPerClient) {
		t.Errorf("feed_max_subscribers %v, feed_max_per_client %v at SNOWTOKEN_MAX_CONNS=%d; want %d and %d",
			total, perClient, maxConns, maxConns/2, revfeed.DefaultMaxPerClient)
	}
	last := feedLast(t, p, creds.admin)

	// One client's 40 polls: its bound waits, the rest is refused at once.
	results := make([]<-chan pollResult, polls)
	for i := range results {
		results[i] = startPoll(t, p, creds.admin, last)
	}
	wantPollsRefused(t, results, polls-revfeed.DefaultMaxPerClient, http.StatusTooManyRequests, "polls of one client past its bound")
	waitSubscribers(t, p, float64(revfeed.DefaultMaxPerClient))
	issue := holdConns(t, p.addr, 1)[0]
	if _, err := issue.Write([]byte(rawTokenRequest(creds.svc))); err != nil {
		t.Fatal(err)
	}
	wantToken(t, issue, bufio.NewReader(issue), fmt.Sprintf("%d long polls of one client at a connection cap of %d", polls, maxConns))

	// Another client's Follow consumer starts: fresh, as a service's
	// readiness waits for.
	startFollower(t, p, feeds["feed2"])
	waitSubscribers(t, p, float64(revfeed.DefaultMaxPerClient+1))

	// Two more clients, 8 polls each: the total (20) takes 11 of them.
	var more []<-chan pollResult
	for _, id := range []string{"feed3", "feed4"} {
		for range revfeed.DefaultMaxPerClient {
			more = append(more, startPoll(t, p, feeds[id], last))
		}
	}
	busy := revfeed.DefaultMaxPerClient + 1 + len(more) - maxConns/2
	wantPollsRefused(t, more, busy, http.StatusServiceUnavailable, "polls past the feed's total")
	waitSubscribers(t, p, float64(maxConns/2))
	issue = holdConns(t, p.addr, 1)[0]
	if _, err := issue.Write([]byte(rawTokenRequest(creds.svc))); err != nil {
		t.Fatal(err)
	}
	wantToken(t, issue, bufio.NewReader(issue), fmt.Sprintf("the feed full (%d) at a connection cap of %d", maxConns/2, maxConns))
}

// TestFeedCutOffOnReload: a feed client's open stream and waiting poll end
// within about a second of the reload that takes its right to the feed
// away: revocation_feed taken off (an edit of the file), its secret rotated
// with no overlap (client rotate-secret -old-valid-for 0), disabled (client
// disable) or removed (client remove); the poll answers as a new request
// would. Another feed client's stream and poll go on (a poll answers 200
// when the reload revokes a dropped client's tokens: that is an event).
// Before the fix they all went on.
func TestFeedCutOffOnReload(t *testing.T) {
	p := startIssuer(t, issuerOpts{feeds: []string{"keep", "stripped", "rotated", "disabled", "removed"}, env: feedThreshold})
	creds, feeds, bin := p.creds, p.feeds, p.bin
	type held struct {
		stream *feedStream
		poll   <-chan pollResult
	}
	open := map[string]*held{}
	last := feedLast(t, p, creds.admin)
	for id, c := range feeds {
		open[id] = &held{openStream(t, p, c, last), startPoll(t, p, c, last)}
	}
	waitSubscribers(t, p, float64(2*len(open)))
	cli := func(args ...string) func() {
		return func() {
			fleetCommand(t, bin, append(append([]string{"client"}, args...), "-file", creds.clientsPath, "-replicas", p.url(""))...)
		}
	}
	for _, tc := range []struct {
		id     string
		change func()
		status int
		code   string
	}{
		{"stripped", func() {
			editClients(t, creds.clientsPath, func(c map[string]any) {
				if c["id"] == "stripped" {
					delete(c, "revocation_feed")
				}
			})
		}, http.StatusForbidden, "unauthorized_client"},
		{"rotated", cli("rotate-secret", "-id", "rotated", "-old-valid-for", "0"), http.StatusUnauthorized, "invalid_client"},
		{"disabled", cli("disable", "-id", "disabled"), http.StatusUnauthorized, "invalid_client"},
		{"removed", cli("remove", "-id", "removed"), http.StatusUnauthorized, "invalid_client"},
	} {
		tc.change()
		p.waitClientsFile(t, creds.clientsPath)
		h := open[tc.id]
		delete(open, tc.id)
		select {
		case <-h.stream.ended:
		case <-time.After(feedCutOff):
			t.Errorf("%s: its stream is still open %v after the replica loaded the change", tc.id, feedCutOff)
		}
		if r, ok := awaitPoll(t, h.poll, feedCutOff); !ok {
			t.Errorf("%s: its poll still waits %v after the replica loaded the change", tc.id, feedCutOff)
		} else if r.err != nil || r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: its poll answered %d %s %v, want %d %s", tc.id, r.status, r.body, r.err, tc.status, tc.code)
		}
		if t.Failed() {
			return
		}
		// The others are served on; a poll answered with an event waits again.
		last := feedLast(t, p, creds.admin)
		for id, o := range open {
			if !o.stream.open() {
				t.Fatalf("%s's stream ended when %s's right was taken away", id, tc.id)
			}
			select {
			case r := <-o.poll:
				if r.err != nil || r.status != http.StatusOK {
					t.Fatalf("%s's poll answered %d %s %v when %s's right was taken away, want it to wait or 200", id, r.status, r.body, r.err, tc.id)
				}
				o.poll = startPoll(t, p, feeds[id], last)
			default:
			}
		}
		waitSubscribers(t, p, float64(2*len(open)))
	}
}
