package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/snowtoken/snowtoken/snowflakealg"
)

// Generator is a Snowflake generator that issues only while its lease is
// valid, under the leased worker ID, and never at or below the high-water mark
// of whoever held the worker before, including after Run has claimed the
// worker again.
type Generator struct {
	*snowflakealg.SnowFlakeAlg
	lease   *Lease
	applied atomic.Pointer[time.Time] // the lease mark the generator has been advanced to
}

// NewGenerator returns a generator for l's worker: s.WorkerID is replaced by
// the leased one and s.StartAfter raised to the lease's high-water mark.
func NewGenerator(l *Lease, s snowflakealg.Settings) (*Generator, error) {
	s.WorkerID = l.WorkerID()
	mark := l.HighWater()
	if mark.After(s.StartAfter) {
		s.StartAfter = mark
	}
	g, err := snowflakealg.New(s)
	if err != nil {
		return nil, err
	}
	gen := &Generator{SnowFlakeAlg: g, lease: l}
	gen.applied.Store(&mark)
	return gen, nil
}

// NextID returns a new ID, or an error wrapping ErrLost while the lease is not
// held. After the worker has been claimed again it first moves past the mark
// read at that claim: another replica may have issued under it in between.
func (g *Generator) NextID(ctx context.Context) (snowflakealg.ID, error) {
	if err := g.lease.Err(); err != nil {
		return 0, err
	}
	if mark := g.lease.HighWater(); mark.After(*g.applied.Load()) {
		if err := g.AdvanceTo(mark); err != nil {
			return 0, err
		}
		g.applied.Store(&mark)
	}
	return g.SnowFlakeAlg.NextID(ctx)
}

// Health fails while the lease is not held or the clock is far behind.
func (g *Generator) Health() error {
	if err := g.lease.Err(); err != nil {
		return fmt.Errorf("worker id lease: %w", err)
	}
	return g.SnowFlakeAlg.Health()
}
