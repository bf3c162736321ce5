package revfeed

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

// maxPollBody bounds a poll request's body: acks of Page IDs and room.
const maxPollBody = 64 << 10

// parsePoll reads a poll request strictly: one JSON object of RFC 8936's
// members and nonce (no others), every ack an event ID, maxEvents not
// negative, a nonce as CheckNonce's.
func parsePoll(body io.Reader) (*revocation.PollRequest, string, error) {
	dec := json.NewDecoder(io.LimitReader(body, maxPollBody+1))
	dec.DisallowUnknownFields()
	var req revocation.PollRequest
	if err := dec.Decode(&req); err != nil {
		return nil, "", refusal.Describe(fmt.Errorf("%w: poll: %w", token.ErrInvalidRequest, err),
			"the body is not a poll request: a JSON object of ack, setErrs, maxEvents and returnImmediately (RFC 8936 §2.4), at most 64 KiB")
	}
	if dec.More() {
		return nil, "", refusal.New(token.ErrInvalidRequest, "one JSON object only")
	}
	if req.MaxEvents != nil && *req.MaxEvents < 0 {
		return nil, "", refusal.New(token.ErrInvalidRequest, "maxEvents must not be negative")
	}
	if req.Nonce != "" {
		if err := checkNonceValue(req.Nonce); err != nil {
			return nil, "", err
		}
	}
	var pos string
	var posID revocation.EventID
	for _, id := range req.Ack {
		p, err := CheckID(id)
		if err != nil {
			return nil, "", refusal.Within("ack", err)
		}
		if pos == "" || !p.SameEpoch(posID) || posID.Less(p.StreamID) {
			pos, posID = id, p
		}
	}
	return &req, pos, nil
}

// Poll answers a poll request read from body (application/json) of an
// authenticated subscriber. The position is the latest ID acked; without
// one, or one that cannot be resumed, the answer is reset. Without
// returnImmediately it waits, up to PollWait, for an event; such a wait
// counts against MaxPerClient and MaxSubscribers, and ends with the
// error of the subscriber's Standing once that fails (Recheck). An error is
// returned, with nothing written, for a request that is refused; once the
// poll has waited, the caller has WriteTimeout to write it, as Poll has to
// write an answer.
func (f *Feed) Poll(w http.ResponseWriter, r *http.Request, body io.Reader, who Subscriber) error {
	req, pos, err := parsePoll(body)
	if err != nil {
		return err
	}
	limit := f.opts.Page
	if req.MaxEvents != nil {
		limit = min(*req.MaxEvents, f.opts.Page)
	}
	resp := revocation.PollResponse{Sets: map[string]string{}}
	if pos == "" {
		resp.Reset = true
		return f.writePoll(w, &resp)
	}
	wait := !req.ReturnImmediately && limit > 0
	var sub *subscriber
	var cut, moved <-chan struct{}
	var expiry *time.Timer // when sub's credential expires: ask its standing again
	if wait {
		if sub, err = f.join(who, false); err != nil {
			return err
		}
		defer f.leave(sub)
		cut, moved = sub.cut, sub.moved
		expiry = sub.timer(f.opts.Now())
		defer func() { stopTimer(expiry) }()
	}
	rc := http.NewResponseController(w)
	deadline := time.NewTimer(f.opts.PollWait)
	defer deadline.Stop()
	for {
		if sub != nil && sub.ended() {
			if err := f.writeWithin(rc); err != nil {
				return err
			}
			return sub.why
		}
		changed := f.opts.Source.Changed()
		st := f.opts.Source.Status(f.opts.Now())
		evs, ok := f.opts.Source.Since(pos, limit+1)
		if ok && len(evs) == 0 && wait {
			select {
			case <-r.Context().Done():
				return nil
			case <-cut:
			case <-timerC(expiry):
				f.check(sub)
			case <-moved:
				stopTimer(expiry)
				expiry = sub.timer(f.opts.Now())
			case <-deadline.C:
				wait = false // answer with what there is: nothing
			case <-changed:
				if f.opts.Draining != nil && f.opts.Draining() {
					wait = false
				}
			}
			continue
		}
		// The server's write deadline passed during a long wait: the answer
		// gets WriteTimeout from now, as a stream's writes do.
		if err := f.writeWithin(rc); err != nil {
			return err
		}
		if !ok {
			resp.Reset = true
			return f.writePoll(w, &resp)
		}
		if len(evs) > limit {
			evs, resp.MoreAvailable = evs[:limit], true
		}
		for _, ev := range evs {
			raw, err := f.set(ev)
			if err != nil {
				return err
			}
			resp.Sets[ev.ID] = raw
		}
		// The heartbeat vouches for events up to its last only if the
		// answer holds them all.
		if st.Fresh && !resp.MoreAvailable && sameEpoch(st.Last, pos) {
			if resp.Heartbeat, _, err = f.signHeartbeat(st, req.Nonce); err != nil {
				return err
			}
		}
		return f.writePoll(w, &resp)
	}
}

func (f *Feed) writePoll(w http.ResponseWriter, resp *revocation.PollResponse) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// timerC is t's channel; nil (never ready) without t.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// stopTimer stops t, if any.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
