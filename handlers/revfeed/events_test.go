package revfeed_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// TestEventsResume checks that a subscriber resuming after an event gets
// every later one as a signed SET, in order, after the stream JWT (its
// nonce, signed after the request), then a heartbeat whose last is the
// last event, signed after the stream JWT, then the events that come later.
func TestEventsResume(t *testing.T) {
	src := revfeedtest.New(true)
	first := add(src, revocation.KindToken, "117811659438825472")
	add(src, revocation.KindSubject, "alice")
	add(src, revocation.KindClient, "partner")
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
	var sc revocation.StreamClaims
	is.verify(t, st.data, revocation.TypeStream, &sc)
	if sc.Nonce != testNonce || sc.IssuedAtMs < before {
		t.Fatalf("stream JWT %+v, want nonce %s signed after the request", sc, testNonce)
	}
	check := func(ev event, want revocation.Event, uri string) {
		t.Helper()
		if ev.name != "revoked" || ev.id != want.ID {
			t.Fatalf("event %s %s, want revoked %s", ev.name, ev.id, want.ID)
		}
		var cl revocation.SETClaims
		is.verify(t, ev.data, revocation.TypeSET, &cl)
		got, ok := cl.Events[uri]
		if cl.ID != want.ID || len(cl.Events) != 1 || !ok || got.Key != want.Key || got.At != want.At ||
			got.Exp != want.Exp || got.Cutoff != want.Cutoff || got.Kind != want.Kind {
			t.Fatalf("SET %+v, want %+v under %s", cl, want, uri)
		}
	}
	check(next(t, evs), src.Events()[1], revocation.EventSubjectRevoked)
	check(next(t, evs), src.Events()[2], revocation.EventClientRevoked)
	hb := nextNamed(t, evs, "heartbeat")
	var cl revocation.HeartbeatClaims
	is.verify(t, hb.data, revocation.TypeHeartbeat, &cl)
	if cl.Last != src.Events()[2].ID || cl.Epoch != epoch || cl.Horizon != 1000 || cl.IssuedAtMs < sc.IssuedAtMs {
		t.Fatalf("heartbeat %+v, want last %s", cl, src.Events()[2].ID)
	}
	later := add(src, revocation.KindToken, "117811659438825999")
	check(nextNamed(t, evs, "revoked"), later, revocation.EventTokenRevoked)
}

// TestEventsReset checks that a stream that cannot resume says reset and
// ends: without Last-Event-ID, from another epoch, from a forgotten event;
// and that a malformed Last-Event-ID is a 400.
func TestEventsReset(t *testing.T) {
	src := revfeedtest.New(true)
	old := add(src, revocation.KindToken, "1")
	add(src, revocation.KindToken, "2")
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
	ev := add(src, revocation.KindToken, "1")
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
	var cl revocation.HeartbeatClaims
	if hb.name != "heartbeat" {
		t.Fatalf("event %q, want heartbeat", hb.name)
	}
	is.verify(t, hb.data, revocation.TypeHeartbeat, &cl)
	if cl.AgeMs != 7 {
		t.Fatalf("the first heartbeat has age_ms %d: it was signed while the source was stale", cl.AgeMs)
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
	ev := add(src, revocation.KindToken, "1")
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
	ev := add(src, revocation.KindToken, "1")
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
		add(src, revocation.KindSubject, key)
	}
	is.waitGauge(t, 0)
}

// TestEventsHead checks that HEAD /revocations/events answers the stream's
// status and headers, and ends, without a stream.
func TestEventsHead(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revocation.KindToken, "1")
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
