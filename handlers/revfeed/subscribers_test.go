package revfeed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/token/revlog"
)

// TestSubscribersPerClient checks that one client holds at most
// MaxPerClient streams and waiting polls (past it 429 with Retry-After,
// in the OAuth2 shape), which leaves the others their places up to
// MaxSubscribers (503), and that a poll answered at once is not counted.
// Before the fix one client could take every place (issue 34, finding 2).
func TestSubscribersPerClient(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revlog.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{MaxSubscribers: 3, MaxPerClient: 2})
	hdr := map[string]string{"Last-Event-ID": ev.ID}
	wait := `{"ack":["` + ev.ID + `"]}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first := is.get(t, ctx, "/revocations/events", "api", hdr)
	defer first.Body.Close()
	firstPoll := is.pollAsync(t, ctx, "api", wait)
	is.waitGauge(t, 2)

	refused := func(what string, resp *http.Response, body []byte, status int) {
		t.Helper()
		var e struct{ Error, ErrorDescription string }
		if resp.StatusCode != status || resp.Header.Get("Retry-After") == "" || json.Unmarshal(body, &e) != nil ||
			e.Error != "temporarily_unavailable" {
			t.Fatalf("%s: %d %s, Retry-After %q; want %d temporarily_unavailable with Retry-After",
				what, resp.StatusCode, body, resp.Header.Get("Retry-After"), status)
		}
	}
	// stream asks for a stream as id that must be refused.
	stream := func(what, id string, status int) {
		t.Helper()
		resp := is.get(t, t.Context(), "/revocations/events", id, hdr)
		defer resp.Body.Close()
		var b []byte
		if resp.StatusCode != http.StatusOK { // a stream would not end
			b, _ = io.ReadAll(resp.Body)
		}
		refused(what, resp, b, status)
	}
	stream("a third stream of one client", "api", http.StatusTooManyRequests)
	resp, b := is.poll(t, t.Context(), "application/json", wait)
	refused("a waiting poll past the client's bound", resp, b, http.StatusTooManyRequests)
	if pr := is.pollOK(t, `{"ack":["`+ev.ID+`"],"returnImmediately":true}`); pr.Reset {
		t.Errorf("a poll answered at once past the client's bound: %+v", pr)
	}

	other := is.get(t, ctx, "/revocations/events", "ops", hdr)
	defer other.Body.Close()
	if other.StatusCode != http.StatusOK {
		t.Fatalf("another client while one holds its bound: %d, want 200", other.StatusCode)
	}
	stream("past MaxSubscribers", "ops", http.StatusServiceUnavailable)

	first.Body.Close() // a place of the client's is free again
	is.waitGauge(t, 2)
	again := is.get(t, ctx, "/revocations/events", "api", hdr)
	defer again.Body.Close()
	if again.StatusCode != http.StatusOK {
		t.Fatalf("after one of its streams ended: %d, want 200", again.StatusCode)
	}
	cancel()
	<-firstPoll
	is.waitGauge(t, 0)
}
