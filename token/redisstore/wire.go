package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// NewService wires a token.Service to Redis, as the server (serve) and the
// test issuer (clienttest) both run it: a Store on rdb with so, then the
// service with keys, ids and opts on it. What so leaves zero of the
// store's log retention and leeway is what the service needs
// (token.LogRetention of its MaxTTL and leeway, and its leeway), so that
// token.NewService never refuses the store.
//
// follow, if not nil, is given the store before the service is made, and
// returns what the service decides from (opts.Revocations): a follower of
// the store's log (serve's). The caller closes the store after the
// service's last request; on an error NewService closes it.
func NewService(rdb redis.UniversalClient, so Options, keys *keyset.Set, ids token.IDs, opts token.Options,
	follow func(*Store) (token.Revocations, error)) (*token.Service, *Store, error) {
	maxTTL, leeway := opts.MaxTTL, opts.Leeway
	if maxTTL == 0 {
		maxTTL = token.DefaultMaxTTL
	}
	if leeway == 0 {
		leeway = token.DefaultLeeway
	}
	leeway = max(leeway, 0)
	if err := so.Check(); err != nil {
		return nil, nil, err
	}
	if so.LogRetention == 0 {
		so.LogRetention = token.LogRetention(maxTTL, leeway)
	}
	if so.Leeway == 0 {
		so.Leeway = leeway
	}
	store := New(rdb, so)
	if follow != nil {
		r, err := follow(store)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		opts.Revocations = r
	}
	svc, err := token.NewService(keys, store, ids, opts)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return svc, store, nil
}
