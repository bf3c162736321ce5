package revfeed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/token/clients"
)

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

func (is *issuer) pollOK(t *testing.T, body string) revocation.PollResponse {
	t.Helper()
	resp, b := is.poll(t, t.Context(), "application/json", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("poll %s: %d %s", body, resp.StatusCode, b)
	}
	var pr revocation.PollResponse
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
	first := add(src, revocation.KindToken, "1")
	second := add(src, revocation.KindSubject, "alice")
	third := add(src, revocation.KindClient, "partner")
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
	var set revocation.SETClaims
	is.verify(t, pr.Sets[third.ID], revocation.TypeSET, &set)
	if set.ID != third.ID || set.Events[revocation.EventClientRevoked].Key != "partner" {
		t.Errorf("SET %+v", set)
	}
	var hb revocation.HeartbeatClaims
	is.verify(t, pr.Heartbeat, revocation.TypeHeartbeat, &hb)
	if hb.Last != third.ID || hb.Nonce != "" {
		t.Errorf("heartbeat last %s, nonce %q; want %s and none", hb.Last, hb.Nonce, third.ID)
	}
	// With a nonce, the heartbeat is bound to this poll: a recorded answer
	// replayed to a later poll names another nonce.
	const nonce = "bm9uY2Utb2YtdGhpcy1wb2xsLTEyMzQ1Ng"
	pr = is.pollOK(t, `{"ack":["`+first.ID+`"],"nonce":"`+nonce+`","returnImmediately":true}`)
	hb = revocation.HeartbeatClaims{}
	is.verify(t, pr.Heartbeat, revocation.TypeHeartbeat, &hb)
	if hb.Nonce != nonce || hb.Last != third.ID {
		t.Errorf("heartbeat of a poll with a nonce: nonce %q, last %s; want %q, %s", hb.Nonce, hb.Last, nonce, third.ID)
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
	done := make(chan revocation.PollResponse)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, is.URL+"/revocations/poll", strings.NewReader(`{"ack":["`+third.ID+`"]}`))
	req.SetBasicAuth("api", is.creds["api"])
	req.Header.Set("Content-Type", "application/json")
	go func() { // no t.Fatal here: the answer, or nothing, goes to done
		var pr revocation.PollResponse
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&pr)
			resp.Body.Close()
		}
		done <- pr
	}()
	is.waitGauge(t, 1)
	fourth := add(src, revocation.KindToken, "4")
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
		{"application/json", `{"nonce":"short"}`},
		{"application/json", `{"nonce":"not base64url, but long enough to pass"}`},
		{"application/json", `{"nonce":7}`},
	} {
		if resp, b := is.poll(t, t.Context(), tc.ct, tc.body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", tc.ct, tc.body, resp.StatusCode, b)
		}
	}
}

// answered is the answer to a poll.
type answered struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// code is the OAuth2 error code of a refusal.
func (a answered) code() string {
	var e struct{ Error string }
	_ = json.Unmarshal(a.body, &e)
	return e.Error
}

// pollAsync sends POST /revocations/poll as client id with body; its answer
// comes on the returned channel.
func (is *issuer) pollAsync(t *testing.T, ctx context.Context, id, body string) <-chan answered {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, is.URL+"/revocations/poll", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(id, is.creds[id])
	req.Header.Set("Content-Type", "application/json")
	out := make(chan answered, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- answered{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- answered{status: resp.StatusCode, header: resp.Header, body: b, err: err}
	}()
	return out
}

// await waits for a poll's answer, at most wait.
func await(t *testing.T, res <-chan answered, wait time.Duration) answered {
	t.Helper()
	select {
	case a := <-res:
		return a
	case <-time.After(wait):
		t.Fatalf("no answer within %v", wait)
	}
	return answered{}
}

// withWriteTimeout serves is again behind an http.Server with a write
// timeout, as cmd/server's has (10 s there).
func (is *issuer) withWriteTimeout(t *testing.T, d time.Duration) {
	srv := httptest.NewUnstartedServer(is.server.Engine())
	srv.Config.WriteTimeout = d
	srv.Start()
	t.Cleanup(srv.Close)
	is.URL = srv.URL
}

// TestPollOutlastsWriteTimeout checks that a waiting poll is answered
// after the server's write timeout has passed: at the end of its wait with
// the heartbeat, with an event that comes after it, and with the refusal
// when its client is cut off after it. Before the fix the server's
// deadline, set when the request was read, made each an empty reply
// (e2e's TestFeedLongPollRealServer has the real server's 10 s).
func TestPollOutlastsWriteTimeout(t *testing.T) {
	const writeTimeout, pollWait = 200 * time.Millisecond, 600 * time.Millisecond
	src := revfeedtest.New(true)
	ev := add(src, revocation.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{PollWait: pollWait})
	is.withWriteTimeout(t, writeTimeout)
	body := `{"ack":["` + ev.ID + `"]}`

	a := await(t, is.pollAsync(t, t.Context(), "api", body), hangGuard)
	var pr revocation.PollResponse
	if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &pr) != nil || len(pr.Sets) != 0 || pr.Heartbeat == "" {
		t.Fatalf("a poll on a quiet log: %d %s %v, want 200 with no SET and the heartbeat", a.status, a.body, a.err)
	}

	res := is.pollAsync(t, t.Context(), "api", body)
	is.waitGauge(t, 1)
	time.Sleep(2 * writeTimeout) // what is tested: the event comes past the server's deadline
	second := add(src, revocation.KindToken, "2")
	a = await(t, res, hangGuard)
	if pr = (revocation.PollResponse{}); a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &pr) != nil || pr.Sets[second.ID] == "" {
		t.Fatalf("an event past the write timeout: %d %s %v, want 200 with its SET", a.status, a.body, a.err)
	}

	res = is.pollAsync(t, t.Context(), "api", `{"ack":["`+second.ID+`"]}`)
	is.waitGauge(t, 1)
	time.Sleep(2 * writeTimeout)
	is.reload(t, "api", func(c *clients.Client) bool { c.Disabled = true; return true })
	if a = await(t, res, hangGuard); a.err != nil || a.status != http.StatusUnauthorized || a.code() != "invalid_client" {
		t.Fatalf("cut off past the write timeout: %d %s %v, want 401 invalid_client", a.status, a.body, a.err)
	}
}
