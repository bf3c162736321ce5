package revfeed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/token/clients"
)

// cutOff is how soon a stream or a waiting poll of a client that may no
// longer follow the feed must end after the reload that says so:
// docs/security.md's "within about a second".
const cutOff = time.Second

// reload swaps in is's clients with edit applied to client id (edit
// returning false removes it), as a reload of the clients file does.
func (is *issuer) reload(t *testing.T, id string, edit func(c *clients.Client) bool) {
	t.Helper()
	var list []clients.Client
	for _, c := range is.clients.All() {
		if c.ID != id || edit(&c) {
			list = append(list, c)
		}
	}
	clients, err := clients.New(list)
	if err != nil {
		t.Fatal(err)
	}
	is.clients = clients
	is.server.Swap(is.svc, clients, handlers.Version{})
}

// TestSubscribersPerClient checks that one client holds at most
// MaxPerClient streams and waiting polls (past it 429 with Retry-After,
// in the OAuth2 shape), which leaves the others their places up to
// MaxSubscribers (503), and that a poll answered at once is not counted.
// Before the fix one client could take every place.
func TestSubscribersPerClient(t *testing.T) {
	src := revfeedtest.New(true)
	ev := add(src, revocation.KindToken, "1")
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

// TestCutOffOnReload checks that a reload of the clients (Server.Swap)
// that takes a client's right to the feed away ends its stream and its
// waiting poll at once, the poll answering as a new request would, and
// that one that leaves it the right ends neither: they get the next event
// and the heartbeat after it. Before the fix none ended (e2e's
// TestFeedCutOffOnReload reloads a real clients file).
func TestCutOffOnReload(t *testing.T) {
	_, rotated, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		id     string // the client changed; the stream and poll are api's
		edit   func(c *clients.Client) bool
		status int // the poll's answer; 0: api is not cut off
		code   string
	}{
		{"disabled", "api", func(c *clients.Client) bool { c.Disabled = true; return true }, 401, "invalid_client"},
		{"removed", "api", func(*clients.Client) bool { return false }, 401, "invalid_client"},
		{"revocation_feed taken off", "api", func(c *clients.Client) bool { c.RevocationFeed = false; return true }, 403, "unauthorized_client"},
		{"secret rotated with no overlap", "api", func(c *clients.Client) bool { c.SecretSHA256 = rotated; return true }, 401, "invalid_client"},
		{"secret rotated with an overlap", "api", func(c *clients.Client) bool {
			c.PreviousSecretSHA256, c.PreviousSecretExpires, c.SecretSHA256 = c.SecretSHA256, time.Now().Add(time.Hour), rotated
			return true
		}, 0, ""},
		{"revocation_feed taken off an admin", "api", func(c *clients.Client) bool { c.RevocationFeed, c.Admin = false, true; return true }, 0, ""},
		{"another client disabled", "ops", func(c *clients.Client) bool { c.Disabled = true; return true }, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := revfeedtest.New(true)
			ev := add(src, revocation.KindToken, "1")
			is := newIssuer(t, src, revfeed.Options{})
			stream := is.get(t, t.Context(), "/revocations/events", "api", map[string]string{"Last-Event-ID": ev.ID})
			defer stream.Body.Close()
			evs := readEvents(stream.Body)
			poll := is.pollAsync(t, t.Context(), "api", `{"ack":["`+ev.ID+`"]}`)
			is.waitGauge(t, 2)

			is.reload(t, tc.id, tc.edit)
			if tc.status == 0 {
				next := add(src, revocation.KindToken, "2")
				if got := nextNamed(t, evs, "revoked"); got.id != next.ID {
					t.Fatalf("the stream's next event %s, want %s", got.id, next.ID)
				}
				nextNamed(t, evs, "heartbeat")
				var pr revocation.PollResponse
				if a := await(t, poll, hangGuard); a.status != http.StatusOK || json.Unmarshal(a.body, &pr) != nil || pr.Sets[next.ID] == "" {
					t.Fatalf("the poll: %d %s %v, want 200 with the next event", a.status, a.body, a.err)
				}
				if events := is.log.Events(t, "feed.cut_off"); len(events) != 0 {
					t.Errorf("feed.cut_off %v, want none", events)
				}
				return
			}
			if a := await(t, poll, cutOff); a.status != tc.status || a.code() != tc.code {
				t.Errorf("the poll: %d %s %v, want %d %s", a.status, a.body, a.err, tc.status, tc.code)
			}
			deadline := time.After(cutOff)
			for open := true; open; {
				select {
				case _, open = <-evs:
				case <-deadline:
					t.Fatalf("the stream is still open %v after the reload", cutOff)
				}
			}
			is.waitGauge(t, 0)
			// Each is in the audit trail, the client and why, once its
			// request has ended (just after its answer).
			events := is.log.Events(t, "feed.cut_off")
			for end := time.Now().Add(hangGuard); len(events) < 2 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
				events = is.log.Events(t, "feed.cut_off")
			}
			routes := map[any]int{}
			for _, e := range events {
				routes[e["route"]]++
				if e["client_id"] != "api" || e["reason"] == "" || e["addr"] != "127.0.0.1" {
					t.Errorf("feed.cut_off %v, want client_id api, a reason and addr", e)
				}
			}
			if len(events) != 2 || routes["/revocations/events"] != 1 || routes["/revocations/poll"] != 1 {
				t.Errorf("feed.cut_off events %v, want one for the stream and one for the poll", events)
			}
		})
	}
}

// TestCutOffAtSecretExpiry checks that a stream and a waiting poll end
// when the secret they authenticated with expires, whether it was set to
// expire when they began or a rotation with an overlap made it expire
// later: the poll is answered 401 as a new request would be, and not
// before the secret expired.
func TestCutOffAtSecretExpiry(t *testing.T) {
	const expiresIn = 300 * time.Millisecond
	_, rotated, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	expiring := func(is *issuer) time.Time {
		expires := time.Now().Add(expiresIn)
		is.reload(t, "api", func(c *clients.Client) bool { c.SecretExpires = expires; return true })
		return expires
	}
	overlap := func(is *issuer) time.Time {
		expires := time.Now().Add(expiresIn)
		is.reload(t, "api", func(c *clients.Client) bool {
			c.PreviousSecretSHA256, c.PreviousSecretExpires, c.SecretSHA256 = c.SecretSHA256, expires, rotated
			return true
		})
		return expires
	}
	for _, tc := range []struct {
		name     string
		rotation bool // the secret is made to expire after the stream and poll began, else before
	}{{"expiring", false}, {"rotated with an overlap", true}} {
		t.Run(tc.name, func(t *testing.T) {
			src := revfeedtest.New(true)
			ev := add(src, revocation.KindToken, "1")
			is := newIssuer(t, src, revfeed.Options{})
			var expires time.Time
			if !tc.rotation {
				expires = expiring(is)
			}
			stream := is.get(t, t.Context(), "/revocations/events", "api", map[string]string{"Last-Event-ID": ev.ID})
			defer stream.Body.Close()
			evs := readEvents(stream.Body)
			poll := is.pollAsync(t, t.Context(), "api", `{"ack":["`+ev.ID+`"]}`)
			is.waitGauge(t, 2)
			if tc.rotation {
				expires = overlap(is)
			}

			if a := await(t, poll, expiresIn+cutOff); a.status != http.StatusUnauthorized || a.code() != "invalid_client" {
				t.Errorf("the poll: %d %s %v, want 401 invalid_client", a.status, a.body, a.err)
			} else if time.Now().Before(expires) {
				t.Errorf("the poll was refused before the secret expired")
			}
			deadline := time.After(expiresIn + cutOff)
			for {
				select {
				case _, open := <-evs:
					if !open {
						return
					}
				case <-deadline:
					t.Fatalf("the stream is still open %v after its secret expired", cutOff)
				}
			}
		})
	}
}
