package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proofs is the record of the IDs of accepted DPoP proofs that every
// replica on the store shares (package client/dpop's ReplayCache), so that
// a proof replayed at another replica is refused too:
//
//	st:dpop:<id> = 1   TTL = until − now + the store's leeway   (SET NX PX: one command)
type Proofs struct{ s *Store }

// Proofs returns the store's record of DPoP proofs.
func (s *Store) Proofs() *Proofs { return &Proofs{s} }

// Seen records id until until, a time on the checker's clock that read now,
// and reports whether it was recorded already: one SET NX PX, atomic for
// every replica. The TTL is counted on Redis's clock from when it sets the
// key, so only the time the command takes to arrive stands between the two
// clocks; the store's leeway (Options.Leeway) covers it, and keeps a record
// whose until has passed (a proof the checker should not have accepted) for
// that long. An error is token.ErrUnavailable's.
func (p *Proofs) Seen(ctx context.Context, id string, now, until time.Time) (bool, error) {
	ttl := max(until.Sub(now), 0) + p.s.leeway
	cmd := redis.NewStatusCmd(ctx, "set", p.s.prefix+"dpop:"+id, "1", "px", max(ttl.Milliseconds(), 1), "nx")
	switch err := p.s.do(ctx, cmd); {
	case errors.Is(err, redis.Nil):
		return true, nil // NX: there already
	case err != nil:
		return false, unavailable(err)
	}
	return false, nil
}
