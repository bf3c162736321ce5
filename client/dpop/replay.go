package dpop

import (
	"context"
	"sync"
	"time"
)

// ReplayCache records the IDs of accepted proofs (see the package doc for
// its contract).
type ReplayCache interface {
	// Seen records id until until and reports whether it was already
	// recorded, as one atomic step. now is the time the proof was checked
	// at, on the Checker's clock (Check's now), and until is on that clock
	// too: a record that runs on another clock must allow for the
	// difference (a shared store: the clock skew between its hosts).
	Seen(ctx context.Context, id string, now, until time.Time) (bool, error)
}

// MemoryReplay is a ReplayCache in memory, for one process and tests. An ID
// counts as recorded until its until is past on the clock Seen is given;
// once every sweepEvery of it, Seen drops all such IDs, so it holds about
// the IDs of the proofs accepted within MaxAge. A clock set back only
// delays the next sweep: no ID is dropped before its until.
type MemoryReplay struct {
	mu        sync.Mutex
	until     map[string]time.Time
	nextSweep time.Time
}

// NewMemoryReplay returns an empty MemoryReplay.
func NewMemoryReplay() *MemoryReplay {
	return &MemoryReplay{until: make(map[string]time.Time)}
}

// sweepEvery is how often Seen drops the IDs whose until has passed.
const sweepEvery = 10 * time.Second

// Seen implements ReplayCache.
func (m *MemoryReplay) Seen(_ context.Context, id string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.After(m.nextSweep) {
		for k, u := range m.until {
			if now.After(u) {
				delete(m.until, k)
			}
		}
		m.nextSweep = now.Add(sweepEvery)
	}
	if u, ok := m.until[id]; ok && !now.After(u) {
		return true, nil
	}
	m.until[id] = until
	return false, nil
}
