package revfeed

import "fmt"

// Subscriber is the authenticated client a stream or a waiting poll is
// served to.
type Subscriber struct {
	// Client is the client's ID: the key of MaxPerClient.
	Client string
}

// subscriber is a stream or a waiting poll in the feed's registry.
type subscriber struct {
	Subscriber
	stream bool
}

// join registers s as a stream or a waiting poll, starting the heartbeat's
// ticker for the first stream. Past MaxSubscribers it is ErrBusy, past
// MaxPerClient of its client ErrClientBusy.
func (f *Feed) join(s Subscriber, stream bool) (*subscriber, error) {
	sub := &subscriber{Subscriber: s, stream: stream}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(f.subs) >= f.opts.MaxSubscribers:
		return nil, fmt.Errorf("%w: %d", ErrBusy, f.opts.MaxSubscribers)
	case f.perClient[s.Client] >= f.opts.MaxPerClient:
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
