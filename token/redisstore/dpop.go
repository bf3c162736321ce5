package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replays is a record of single-use IDs that every replica on the store
// shares, so that an ID replayed at another replica is refused too: the
// IDs of accepted DPoP proofs (Proofs; package client/dpop's ReplayCache)
// and of accepted client assertions (Assertions; package
// token/clientauth's ReplayCache), each under a key prefix of its own:
//
//	st:dpop:<id>      = 1   TTL = until − now + the store's leeway   (SET NX PX: one command)
//	st:assertion:<id> = 1   the same
type Replays struct {
	s    *Store
	kind string // the key's part after the store's prefix, such as "dpop:"
}

// Proofs returns the store's record of DPoP proofs.
func (s *Store) Proofs() *Replays { return &Replays{s, "dpop:"} }

// Assertions returns the store's record of client assertions (RFC 7523 §3's
// jti, not to be reused).
func (s *Store) Assertions() *Replays { return &Replays{s, "assertion:"} }

// Seen records id until until, a time on the checker's clock that read now,
// and reports whether it was recorded already: one SET NX PX, atomic for
// every replica. The TTL is counted on Redis's clock from when it sets the
// key, so only the time the command takes to arrive stands between the two
// clocks; the store's leeway (Options.Leeway) covers it, and keeps a record
// whose until has passed (an ID the checker should not have accepted) for
// that long. An error is token.ErrUnavailable's.
func (p *Replays) Seen(ctx context.Context, id string, now, until time.Time) (bool, error) {
	ttl := max(until.Sub(now), 0) + p.s.leeway
	cmd := redis.NewStatusCmd(ctx, "set", p.s.prefix+p.kind+id, "1", "px", max(ttl.Milliseconds(), 1), "nx")
	switch err := p.s.do(ctx, cmd); {
	case errors.Is(err, redis.Nil):
		return true, nil // NX: there already
	case err != nil:
		return false, unavailable(err)
	}
	return false, nil
}
