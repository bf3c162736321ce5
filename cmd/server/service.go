package server

import (
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// newService composes the token.Service from cfg: its options resolved
// once (token.Options.Resolved, the one place of their defaults), the
// session store on rdb sized for them (the log's retention and the leeway
// the service needs), the follower started on the store (fw.start), then
// the service. The caller closes the store after the last request, and
// stops fw; on an error newService closes the store and the caller stops fw.
func newService(cfg config.Config, rdb redis.UniversalClient, tp trace.TracerProvider, keys *keyset.Set, ids token.IDs,
	fw *following) (*token.Service, *redisstore.Store, error) {
	opts, err := token.Options{
		Issuer: cfg.Issuer, Audience: cfg.Audience, TTL: cfg.TokenTTL, MaxTTL: cfg.MaxTokenTTL,
		CacheSize: cfg.CacheSize,
	}.Resolved()
	if err != nil {
		return nil, nil, err
	}
	store, err := redisstore.New(rdb, redisstore.Options{Timeout: cfg.RedisTimeout, TracerProvider: tp,
		LogRetention: token.LogRetention(opts.MaxTTL, opts.Leeway), Leeway: opts.Leeway})
	if err != nil {
		return nil, nil, err
	}
	if opts.Revocations, err = fw.start(store); err != nil {
		store.Close()
		return nil, nil, err
	}
	svc, err := token.NewService(keys, store, ids, opts)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return svc, store, nil
}
