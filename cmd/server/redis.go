package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/internal/redisconf"
)

// redisLog takes go-redis's own lines (a failed dial, a bad connection) into
// log as warnings, so that they are JSON and summarised like the rest.
type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, "redis client", "err", fmt.Sprintf(format, v...))
}

// openRedis connects to the configured Redis deployment, or in dev mode
// starts an embedded in-memory Redis whose keys expire in real time.
func openRedis(ctx context.Context, cfg config.Config, log *slog.Logger) (redis.UniversalClient, func(), error) {
	if rdb := cfg.NewRedisClient(); rdb != nil {
		// The client bounds the ping by SNOWTOKEN_REDIS_TIMEOUT.
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, nil, fmt.Errorf("redis does not answer (a worker id lease needs it to start): %w", err)
		}
		return rdb, func() { rdb.Close() }, nil
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("embedded redis: %w", err)
	}
	log.Warn("DEV MODE: embedded in-memory Redis; nothing persists and replicas do not share sessions. Set SNOWTOKEN_REDIS_URL (or another SNOWTOKEN_REDIS_* deployment) for production.")
	done := make(chan struct{})
	go expireInRealTime(m, done)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rdb, func() { close(done); rdb.Close(); m.Close() }, nil
}

// redisSettings checks once at start that Redis is configured for the
// promises (package redisconf), logs what is unsafe, and returns the check
// for /readyz, which fails while it does. The dev mode's embedded Redis has
// nothing to check.
func redisSettings(ctx context.Context, cfg config.Config, rdb redis.UniversalClient, log *slog.Logger) (func(context.Context) error, error) {
	if !cfg.RedisConfigured() {
		return nil, nil
	}
	c, err := redisconf.New(rdb, redisconf.Options{Accept: cfg.RedisAcceptRisk, Logger: log})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Check(cctx); errors.Is(err, redisconf.ErrUnsafe) {
		log.Error("redis settings: not ready until they are fixed or accepted", "err", err)
	}
	return c.Check, nil
}

// expireInRealTime moves miniredis's TTL clock along with the wall clock:
// miniredis only expires keys when told time has passed.
func expireInRealTime(m *miniredis.Miniredis, done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			m.FastForward(now.Sub(last))
			last = now
		}
	}
}
