package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// Bounds of what is read from the feed.
const (
	// maxFeedLine bounds one line of the stream (a SET is well under 1 KiB).
	maxFeedLine = 16 << 10
	// maxFeedEvent bounds one event of the stream, all its lines together:
	// the issuer writes each event's data on one line, so no event of its
	// is larger than a line.
	maxFeedEvent = maxFeedLine
	// maxSnapshotBytes bounds the snapshot: 71 bytes a revoked token, 88 a
	// subject (docs/revocation.md), so some 950,000 tokens or 760,000 subjects.
	maxSnapshotBytes = 64 << 20
	// Reconnection backoff, doubled after each failure.
	feedBackoffMin = 50 * time.Millisecond
	feedBackoffMax = 5 * time.Second
	// feedRetryAfterMax bounds the wait an issuer's Retry-After asks of the
	// follower (reconnectWait): the state goes stale meanwhile and fails
	// closed, so an issuer that asks for an hour must not hold it back for one.
	feedRetryAfterMax = 6 * feedBackoffMax
	// feedPruneEvery is how often revoked tokens past their exp are forgotten.
	feedPruneEvery = 10 * time.Second
)

// errFeedReset: the issuer cannot resume the stream; fetch the snapshot.
var errFeedReset = errors.New("the issuer reset the stream")

// feed follows {IssuerURL}/revocations/events (RevocationCheck Follow) and
// keeps the revocations in memory. Its lifecycle:
//
//	start (first Validate, or Start) ──▶ GET /revocations/events?nonce=N (no Last-Event-ID)
//	  ──▶ reset ──▶ GET /revocations?nonce=N' (snapshot: state, last, N') ──▶ GET /revocations/events?nonce=N'', Last-Event-ID: last
//	  ──▶ stream JWT (N'', signed at iat S after the request left at C): this clock reads issuer time x as ≥ x + (C − S)
//	  ──▶ revoked SETs applied, heartbeats signed at or after S make the state fresh until
//	      their iat_ms − age_ms + FeedThreshold + (C − S), read on this clock
//	  ──▶ stream ends, fails or brings a JWT that does not verify ──▶ backoff ──▶ reconnect from last
//	Close ──▶ the goroutine ends; the state goes stale
type feed struct {
	v                    *Validator
	eventsURL, snapURL   string
	parser               *jwt.Parser
	startOnce, closeOnce sync.Once
	cancel               context.CancelFunc
	done                 chan struct{} // closed when the goroutine ends
	fresh                chan struct{} // closed at the first fresh heartbeat
	freshOnce            sync.Once
	mu                   sync.RWMutex
	state                *revocation.State // the followed state: the core's; synced once a snapshot is applied
	lastBeatMs           int64             // the iat_ms of the last heartbeat accepted: replays are refused
	newNonce             func() string
	pruned               time.Time // when the state last forgot what is past (State.Forget)
}

func newFeed(v *Validator, base string) *feed {
	st, _ := revocation.NewState(v.stateOptions(), "", 0) // the options are checked by New
	return &feed{
		v: v, eventsURL: base + "/revocations/events", snapURL: base + "/revocations", state: st,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(v.opts.Issuer), jwt.WithIssuedAt(), jwt.WithLeeway(v.opts.Leeway), jwt.WithTimeFunc(v.opts.Now)),
		fresh: make(chan struct{}), done: make(chan struct{}), newNonce: newNonce,
	}
}

// stateOptions are the core's durations for the followed state: the
// Validator's leeway, and FeedRetention past it.
func (v *Validator) stateOptions() revocation.Options {
	return revocation.Options{Leeway: v.opts.Leeway, Retention: v.opts.FeedRetention + v.opts.Leeway}
}

// newNonce returns 256 random bits, base64url: a request's nonce.
func newNonce() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// conn is what one stream's first JWT told: the nonce sent, when the
// request left (this clock), and, once bound, when the issuer signed it
// (its clock) and the least offset of this clock from the issuer's.
type conn struct {
	nonce  string
	sent   time.Time
	bound  bool
	iatMs  int64
	offset time.Duration // this clock − the issuer's is at least this
}

// start starts following, once.
func (f *feed) start() {
	f.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		go f.run(ctx)
	})
}

// close stops following and waits for the goroutine.
func (f *feed) close() {
	f.start() // so that done is closed
	f.closeOnce.Do(f.cancel)
	<-f.done
}

// Start begins following the revocation feed (RevocationCheck Follow) and
// waits until the state is fresh or ctx ends (an error wrapping
// ErrUnavailable). Validate starts following by itself at the first token;
// Start lets a service wait for the feed before it reports ready. Close
// stops it. Start is an error in any other mode.
func (v *Validator) Start(ctx context.Context) error {
	if v.feed == nil {
		return fmt.Errorf("%w: Start is for RevocationCheck Follow", ErrOptions)
	}
	v.feed.start()
	select {
	case <-v.feed.fresh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: the revocation feed is not fresh yet: %w", ErrUnavailable, ctx.Err())
	}
}

// Close stops following the revocation feed, if the Validator follows it,
// and waits until its goroutine has ended; from then on every token that
// needs the feed gets the WhenStale answer. It is safe to call more than
// once, and without Follow it does nothing.
func (v *Validator) Close() error {
	if v.feed != nil {
		v.feed.close()
	}
	return nil
}

// run follows the feed until ctx ends, reconnecting with backoff.
func (f *feed) run(ctx context.Context) {
	defer close(f.done)
	backoff := feedBackoffMin
	var lastLog time.Time
	resetBefore := false // the last stream ended in a reset too
	for ctx.Err() == nil {
		progressed, err := f.follow(ctx)
		if errors.Is(err, errFeedReset) {
			reset := resetBefore && !progressed
			resetBefore = true
			if err = f.snapshot(ctx); err == nil && !reset {
				continue // straight on to the stream after the snapshot
			}
			if err == nil {
				err = errors.New("the stream reset again right after a snapshot")
			}
		} else {
			resetBefore = false
		}
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff = feedBackoffMin
		}
		// One line a minute at most: a feed down for long does not flood.
		if now := time.Now(); now.Sub(lastLog) >= time.Minute {
			lastLog = now
			f.v.opts.Logger.Warn("snowtoken client: the revocation feed is interrupted; reconnecting", "url", f.eventsURL, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectWait(backoff, err)):
		}
		backoff = min(2*backoff, feedBackoffMax)
	}
}

// reconnectWait is how long run waits before it reconnects after err:
// backoff, or longer when the issuer answered with a Retry-After (a 503 or
// 429 of the stream or the snapshot), but never past feedRetryAfterMax.
// Waiting fails nothing open: no heartbeat comes meanwhile, so the state
// goes stale after FeedThreshold and every token needing it gets the
// WhenStale answer.
func reconnectWait(backoff time.Duration, err error) time.Duration {
	var r *retryError
	if errors.As(err, &r) {
		return max(backoff, min(r.after, feedRetryAfterMax))
	}
	return backoff
}

// request sends an authenticated GET.
func (f *feed) request(ctx context.Context, u string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	// RFC 6749 §2.3.1: form-urlencoded, then Basic.
	req.SetBasicAuth(url.QueryEscape(f.v.opts.FeedClientID), url.QueryEscape(f.v.opts.FeedClientSecret))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.v.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, withRetryAfter(fmt.Errorf("GET %s answered %d", req.URL.Path, resp.StatusCode), resp.Header)
	}
	return resp, nil
}

// follow reads one stream until it ends. progressed reports whether a
// heartbeat was accepted on it.
func (f *feed) follow(ctx context.Context) (progressed bool, err error) {
	f.mu.RLock()
	hdr := map[string]string{"Accept": "text/event-stream"}
	if f.state.Synced() {
		hdr["Last-Event-ID"] = f.state.Last().String()
	}
	f.mu.RUnlock()
	c := &conn{nonce: f.newNonce(), sent: f.v.opts.Now()}
	// A stream that brings nothing for Timeout (a connection dead without a
	// word, or an issuer whose state is stale) is dropped and reconnected.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(f.v.opts.Timeout, cancel)
	defer idle.Stop()
	resp, err := f.request(ctx, f.eventsURL+"?nonce="+c.nonce, hdr)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, fmt.Errorf("content type %.40q, want text/event-stream", ct)
	}
	r := bufio.NewReaderSize(resp.Body, 4096)
	var p sseParser
	for {
		line, err := readLine(r)
		if err != nil {
			return progressed, err
		}
		ev, ok, err := p.line(line)
		if err != nil {
			return progressed, err
		}
		if !ok {
			continue
		}
		switch ev.name {
		case "stream":
			err = f.applyStream(ctx, c, ev.data)
		case "revoked":
			err = f.applySET(ctx, ev.id, ev.data)
		case "heartbeat":
			err = f.applyHeartbeat(ctx, c, ev.data)
			progressed = progressed || err == nil
		case "reset":
			return progressed, errFeedReset
		default:
			continue // an event the feed does not send: not a sign of life
		}
		if err != nil {
			return progressed, err
		}
		// Only an event that verified and applied counts as the stream
		// bringing something: comment lines, unknown events or lines that
		// never end an event do not hold a dead stream open.
		idle.Reset(f.v.opts.Timeout)
	}
}
