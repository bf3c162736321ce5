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

// revocationLog is what validation decides from before it reads Redis
// (token.LocalRevocations) and the revocation feed serves (revfeed.Source):
// a revlog.Follower, or in dev mode a revlog.Local.
type revocationLog interface {
	token.LocalRevocations
	revfeed.Source
}

var (
	_ revocationLog = (*revlog.Follower)(nil)
	_ revocationLog = (*revlog.Local)(nil)
)

// followRevocations starts this replica's heartbeat writer and its
// follower of the revocation log (package revlog), each until the returned
// stop, and returns the follower, which validation asks before it reads
// Redis and the feed serves. It returns nil, and starts nothing, when
// SNOWTOKEN_REVLOG_THRESHOLD is off; in dev mode it returns devLog's. The
// follower's Redis client is its own: it holds a connection in XREAD
// BLOCK.
func followRevocations(cfg config.Config, rdb redis.UniversalClient, store *redisstore.Store, reg prometheus.Registerer, log *slog.Logger) (revocationLog, func(), error) {
	switch {
	case cfg.RevlogOff:
		log.Warn("SNOWTOKEN_REVLOG_THRESHOLD=off: no revocation log follower; every validation reads Redis")
		return nil, func() {}, nil
	case !cfg.RedisConfigured():
		return devLog(cfg, log)
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

// devLog is dev mode's revocation log. The embedded Redis cannot carry the
// log's heartbeats (XINFO STREAM's entries-added), and this one replica is
// the only writer of its Redis: its own revocations make the log, in
// process (revlog.Local), beating every SNOWTOKEN_REVLOG_HEARTBEAT. So
// validation decides from it as a replica decides from its follower, and
// the feed serves it: a Follow consumer works against go run . too.
func devLog(cfg config.Config, log *slog.Logger) (revocationLog, func(), error) {
	l, err := revlog.NewLocal(revlog.LocalOptions{Period: cfg.RevlogPeriod, Threshold: cfg.RevlogThreshold,
		Leeway: token.DefaultLeeway, Retention: token.LogRetention(cfg.MaxTokenTTL, token.DefaultLeeway),
		// The embedded Redis and the signing key are new with the process:
		// no revocation, and no token of the key, predates its start. Less
		// the leeway and a second: a consumer reads a token's iat to the
		// second, and leaves one within the leeway of the horizon undecided.
		Horizon: time.Now().Add(-token.DefaultLeeway - time.Second)})
	if err != nil {
		return nil, nil, err
	}
	log.Info("DEV MODE: the revocation log is this process's own, in memory; the feed serves it")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	return l, func() {
		cancel()
		<-done
	}, nil
}

// following starts the follower once the session store exists: its start
// is newService's. After start, log is the follower (nil
// if none) and stop stops it; stop does nothing before start.
type following struct {
	cfg     config.Config
	rdb     redis.UniversalClient
	reg     prometheus.Registerer
	log     *slog.Logger
	revlog  revocationLog
	stopped func()
}

// start is followRevocations on store, kept for stop and the feed.
func (fw *following) start(store *redisstore.Store) (token.Revocations, error) {
	l, stop, err := followRevocations(fw.cfg, fw.rdb, store, fw.reg, fw.log)
	if err != nil {
		return nil, err
	}
	fw.revlog, fw.stopped = l, stop
	if l == nil {
		return nil, nil // nil, not a nil revocationLog in an interface
	}
	return l, nil
}

// stop stops what start started.
func (fw *following) stop() {
	if fw.stopped != nil {
		fw.stopped()
	}
}

// feed is the source of the revocation feed (GET /revocations/events,
// package revfeed): nil when there is no follower, so that the routes
// answer 404.
func (fw *following) feed() revfeed.Source {
	if fw.revlog == nil {
		return nil
	}
	return fw.revlog
}

// decisions exports token.Service.LogStats, which the services of every
// key reload share:
//
//	snowtoken_validation_decisions_total{by}  counter  how validations learned a token's session state:
//	    log_live, log_revoked     from memory, no Redis command
//	    redis_unknown             the follower could not tell (stale, a subject with an entry, before the horizon)
//	    redis_uncached            an opaque token not cached yet
//	    redis_no_log              no follower (SNOWTOKEN_REVLOG_THRESHOLD=off)
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
