package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/revlog"
)

// followRevocations starts this replica's heartbeat writer and its
// follower of the revocation log (package revlog), each until the returned
// stop, and returns the follower, which validation asks before it reads
// Redis and the feed serves. It returns a nil follower, and starts
// nothing, when SNOWTOKEN_REVLOG_THRESHOLD is off, and in dev mode: the
// embedded Redis lacks what the follower needs (XINFO STREAM's
// entries-added), so there every validation reads Redis, as it does on any
// replica whose follower is stale. The follower's Redis client is its own:
// it holds a connection in XREAD BLOCK.
func followRevocations(cfg config.Config, rdb redis.UniversalClient, store *redisstore.Store, reg prometheus.Registerer, log *slog.Logger) (*revlog.Follower, func(), error) {
	switch {
	case cfg.RevlogOff:
		log.Warn("SNOWTOKEN_REVLOG_THRESHOLD=off: no revocation log follower; every validation reads Redis")
		return nil, func() {}, nil
	case !cfg.RedisConfigured():
		log.Warn("DEV MODE: the embedded Redis cannot carry the revocation log's heartbeats; every validation reads Redis")
		return nil, func() {}, nil
	}
	frdb := cfg.NewRedisClient()
	f, err := revlog.New(frdb, store.LogKey(), revlog.Options{Threshold: cfg.RevlogThreshold,
		Leeway: token.DefaultLeeway, Retention: token.LogRetention(cfg.MaxTokenTTL, token.DefaultLeeway),
		Registerer: reg, Logger: log, Redo: redoer(store)})
	if err != nil {
		frdb.Close()
		return nil, nil, err
	}
	// Only the holder of the writer key beats while its heartbeats come.
	w, err := revlog.NewWriter(rdb, store.LogKey(), revlog.WriterOptions{Period: cfg.RevlogPeriod, Logger: log, Heard: f.Heard})
	if err != nil {
		frdb.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	go func() { _ = f.Run(ctx); done <- struct{}{} }()
	return f, func() {
		cancel()
		frdb.Close() // ends a read blocked in XREAD now, not BlockTimeout later
		<-done
		<-done
	}, nil
}

// following starts the follower once the session store exists: its start
// is redisstore.NewService's follow. After start, follower is the follower
// (nil if none) and stop stops it; stop does nothing before start.
type following struct {
	cfg      config.Config
	rdb      redis.UniversalClient
	reg      prometheus.Registerer
	log      *slog.Logger
	follower *revlog.Follower
	stopped  func()
}

// start is followRevocations on store, kept for stop and the feed.
func (fw *following) start(store *redisstore.Store) (token.Revocations, error) {
	f, stop, err := followRevocations(fw.cfg, fw.rdb, store, fw.reg, fw.log)
	if err != nil {
		return nil, err
	}
	fw.follower, fw.stopped = f, stop
	return revocationsOf(f), nil
}

// stop stops what start started.
func (fw *following) stop() {
	if fw.stopped != nil {
		fw.stopped()
	}
}

// revocationsOf is f as a token.Revocations: nil, not a nil *Follower in
// an interface, when there is no follower.
func revocationsOf(f *revlog.Follower) token.Revocations {
	if f == nil {
		return nil
	}
	return f
}

// feedOf is f as the source of the revocation feed (GET /revocations/events,
// package revfeed): nil when there is no follower, so that the routes
// answer 404.
func feedOf(f *revlog.Follower) revfeed.Source {
	if f == nil {
		return nil
	}
	return f
}

// decisions exports token.Service.LogStats, which the services of every
// key reload share:
//
//	snowtoken_validation_decisions_total{by}  counter  how validations learned a token's session state:
//	    log_live, log_revoked     from memory, no Redis command
//	    redis_unknown             the follower could not tell (stale, a subject with an entry, before the horizon)
//	    redis_uncached            an opaque token not cached yet
//	    redis_no_log              no follower (SNOWTOKEN_REVLOG_THRESHOLD=off, dev mode)
type decisions struct {
	svc  *token.Service
	desc *prometheus.Desc
}

func newDecisions(svc *token.Service) *decisions {
	return &decisions{svc: svc, desc: prometheus.NewDesc("snowtoken_validation_decisions_total",
		"Validations by where they learned the token's session state: the revocation log in memory, or Redis and why.", []string{"by"}, nil)}
}

func (d *decisions) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *decisions) Collect(ch chan<- prometheus.Metric) {
	st := d.svc.LogStats()
	for _, c := range []struct {
		by string
		n  uint64
	}{{"log_live", st.Live}, {"log_revoked", st.Revoked}, {"redis_unknown", st.Unknown}, {"redis_uncached", st.Uncached}, {"redis_no_log", st.NoLog}} {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(c.n), c.by)
	}
}

// redoer revokes again, through store, what the revocation log lost
// (revlog.Options.Redo): a token's entry appended again, a subject revoked
// again (a new marker: the one the loss took is gone with it), a client's
// cutoff written again.
func redoer(store *redisstore.Store) func(context.Context, revocation.Event) error {
	return func(ctx context.Context, ev revocation.Event) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		switch ev.Kind {
		case revocation.KindToken:
			return store.RelogToken(ctx, ev.Key, ev.Exp)
		case revocation.KindSubject:
			return store.RevokeSubject(ctx, ev.Key)
		case revocation.KindClient:
			return store.RevokeClient(ctx, ev.Key, time.UnixMilli(ev.Cutoff))
		}
		return nil
	}
}
