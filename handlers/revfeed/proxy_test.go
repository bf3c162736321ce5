package revfeed_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/clienttest"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// proxy stands between a consumer and the issuer as an untrusted proxy
// may: it cannot forge the feed, but it records it, replays what it
// recorded, or holds the stream back. It forwards every request, and
// records the last snapshot and the first recordLimit bytes of the last
// resumed stream (with Last-Event-ID), unless told to replay them.
type proxy struct {
	URL      string
	upstream string

	mu             sync.Mutex
	replaySnapshot bool          // answer GET /revocations with the recorded one
	replayStream   bool          // answer a resumed stream with the recorded one
	hold           time.Duration // deliver each chunk of a stream this long after it came
	snapshot       []byte
	stream         []byte
	replays        int // snapshots and streams answered from the recording
	beats          int // heartbeats delivered (not replayed)
}

const recordLimit = 64 << 10

func newProxy(t *testing.T, upstream string) *proxy {
	p := &proxy{upstream: upstream}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	resumed := r.URL.Path == "/revocations/events" && r.Header.Get("Last-Event-ID") != ""
	p.mu.Lock()
	switch {
	case r.URL.Path == "/revocations" && p.replaySnapshot:
		p.replays++
		body := p.snapshot
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwt")
		_, _ = w.Write(body)
		return
	case resumed && p.replayStream:
		p.replays++
		body := p.stream
		p.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
		return
	}
	hold := p.hold
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 4096)
			n, err := resp.Body.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	var rec []byte
	for c := range chunks {
		time.Sleep(time.Until(c.at.Add(hold)))
		if _, err := w.Write(c.b); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		rec = append(rec, c.b[:min(len(c.b), recordLimit-len(rec))]...)
		p.mu.Lock()
		p.beats += bytes.Count(c.b, []byte("event: heartbeat"))
		switch {
		case r.URL.Path == "/revocations":
			p.snapshot = rec
		case resumed:
			p.stream = rec
		}
		p.mu.Unlock()
	}
}

// count reads one of p's counters.
func (p *proxy) count(read func() int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return read()
}

// waitCount waits until read says at least n.
func (p *proxy) waitCount(t *testing.T, what string, read func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for p.count(read) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, p.count(read), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// followThrough is a Validator following is's feed through p, started
// (not waited for), closed when t ends.
func followThrough(t *testing.T, is *clienttest.Issuer, p *proxy) *client.Validator {
	t.Helper()
	v, err := client.New(client.Options{IssuerURL: p.URL, Issuer: is.URL, Mode: client.Local, RevocationCheck: client.Follow,
		FeedClientID: is.ClientID, FeedClientSecret: is.ClientSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = v.Start(ctx) // starts following; ctx ended: does not wait
	return v
}

func wantUnavailable(t *testing.T, v *client.Validator, tok, when string) {
	t.Helper()
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("%s: %v, want ErrUnavailable (not fresh)", when, err)
	}
}

// TestFeedReplayedThroughProxy checks that a proxy replaying a recorded
// stream (its stream JWT and signed heartbeats, of the same epoch and last,
// within seconds) to a consumer that restarted does not make it fresh, nor
// does a recorded snapshot: both carry another request's nonce. The same
// consumer through the same proxy forwarding is fresh.
func TestFeedReplayedThroughProxy(t *testing.T) {
	src := revfeedtest.New(true)
	is := clienttest.New(t, clienttest.Config{Feed: src})
	p := newProxy(t, is.URL)
	tok, err := is.Token(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	recorder := followThrough(t, is, p)
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if err := recorder.Start(ctx); err != nil {
		t.Fatalf("through a proxy that forwards: %v", err)
	}
	if _, err := recorder.Validate(t.Context(), tok); err != nil {
		t.Fatalf("through a proxy that forwards: %v", err)
	}
	p.waitCount(t, "heartbeats recorded", func() int { return bytes.Count(p.stream, []byte("event: heartbeat")) }, 5)
	recorder.Close()

	p.mu.Lock()
	p.replayStream = true
	p.mu.Unlock()
	restarted := followThrough(t, is, p)
	wantUnavailable(t, restarted, tok, "a recorded stream replayed")
	p.waitCount(t, "streams replayed", func() int { return p.replays }, 3)
	wantUnavailable(t, restarted, tok, "a recorded stream replayed, again and again")
	restarted.Close()

	p.mu.Lock()
	p.replaySnapshot, p.replays = true, 0
	p.mu.Unlock()
	again := followThrough(t, is, p)
	p.waitCount(t, "snapshots replayed", func() int { return p.replays }, 2)
	wantUnavailable(t, again, tok, "a recorded snapshot and stream replayed")
}

// TestFeedHeldBackThroughProxy checks that a proxy delivering every
// heartbeat, in order, but later than FeedThreshold after it was signed
// does not keep the consumer fresh: it counts a heartbeat from when it was
// signed, not from when it arrives.
func TestFeedHeldBackThroughProxy(t *testing.T) {
	src := revfeedtest.New(true)
	is := clienttest.New(t, clienttest.Config{Feed: src})
	p := newProxy(t, is.URL)
	p.hold = 2 * client.DefaultFeedThreshold
	tok, err := is.Token(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	v := followThrough(t, is, p)
	p.waitCount(t, "heartbeats held and delivered", func() int { return p.beats }, 20)
	wantUnavailable(t, v, tok, fmt.Sprintf("every heartbeat held back %v", p.hold))
}
