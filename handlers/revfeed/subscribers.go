package revfeed

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Subscriber is the authenticated client a stream or a waiting poll is
// served to.
type Subscriber struct {
	// Client is the client's ID: the key of MaxPerClient.
	Client string
	// Standing reports whether the client may still follow the feed with
	// the credential it authenticated with: nil and when that credential
	// expires (zero: never), or why not, as the error a new request would
	// get. The feed asks it when the subscriber joins
	// (a reload may have come since the client authenticated), at every
	// Recheck, and once that time has come; it ends the stream or answers
	// the poll with the error. It must be cheap while nothing changed: the
	// join of every stream calls it. Nil means the client's standing never
	// changes.
	Standing func() (time.Time, error)
}

// subscriber is a stream or a waiting poll in the feed's registry.
type subscriber struct {
	Subscriber
	stream  bool
	expires atomic.Int64  // Unix ns of Standing's time; 0: none
	moved   chan struct{} // receives when expires changes (a poll's timer follows it)
	cut     chan struct{} // closed once Standing gave an error
	once    sync.Once
	why     error // Standing's error; read after cut is closed
}

// join registers s as a stream or a waiting poll, starting the heartbeat's
// ticker for the first stream. Past MaxSubscribers it is ErrBusy, past
// MaxPerClient of its client ErrClientBusy. It then asks s's standing
// once: the caller checks ended.
func (f *Feed) join(s Subscriber, stream bool) (*subscriber, error) {
	sub := &subscriber{Subscriber: s, stream: stream, moved: make(chan struct{}, 1), cut: make(chan struct{})}
	f.mu.Lock()
	switch {
	case len(f.subs) >= f.opts.MaxSubscribers:
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrBusy, f.opts.MaxSubscribers)
	case f.perClient[s.Client] >= f.opts.MaxPerClient:
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrClientBusy, f.opts.MaxPerClient)
	}
	f.subs[sub] = struct{}{}
	f.perClient[s.Client]++
	f.count.Store(int64(len(f.subs)))
	if stream {
		f.streams++
		if f.stop == nil {
			f.stop = make(chan struct{})
			go f.tick(f.stop)
		}
	}
	f.mu.Unlock()
	// A reload between the client's authentication and its registration
	// is not in Recheck's list: ask now.
	f.check(sub)
	return sub, nil
}

// leave unregisters sub, stopping the ticker after the last stream.
func (f *Feed) leave(sub *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, sub)
	if n := f.perClient[sub.Client] - 1; n > 0 {
		f.perClient[sub.Client] = n
	} else {
		delete(f.perClient, sub.Client)
	}
	f.count.Store(int64(len(f.subs)))
	if !sub.stream {
		return
	}
	if f.streams--; f.streams == 0 && f.stop != nil {
		close(f.stop)
		f.stop = nil
		// The next subscriber must not get a heartbeat signed before the pause.
		f.beat = &beat{next: make(chan struct{})}
	}
}

// Recheck asks every stream and waiting poll for its client's standing
// (Subscriber.Standing) and ends those whose client may no longer follow
// the feed: a stream ends, a poll answers with the error. The handlers
// call it on every reload of the clients, so that a client disabled,
// removed, no longer allowed the feed or whose secret was rotated away is
// cut off at once, not when it chooses to leave.
func (f *Feed) Recheck() {
	f.mu.Lock()
	subs := make([]*subscriber, 0, len(f.subs))
	for sub := range f.subs {
		subs = append(subs, sub)
	}
	f.mu.Unlock()
	for _, sub := range subs {
		f.check(sub)
	}
}

// check asks sub's standing: it ends sub, or keeps when to ask again.
func (f *Feed) check(sub *subscriber) {
	if sub.Standing == nil {
		return
	}
	until, err := sub.Standing()
	if err != nil {
		sub.once.Do(func() {
			sub.why = err
			close(sub.cut)
		})
		f.opts.Logger.Debug("revocation feed: a subscriber cut off", "client_id", sub.Client, "err", err)
		return
	}
	var ns int64
	if !until.IsZero() {
		ns = until.UnixNano()
	}
	if sub.expires.Swap(ns) != ns {
		select {
		case sub.moved <- struct{}{}:
		default:
		}
	}
}

// timer returns a timer that fires when sub's credential expires, or nil
// when it does not.
func (sub *subscriber) timer(now time.Time) *time.Timer {
	if ns := sub.expires.Load(); ns != 0 {
		return time.NewTimer(time.Duration(ns - now.UnixNano()))
	}
	return nil
}

// expired reports whether sub's credential has reached the time its
// Standing gave: time to ask again. It reads the clock (now) only for a
// credential that expires.
func (sub *subscriber) expired(now func() time.Time) bool {
	ns := sub.expires.Load()
	return ns != 0 && now().UnixNano() >= ns
}

// ended reports whether sub was cut off.
func (sub *subscriber) ended() bool {
	select {
	case <-sub.cut:
		return true
	default:
		return false
	}
}
