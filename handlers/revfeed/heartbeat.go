package revfeed

import (
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// beat is one tick: the heartbeat signed then (empty while the Source was
// not Fresh) and a channel closed at the next tick.
type beat struct {
	jwt  string
	last string
	at   time.Time // when it was signed
	ms   int64     // its iat_ms
	next chan struct{}
}

// tick signs a heartbeat every Heartbeat while the Source is Fresh, and
// publishes every tick (with or without one) until stop.
func (f *Feed) tick(stop chan struct{}) {
	t := time.NewTicker(f.opts.Heartbeat)
	defer t.Stop()
	var loggedAt time.Time
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b := &beat{next: make(chan struct{})}
		if st := f.opts.Source.Status(f.opts.Now()); st.Fresh {
			raw, ms, err := f.signHeartbeat(st, "")
			if err != nil {
				// Every tick would say it again: once a minute at most.
				if now := time.Now(); now.Sub(loggedAt) >= time.Minute {
					loggedAt = now
					f.opts.Logger.Error("revocation feed: cannot sign a heartbeat; consumers go stale", "err", err)
				}
			} else {
				b.jwt, b.last, b.at, b.ms = raw, st.Last, time.Now(), ms
			}
		}
		f.mu.Lock()
		old := f.beat
		f.beat = b
		f.mu.Unlock()
		close(old.next)
	}
}

func (f *Feed) current() *beat {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beat
}

// signHeartbeat signs a heartbeat for st now, with nonce if not empty; it
// returns it and its iat_ms.
func (f *Feed) signHeartbeat(st revocation.Status, nonce string) (string, int64, error) {
	now := f.opts.Now()
	raw, err := f.opts.Sign(revocation.TypeHeartbeat, &revocation.HeartbeatClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Epoch: st.Epoch, Last: st.Last,
		AgeMs: max(st.Age.Milliseconds(), 0), Horizon: st.Horizon, Nonce: nonce,
	})
	return raw, now.UnixMilli(), err
}
