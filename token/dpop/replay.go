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
	// recorded, as one atomic step.
	Seen(ctx context.Context, id string, until time.Time) (bool, error)
}

// MemoryReplay is a ReplayCache in memory, for one process and tests. An ID
// counts as recorded until its until is past on its clock; once every
// sweepEvery, Seen drops all such IDs, so it holds about the IDs of the
// proofs accepted within MaxAge.
type MemoryReplay struct {
	now       func() time.Time
	mu        sync.Mutex
	until     map[string]time.Time
	nextSweep time.Time
}

// NewMemoryReplay returns an empty MemoryReplay whose clock is now; nil
// means time.Now.
func NewMemoryReplay(now func() time.Time) *MemoryReplay {
	if now == nil {
		now = time.Now
	}
	return &MemoryReplay{now: now, until: make(map[string]time.Time)}
}

// sweepEvery is how often Seen drops the IDs whose until has passed.
const sweepEvery = 10 * time.Second

// Seen implements ReplayCache.
func (m *MemoryReplay) Seen(_ context.Context, id string, until time.Time) (bool, error) {
	now := m.now()
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
