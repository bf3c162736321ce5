package revfeed_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/revlog"
)

const (
	testIssuer = "https://issuer.test"
	epoch      = revfeedtest.Epoch
)

// add applies an event to src, a ms after the last.
func add(src *revfeedtest.Source, kind, key string) revlog.Event {
	at := int64(revfeedtest.Horizon + 1 + len(src.Events()))
	return src.Add(kind, key, at, 2_000_000_000)
}

// issuer is the real handlers' gin engine with the feed, behind an
// httptest.Server.
type issuer struct {
	URL      string
	pub      ed25519.PublicKey
	kid      string
	creds    map[string]string // client ID -> secret
	registry *prometheus.Registry
	server   *handlers.Server
	svc      *token.Service
	clients  *token.Clients
	key      token.Key
}

// newIssuer serves src (nil: no feed) with opts.
func newIssuer(t *testing.T, src revfeed.Source, opts revfeed.Options) *issuer {
	t.Helper()
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.NewKeySet(key)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{pub: key.Private.Public().(ed25519.PublicKey), kid: key.ID, creds: map[string]string{}, registry: prometheus.NewRegistry()}
	var list []token.Client
	for _, c := range []token.Client{
		{ID: "api", Scopes: []string{}, RevocationFeed: true},
		{ID: "ops", Scopes: []string{}, Admin: true},
		{ID: "svc", Scopes: []string{"read"}},
	} {
		secret, sum, err := token.NewClientSecret()
		if err != nil {
			t.Fatal(err)
		}
		c.SecretSHA256, is.creds[c.ID] = sum, secret
		list = append(list, c)
	}
	clients, err := token.NewClients(list)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.New(t)
	store := token.NewStore(r.Client, token.StoreOptions{Prefix: r.Prefix})
	t.Cleanup(store.Close)
	svc, err := token.NewService(keys, store, ids, token.Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	is.svc, is.clients, is.key = svc, clients, key
	is.server, err = handlers.NewServer(handlers.Options{Service: svc, Clients: clients, IDs: ids,
		Logger: slog.New(slog.DiscardHandler), Registry: is.registry, Feed: src, FeedOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(is.server.Engine())
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// get sends GET path as client id (empty: no credentials).
func (is *issuer) get(t *testing.T, ctx context.Context, path, id string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, is.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		req.SetBasicAuth(id, is.creds[id])
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// event is one SSE event.
type event struct{ id, name, data string }

// readEvents reads the events of body onto the returned channel, closed at
// the end of the stream.
func readEvents(body io.Reader) <-chan event {
	out := make(chan event, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// hangGuard bounds how long a test waits for something that must come;
// it is no timing assertion.
const hangGuard = 20 * time.Second

func next(t *testing.T, evs <-chan event) event {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(hangGuard):
		t.Fatal("no event")
	}
	return event{}
}

// nextNamed skips heartbeats until an event named name.
func nextNamed(t *testing.T, evs <-chan event, name string) event {
	t.Helper()
	for {
		if ev := next(t, evs); ev.name == name {
			return ev
		}
	}
}

// verify checks raw's signature with the issuer's key and its typ, into claims.
func (is *issuer) verify(t *testing.T, raw, typ string, claims jwt.Claims) {
	t.Helper()
	tok, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Header["kid"] != is.kid {
			return nil, fmt.Errorf("kid %v", tok.Header["kid"])
		}
		return is.pub, nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(testIssuer), jwt.WithIssuedAt())
	if err != nil {
		t.Fatalf("%s does not verify: %v", typ, err)
	}
	if tok.Header["typ"] != typ {
		t.Fatalf("typ %v, want %s", tok.Header["typ"], typ)
	}
}

// TestEventsResume checks that a subscriber resuming after an event gets
// every later one as a signed SET, in order, after the stream JWT (its
// nonce, signed after the request), then a heartbeat whose last is the
// last event, signed after the stream JWT, then the events that come later.
func TestEventsResume(t *testing.T) {
	src := revfeedtest.New(true)
	first := add(src, revlog.KindToken, "117811659438825472")
	add(src, revlog.KindSubject, "alice")
	add(src, revlog.KindClient, "partner")
	is := newIssuer(t, src, revfeed.Options{})

	before := time.Now().UnixMilli()
	resp := is.get(t, t.Context(), "/revocations/events?nonce="+testNonce, "api", map[string]string{"Last-Event-ID": first.ID})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(resp.Body)
	st := next(t, evs)
	if st.name != "stream" {
		t.Fatalf("first event %q, want stream", st.name)
	}
	var sc revfeed.StreamClaims
	is.verify(t, st.data, revfeed.TypeStream, &sc)
	if sc.Nonce != testNonce || sc.IssuedAtMs < before {
		t.Fatalf("stream JWT %+v, want nonce %s signed after the request", sc, testNonce)
	}
	check := func(ev event, want revlog.Event, uri string) {
		t.Helper()
		if ev.name != "revoked" || ev.id != want.ID {
			t.Fatalf("event %s %s, want revoked %s", ev.name, ev.id, want.ID)
		}
		var cl revfeed.SETClaims
		is.verify(t, ev.data, revfeed.TypeSET, &cl)
		got, ok := cl.Events[uri]
		if cl.ID != want.ID || len(cl.Events) != 1 || !ok || got.Key != want.Key || got.At != want.At ||
			got.Exp != want.Exp || got.Cutoff != want.Cutoff || got.Kind != want.Kind {
			t.Fatalf("SET %+v, want %+v under %s", cl, want, uri)
		}
	}
	check(next(t, evs), src.Events()[1], revfeed.EventSubjectRevoked)
	check(next(t, evs), src.Events()[2], revfeed.EventClientRevoked)
	hb := nextNamed(t, evs, "heartbeat")
	var cl revfeed.HeartbeatClaims
	is.verify(t, hb.data, revfeed.TypeHeartbeat, &cl)
	if cl.Last != src.Events()[2].ID || cl.Epoch != epoch || cl.Horizon != 1000 || cl.IssuedAtMs < sc.IssuedAtMs {
		t.Fatalf("heartbeat %+v, want last %s", cl, src.Events()[2].ID)
	}
	later := add(src, revlog.KindToken, "117811659438825999")
	check(nextNamed(t, evs, "revoked"), later, revfeed.EventTokenRevoked)
}

// TestEventsReset checks that a stream that cannot resume says reset and
// ends: without Last-Event-ID, from another epoch, from a forgotten event;
// and that a malformed Last-Event-ID is a 400.
func TestEventsReset(t *testing.T) {
	src := revfeedtest.New(true)
	old := add(src, revlog.KindToken, "1")
	add(src, revlog.KindToken, "2")
	src.Forget(2)
	is := newIssuer(t, src, revfeed.Options{})
	for name, last := range map[string]string{
		"none": "", "other epoch": "ffff-1001-0", "forgotten": old.ID,
	} {
		t.Run(name, func(t *testing.T) {
			resp := is.get(t, t.Context(), "/revocations/events", "api", map[string]string{"Last-Event-ID": last})
			defer resp.Body.Close()
			evs := readEvents(resp.Body)
			if ev := next(t, evs); ev.name != "reset" {
				t.Fatalf("first event %q, want reset", ev.name)
			}
			if ev, ok := <-evs; ok {
				t.Fatalf("the stream went on after reset: %+v", ev)
			}
		})
	}
	for _, last := range []string{"x", epoch + "-1", epoch + "-a-0", "-1-0", "XYZ-1-0", epoch + "-1-0 x", epoch + "-1-" + strings.Repeat("9", 80)} {
		resp := is.get(t, t.Context(), "/revocations/events", "api", map[string]string{"Last-Event-ID": last})
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: status %d, want 400", last, resp.StatusCode)
		}
	}
}

// TestNoHeartbeatWhileStale checks that no heartbeat is sent while the
// source is not Fresh: ticks pass (Status is read) with none, and the first
// heartbeat is one signed after the source went Fresh (its age).
func TestNoHeartbeatWhileStale(t *testing.T) {
	src := revfeedtest.New(false)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{Heartbeat: 5 * time.Millisecond})
	resp := is.get(t, t.Context(), "/revocations/events", "api", map[string]string{"Last-Event-ID": ev.ID})
	defer resp.Body.Close()
	evs := readEvents(resp.Body)
	for range 5 { // five ticks while stale
		select {
		case <-src.StatusCalls():
		case <-time.After(hangGuard):
			t.Fatal("no tick")
		}
	}
	src.SetFresh(true, 7*time.Millisecond)
	hb := next(t, evs)
	if hb.name == "stream" { // the stream's opening JWT, signed at connect
		hb = next(t, evs)
	}
	var cl revfeed.HeartbeatClaims
	if hb.name != "heartbeat" {
		t.Fatalf("event %q, want heartbeat", hb.name)
	}
	is.verify(t, hb.data, revfeed.TypeHeartbeat, &cl)
	if cl.AgeMs != 7 {
		t.Fatalf("the first heartbeat has age_ms %d: it was signed while the source was stale", cl.AgeMs)
	}
}

// TestFeedAuth checks who may follow the feed: 401 without credentials or
// with a wrong secret, 403 for a client without revocation_feed, 200 for
// one with it and for an admin; and 404 where no feed is served.
func TestFeedAuth(t *testing.T) {
	src := revfeedtest.New(true)
	is := newIssuer(t, src, revfeed.Options{})
	for _, path := range []string{"/revocations/events", "/revocations"} {
		for id, want := range map[string]int{"": 401, "svc": 403, "api": 200, "ops": 200} {
			resp := is.get(t, t.Context(), path, id, nil)
			_, _ = io.Copy(io.Discard, resp.Body) // a stream without Last-Event-ID resets and ends
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s as %q: %d, want %d", path, id, resp.StatusCode, want)
			}
			if want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("%s: 401 without a Basic challenge", path)
			}
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, is.URL+path, nil)
		req.SetBasicAuth("api", "wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s with a wrong secret: %d, want 401", path, resp.StatusCode)
		}
	}
	none := newIssuer(t, nil, revfeed.Options{})
	resp := none.get(t, t.Context(), "/revocations/events", "ops", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("without a feed: %d, want 404", resp.StatusCode)
	}
}

// gauge reads snowtoken_revfeed_subscribers.
func (is *issuer) gauge(t *testing.T) float64 {
	t.Helper()
	mfs, err := is.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "snowtoken_revfeed_subscribers" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no snowtoken_revfeed_subscribers")
	return 0
}

// waitGauge waits until the gauge reads want.
func (is *issuer) waitGauge(t *testing.T, want float64) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for is.gauge(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("subscribers %v, want %v", is.gauge(t), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSubscriberCap checks that past MaxSubscribers a stream is refused with
// 503 and Retry-After, and that the place is free again once one leaves.
func TestSubscriberCap(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{MaxSubscribers: 1})
	hdr := map[string]string{"Last-Event-ID": ev.ID}
	ctx, cancel := context.WithCancel(t.Context())
	first := is.get(t, ctx, "/revocations/events", "api", hdr)
	defer first.Body.Close()
	if first.StatusCode != 200 {
		t.Fatalf("first: %d", first.StatusCode)
	}
	if got := is.gauge(t); got != 1 {
		t.Errorf("snowtoken_revfeed_subscribers = %v, want 1", got)
	}
	second := is.get(t, t.Context(), "/revocations/events", "api", hdr)
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second: %d, Retry-After %q; want 503 with Retry-After", second.StatusCode, second.Header.Get("Retry-After"))
	}
	cancel()
	is.waitGauge(t, 0)
	third := is.get(t, t.Context(), "/revocations/events", "api", hdr)
	defer third.Body.Close()
	if third.StatusCode != 200 {
		t.Fatalf("after the first left: %d", third.StatusCode)
	}
}

// TestSlowSubscriberDropped checks that a subscriber that does not read is
// dropped once a write cannot complete within WriteTimeout, instead of
// being queued for.
func TestSlowSubscriberDropped(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{WriteTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(is.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest(http.MethodGet, is.URL+"/revocations/events", nil)
	req.SetBasicAuth("api", is.creds["api"])
	req.Header.Set("Last-Event-ID", ev.ID)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	is.waitGauge(t, 1)
	// Far more than the socket buffers hold, never read.
	key := strings.Repeat("k", 32<<10)
	for range 2000 {
		add(src, revlog.KindSubject, key)
	}
	is.waitGauge(t, 0)
}

// TestSnapshot checks the snapshot: one JWT signed by the issuer's key,
// application/jwt, holding the whole state.
func TestSnapshot(t *testing.T) {
	src := revfeedtest.New(true)
	tok := add(src, revlog.KindToken, "117811659438825472")
	sub := add(src, revlog.KindSubject, "alice")
	cli := add(src, revlog.KindClient, "partner")
	is := newIssuer(t, src, revfeed.Options{})
	resp := is.get(t, t.Context(), "/revocations?nonce="+testNonce, "api", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jwt" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var cl revfeed.SnapshotClaims
	is.verify(t, string(body), revfeed.TypeSnapshot, &cl)
	if cl.Nonce != testNonce || cl.Epoch != epoch || cl.Last != cli.ID || cl.Horizon != 1000 || !cl.Fresh ||
		len(cl.Tokens) != 1 || cl.Tokens[0] != (revfeed.RevokedToken{JTI: tok.Key, Exp: tok.Exp, At: tok.At}) ||
		len(cl.Subjects) != 1 || cl.Subjects[0] != (revfeed.RevokedName{Subject: sub.Key, At: sub.At}) ||
		len(cl.Clients) != 1 || cl.Clients[0] != (revfeed.RevokedClient{ClientID: cli.Key, Cutoff: cli.Cutoff, At: cli.At}) {
		t.Fatalf("snapshot %+v", cl)
	}
}

// poll sends POST /revocations/poll as client api with body.
func (is *issuer) poll(t *testing.T, ctx context.Context, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, is.URL+"/revocations/poll", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("api", is.creds["api"])
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (is *issuer) pollOK(t *testing.T, body string) revfeed.PollResponse {
	t.Helper()
	resp, b := is.poll(t, t.Context(), "application/json", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("poll %s: %d %s", body, resp.StatusCode, b)
	}
	var pr revfeed.PollResponse
	if err := json.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

// TestPoll checks the RFC 8936 poll: reset without a position, the SETs
// after the latest ack keyed by jti, maxEvents with moreAvailable, a
// heartbeat only while fresh and only with every event, and a poll that
// waits until an event comes.
func TestPoll(t *testing.T) {
	src := revfeedtest.New(true)
	first := add(src, revlog.KindToken, "1")
	second := add(src, revlog.KindSubject, "alice")
	third := add(src, revlog.KindClient, "partner")
	is := newIssuer(t, src, revfeed.Options{})

	if pr := is.pollOK(t, `{"returnImmediately":true}`); !pr.Reset || len(pr.Sets) != 0 {
		t.Errorf("no ack: %+v, want reset", pr)
	}
	if pr := is.pollOK(t, `{"ack":["ffff-1-0"],"returnImmediately":true}`); !pr.Reset {
		t.Errorf("an ack of another epoch: %+v, want reset", pr)
	}
	pr := is.pollOK(t, `{"ack":["`+epoch+`-0-0","`+first.ID+`"],"setErrs":{},"returnImmediately":true}`)
	if pr.Reset || pr.MoreAvailable || len(pr.Sets) != 2 || pr.Sets[second.ID] == "" || pr.Sets[third.ID] == "" {
		t.Fatalf("after the first: %+v", pr)
	}
	var set revfeed.SETClaims
	is.verify(t, pr.Sets[third.ID], revfeed.TypeSET, &set)
	if set.ID != third.ID || set.Events[revfeed.EventClientRevoked].Key != "partner" {
		t.Errorf("SET %+v", set)
	}
	var hb revfeed.HeartbeatClaims
	is.verify(t, pr.Heartbeat, revfeed.TypeHeartbeat, &hb)
	if hb.Last != third.ID {
		t.Errorf("heartbeat last %s, want %s", hb.Last, third.ID)
	}
	pr = is.pollOK(t, `{"ack":["`+first.ID+`"],"maxEvents":1,"returnImmediately":true}`)
	if len(pr.Sets) != 1 || pr.Sets[second.ID] == "" || !pr.MoreAvailable || pr.Heartbeat != "" {
		t.Errorf("maxEvents 1: %+v, want the second, moreAvailable, no heartbeat", pr)
	}
	src.SetFresh(false, 0)
	if pr = is.pollOK(t, `{"ack":["`+third.ID+`"],"returnImmediately":true}`); len(pr.Sets) != 0 || pr.Heartbeat != "" {
		t.Errorf("stale: %+v, want no SET and no heartbeat", pr)
	}

	// A poll that waits: it is answered once an event comes.
	done := make(chan revfeed.PollResponse)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, is.URL+"/revocations/poll", strings.NewReader(`{"ack":["`+third.ID+`"]}`))
	req.SetBasicAuth("api", is.creds["api"])
	req.Header.Set("Content-Type", "application/json")
	go func() { // no t.Fatal here: the answer, or nothing, goes to done
		var pr revfeed.PollResponse
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&pr)
			resp.Body.Close()
		}
		done <- pr
	}()
	is.waitGauge(t, 1)
	fourth := add(src, revlog.KindToken, "4")
	select {
	case pr := <-done:
		if len(pr.Sets) != 1 || pr.Sets[fourth.ID] == "" {
			t.Errorf("the waiting poll: %+v, want the fourth", pr)
		}
	case <-time.After(hangGuard):
		t.Fatal("the waiting poll was not answered")
	}
}

// TestPollRefuses checks that a poll that is not one is a 400.
func TestPollRefuses(t *testing.T) {
	src := revfeedtest.New(true)
	is := newIssuer(t, src, revfeed.Options{})
	for _, tc := range []struct{ ct, body string }{
		{"application/x-www-form-urlencoded", `{"ack":[]}`},
		{"application/json", `{"ack":["x"]}`},
		{"application/json", `{"maxEvents":-1}`},
		{"application/json", `{"acks":[]}`},
		{"application/json", `{"ack":[]} {}`},
		{"application/json", `[]`},
	} {
		if resp, b := is.poll(t, t.Context(), tc.ct, tc.body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", tc.ct, tc.body, resp.StatusCode, b)
		}
	}
}

// TestSignedWithCurrentKeys checks that after a key rotation (Server.Swap)
// the feed signs with the new signing key, which the JWKS then holds.
func TestSignedWithCurrentKeys(t *testing.T) {
	src := revfeedtest.New(true)
	is := newIssuer(t, src, revfeed.Options{})
	next, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.NewKeySet(next, is.key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := is.svc.WithKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	is.server.Swap(svc, is.clients, handlers.Version{})
	is.pub, is.kid = next.Private.Public().(ed25519.PublicKey), next.ID
	resp := is.get(t, t.Context(), "/revocations", "api", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var cl revfeed.SnapshotClaims
	is.verify(t, string(body), revfeed.TypeSnapshot, &cl) // checks the kid
}

// TestEventsHead checks that HEAD /revocations/events answers the stream's
// status and headers, and ends, without a stream.
func TestEventsHead(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, is.URL+"/revocations/events", nil)
	req.SetBasicAuth("api", is.creds["api"])
	req.Header.Set("Last-Event-ID", ev.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	is.waitGauge(t, 0)
}

// testNonce is a nonce as the client module makes one: 32 bytes, base64url.
const testNonce = "q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E"

// TestNonceRefused checks that a nonce that is not 22 to 128 base64url
// characters, or is given twice, is a 400 invalid_request on the stream and
// the snapshot, before anything is served.
func TestNonceRefused(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{})
	for _, q := range []string{"nonce=short", "nonce=" + testNonce + "%2B", "nonce=" + testNonce + "=",
		"nonce=" + strings.Repeat("a", 129), "nonce=" + testNonce + "&nonce=" + testNonce, "nonce="} {
		for _, path := range []string{"/revocations/events", "/revocations"} {
			resp := is.get(t, t.Context(), path+"?"+q, "api", map[string]string{"Last-Event-ID": ev.ID})
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error string `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error != "invalid_request" {
				t.Errorf("%s?%s: %d %s, want 400 invalid_request", path, q, resp.StatusCode, body)
			}
		}
	}
	if n := is.gauge(t); n != 0 {
		t.Errorf("%v subscribers after refusals", n)
	}
}
