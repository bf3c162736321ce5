package revfeed

import (
	"errors"
	"net/http"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Events serves the stream to an authenticated subscriber. It returns an
// error, and writes nothing, when the request is refused (a malformed
// Last-Event-ID or nonce, ErrClientBusy, ErrBusy, the subscriber's
// Standing): the caller writes it in its own shape. Once the stream has
// begun it returns nil, whatever ends it: the subscriber's Standing
// failing (Recheck) ends it too. A HEAD request gets the headers only.
func (f *Feed) Events(w http.ResponseWriter, r *http.Request, who Subscriber) error {
	last := r.Header.Get("Last-Event-ID")
	if last != "" {
		if _, err := CheckID(last); err != nil {
			return refusal.Within("Last-Event-ID", err)
		}
	}
	nonce, err := CheckNonce(r)
	if err != nil {
		return err
	}
	sub, err := f.join(who, true)
	if err != nil {
		return err
	}
	defer f.leave(sub)
	if sub.ended() {
		return sub.why
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer this response
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	s := &stream{f: f, sub: sub, w: w, rc: http.NewResponseController(w), last: last, nonce: nonce}
	w.WriteHeader(http.StatusOK)
	if err := s.run(r); err != nil {
		f.opts.Logger.Debug("revocation feed: subscriber dropped", "err", err)
	}
	return nil
}

// stream is one subscriber's.
type stream struct {
	f       *Feed
	sub     *subscriber
	w       http.ResponseWriter
	rc      *http.ResponseController
	last    string // the last event ID written
	nonce   string // the request's
	bound   bool   // the stream JWT is written
	boundMs int64  // its iat_ms
	beat    string // the last heartbeat written
	buf     []byte
}

func (s *stream) run(r *http.Request) error {
	// retry: how soon a browser's EventSource reconnects.
	s.buf = append(s.buf[:0], "retry: 100\n\n"...)
	if err := s.flush(); err != nil {
		return err
	}
	if s.last == "" {
		return s.reset()
	}
	ctx := r.Context()
	for {
		if s.sub.ended() { // cut off: nothing more is written
			return nil
		}
		b := s.f.current() // before the events: its last is among them or before
		changed := s.f.opts.Source.Changed()
		for {
			evs, ok := s.f.opts.Source.Since(s.last, s.f.opts.Page)
			if !ok {
				return s.reset()
			}
			if !s.bound {
				if err := s.bind(); err != nil {
					return err
				}
			}
			for _, ev := range evs {
				raw, err := s.f.set(ev)
				if err != nil {
					return err
				}
				s.buf = append(s.buf, "id: "...)
				s.buf = append(s.buf, ev.ID...)
				s.buf = append(s.buf, "\nevent: revoked\ndata: "...)
				s.buf = append(s.buf, raw...)
				s.buf = append(s.buf, "\n\n"...)
				s.last = ev.ID
			}
			if len(evs) < s.f.opts.Page {
				break
			}
			if err := s.flush(); err != nil {
				return err
			}
		}
		// A heartbeat older than two ticks (the ticker was held up) is not
		// sent: it would cost the consumer its freshness, which counts from
		// the heartbeat's iat_ms. Nor is one signed before the stream JWT:
		// the consumer ignores it.
		if b.jwt != "" && b.jwt != s.beat && b.ms >= s.boundMs && sameEpoch(b.last, s.last) &&
			time.Since(b.at) <= 2*s.f.opts.Heartbeat {
			s.buf = append(s.buf, "event: heartbeat\ndata: "...)
			s.buf = append(s.buf, b.jwt...)
			s.buf = append(s.buf, "\n\n"...)
			s.beat = b.jwt
		}
		if len(s.buf) > 0 {
			if err := s.flush(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.sub.cut:
			return nil
		case <-changed:
		case <-b.next:
			if s.f.opts.Draining != nil && s.f.opts.Draining() {
				return nil
			}
			if s.sub.expired(s.f.opts.Now) {
				s.f.check(s.sub)
			}
		}
	}
}

// reset tells the subscriber to fetch the snapshot; the stream ends.
func (s *stream) reset() error {
	s.buf = append(s.buf, "event: reset\ndata: {}\n\n"...)
	return s.flush()
}

// flush writes the buffer within WriteTimeout.
func (s *stream) flush() error {
	if err := s.f.writeWithin(s.rc); err != nil {
		return err
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return s.rc.Flush()
}

// writeWithin gives the write that follows WriteTimeout from now: the
// server's own write deadline (http.Server.WriteTimeout, 10 s in
// cmd/server) was set when the request was read, and a stream or a poll
// that waited outlives it. A writer without deadlines (httptest's
// recorder) is left as it is.
func (f *Feed) writeWithin(rc *http.ResponseController) error {
	if err := rc.SetWriteDeadline(time.Now().Add(f.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
