package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// TestFeedHonoursRetryAfter checks that the follower, answered with a
// Retry-After by the stream or by the snapshot, asks again once it has
// passed and not before (the backoff alone asked again after 50 ms,
// 100 ms, ...), at most feedRetryAfterMax, and that the state goes stale
// meanwhile: the wait fails nothing open. In a synctest bubble, so the
// waits are exact and cost no real time.
func TestFeedHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		path       string // the request answered with status and Retry-After; the stream resets before a snapshot
		status     int
		retryAfter string
		want       time.Duration
	}{
		{"stream 503", "/revocations/events", http.StatusServiceUnavailable, "7", 7 * time.Second},
		{"stream 429", "/revocations/events", http.StatusTooManyRequests, "2", 2 * time.Second},
		{"snapshot 503", "/revocations", http.StatusServiceUnavailable, "3", 3 * time.Second},
		{"an hour, capped", "/revocations/events", http.StatusServiceUnavailable, "3600", feedRetryAfterMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				fd, key := testFeed(t, &now, 0)
				fd.v.opts.Now, fd.v.opts.Timeout = time.Now, time.Second
				var mu sync.Mutex
				var asked []time.Time // when tc.path was asked
				fd.v.http = &http.Client{Transport: roundTrip(func(r *http.Request) *http.Response {
					if r.URL.Path != tc.path { // the stream, before a snapshot: reset
						return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
							Body: io.NopCloser(strings.NewReader("event: reset\ndata: {}\n\n")), Request: r}
					}
					mu.Lock()
					asked = append(asked, time.Now())
					mu.Unlock()
					return &http.Response{StatusCode: tc.status, Header: http.Header{"Retry-After": {tc.retryAfter}}, Body: http.NoBody, Request: r}
				})}
				fd.eventsURL, fd.snapURL = "http://issuer.test/revocations/events", "http://issuer.test/revocations"
				c := &Claims{JTI: "1", IssuedAt: now}
				if err := fd.applyHeartbeat(t.Context(), bind(t, fd, key, now), signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{
					"iss": "https://issuer.test", "iat": now.Unix(), "iat_ms": now.UnixMilli(), "epoch": "e1", "last": "e1-0-0", "age_ms": 0})); err != nil || fd.decide(c) != revocation.Live {
					t.Fatalf("heartbeat: %v, %v, want fresh", err, fd.decide(c))
				}
				fd.start()
				defer fd.close()
				time.Sleep(tc.want / 2)
				if got := fd.decide(c); got != revocation.Unknown {
					t.Errorf("waiting out Retry-After: %v, want %v (stale)", got, revocation.Unknown)
				}
				time.Sleep(2*tc.want - tc.want/2 + tc.want/4) // past the third request, before the fourth
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if len(asked) != 3 {
					t.Fatalf("%s asked %d times in %v, want 3 (Retry-After %s)", tc.path, len(asked), 2*tc.want+tc.want/4, tc.retryAfter)
				}
				for i := 1; i < len(asked); i++ {
					if gap := asked[i].Sub(asked[i-1]); gap != tc.want {
						t.Errorf("asked again after %v, want %v", gap, tc.want)
					}
				}
			})
		})
	}
}

// TestReconnectWait checks the wait after each kind of failure: the
// backoff without a Retry-After or when longer, the Retry-After up to
// feedRetryAfterMax.
func TestReconnectWait(t *testing.T) {
	answered := func(after time.Duration) error { return &retryError{err: errors.New("answered 503"), after: after} }
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		err     error
		want    time.Duration
	}{
		{"no Retry-After", 100 * time.Millisecond, errors.New("connection refused"), 100 * time.Millisecond},
		{"Retry-After longer", 100 * time.Millisecond, answered(7 * time.Second), 7 * time.Second},
		{"backoff longer", feedBackoffMax, answered(time.Second), feedBackoffMax},
		{"capped", feedBackoffMin, answered(300 * time.Second), feedRetryAfterMax},
	} {
		if got := reconnectWait(tc.backoff, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// roundTrip is a RoundTripper that answers in memory.
type roundTrip func(*http.Request) *http.Response

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }
