package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Keeping the lease (Run: renewal, loss, claiming again) and releasing it
// (the package doc's Lifecycle).

// Run keeps the lease until ctx ends or Release is called. Every RenewEvery it
// renews the lease and saves highWater() (nil or a zero time saves nothing);
// after a failed renewal it retries four times as often. When the lease is
// lost it calls OnChange(false) and from then on tries to claim the same
// worker ID again, calling OnChange(true) once it has. It never releases the
// lease: call Release after Run has returned and the last ID is issued.
func (l *Lease) Run(ctx context.Context, highWater func() time.Time) {
	retry := max(l.renewEvery/4, time.Millisecond)
	delay := l.renewEvery - l.now().Sub(l.state.Load().renewed)
	t := time.NewTimer(min(max(delay, 0), l.renewEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, l.renewEvery)
		err := l.renew(sctx, highWater)
		cancel()
		switch {
		case errors.Is(err, ErrReleased):
			return
		case err != nil:
			t.Reset(retry)
		default:
			t.Reset(l.renewEvery)
		}
	}
}

// renew does one step of Run: it renews a held lease, or marks it lost, or
// claims a lost lease's worker again. It returns nil when the lease is held
// afterwards.
func (l *Lease) renew(ctx context.Context, highWater func() time.Time) error {
	l.mu.Lock()
	changed, err := l.step(ctx, highWater)
	l.mu.Unlock()
	if changed && l.onChange != nil {
		l.onChange(err == nil)
	}
	return err
}

// step is renew under l.mu; changed reports a change of validity.
func (l *Lease) step(ctx context.Context, highWater func() time.Time) (changed bool, err error) {
	s := l.state.Load()
	if s.releasing() {
		return false, s.err
	}
	if s.err != nil {
		ok, st, err := l.claim(ctx, l.worker, l.keys)
		if err != nil {
			l.log.Debug("lease: claiming lost worker id again failed", "worker_id", l.worker, "err", err)
			return false, err
		}
		if !ok {
			return false, s.err
		}
		l.state.Store(st)
		l.log.Info("lease: claimed lost worker id again", "worker_id", l.worker, "high_water", l.HighWater())
		return true, nil
	}
	start := l.now()
	if since := start.Sub(s.renewed); since >= l.ttl {
		return true, l.lose(s, fmt.Sprintf("no successful renewal for %v (ttl %v)", since, l.ttl))
	}
	var mark string
	if highWater != nil {
		mark = markMs(highWater())
	}
	res, err := renewScript.Run(ctx, l.rdb, l.keys, l.owner, l.ttl.Milliseconds(), mark, untilMs(start, l.ttl)).Int64()
	switch {
	case err != nil:
		l.log.Warn("lease: renewal failed", "worker_id", l.worker, "err", err)
		return false, fmt.Errorf("lease: renewing worker %d: %w", l.worker, err)
	case res == 0:
		return true, l.lose(s, "the lease key is gone")
	case res < 0:
		return true, l.lose(s, "another owner holds the lease key")
	}
	l.state.Store(&state{renewed: start, highWater: s.highWater, issueFrom: s.issueFrom})
	return false, nil
}

// lose marks the lease lost for the given reason and returns the error Err
// reports from now on.
func (l *Lease) lose(s *state, reason string) error {
	err := fmt.Errorf("%w: worker %d: %s", ErrLost, l.worker, reason)
	l.state.Store(&state{err: err, renewed: s.renewed, highWater: s.highWater, issueFrom: s.issueFrom})
	l.log.Warn("lease: lost worker id", "worker_id", l.worker, "reason", reason)
	return err
}

// Release saves highWater (the newest millisecond issued, such as the
// generator's HighWater; zero saves nothing) and deletes the lease, if this
// lease still owns the worker; otherwise it changes nothing in Redis. Valid is
// false from the call on. Stop issuing before reading highWater: an ID issued
// after it is not covered. Release is idempotent; after an error it may be
// called again.
func (l *Lease) Release(ctx context.Context, highWater time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s.released {
		return nil
	}
	if !s.releasing() {
		// Stop issuing first (and stop Run from claiming again), then tell Redis.
		s = &state{err: fmt.Errorf("%w: worker %d", ErrReleased, l.worker), renewed: s.renewed, highWater: s.highWater}
		l.state.Store(s)
	}
	res, err := releaseScript.Run(ctx, l.rdb, l.keys, l.owner, markMs(highWater)).Int64()
	if err != nil {
		return fmt.Errorf("lease: releasing worker %d: %w", l.worker, err)
	}
	l.state.Store(&state{err: s.err, released: true, renewed: s.renewed, highWater: s.highWater})
	if res == 1 {
		l.log.Info("lease: released worker id", "worker_id", l.worker, "high_water", highWater)
	} else {
		l.log.Warn("lease: not released: another owner holds the worker id or its key is gone", "worker_id", l.worker)
	}
	return nil
}
