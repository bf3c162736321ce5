package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/logsum"
	"github.com/snowtoken/snowtoken/internal/redisconf"
	"github.com/snowtoken/snowtoken/internal/tracing"
	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// shutdownGrace bounds how long in-flight requests may take after SIGTERM.
const shutdownGrace = 15 * time.Second

// Serve runs the issuer until ctx ends, then finishes in-flight requests.
func Serve(ctx context.Context, env map[string]string, stdout io.Writer) error {
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	log := newLogger(stdout, cfg.LogLevel)
	if cfg.IssuerAsSet != "" {
		log.Warn("SNOWTOKEN_ISSUER is taken in its canonical form, the iss of every token and the issuer of the metadata; set it so", "set", cfg.IssuerAsSet, "issuer", cfg.Issuer)
	}
	redis.SetLogger(redisLog{log})
	memLimit := tuneGC(env, memlimit.FromCgroup)
	if cfg.CacheSize > 0 {
		if err := checkCacheFits(cfg.CacheSize, memLimit, log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("SNOWTOKEN_ADDR: %w", err)
	}
	defer ln.Close()         // Serve closes it too; this covers a failed start
	if cfg.IssuerDefaulted { // dev mode: name the port actually bound (SNOWTOKEN_ADDR may say :0)
		cfg.Issuer = "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	maxConns := cfg.MaxConns
	if maxConns == 0 {
		if maxConns, err = defaultMaxConns(); err != nil {
			return fmt.Errorf("SNOWTOKEN_MAX_CONNS: no default: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	metricsAddr, stopMetrics, err := serveMetrics(cfg.MetricsAddr, cfg.Pprof, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	rdb, stopRedis, err := openRedis(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopRedis()
	tp, stopTracing, err := startTracing(ctx, env, rdb, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	keys, err := loadKeys(cfg, log)
	if err != nil {
		return err
	}
	clients, devSecret, err := loadClients(cfg, log)
	if err != nil {
		return err
	}
	auditLoaded(log, keys, clients)
	warnExpiringSecrets(log, clients, time.Now())
	candidate, err := workerID(cfg, nil, log)
	if err != nil {
		return err
	}
	l, err := lease.Acquire(ctx, rdb, lease.Options{
		Candidate: candidate, MaxWorker: cfg.Bits.MaxWorker(), Strict: cfg.WorkerIDStrict, TTL: cfg.LeaseTTL, Logger: log,
		PrivateStore: !cfg.RedisConfigured(), // the embedded dev Redis: new with this process
	})
	if err != nil {
		return fmt.Errorf("worker id lease (SNOWTOKEN_WORKER_ID_STRICT=%t): %w", cfg.WorkerIDStrict, err)
	}
	worker := l.WorkerID()
	ids, err := lease.NewGenerator(l, snowflakealg.Settings{Allocator: cfg.Bits, Epoch: cfg.Epoch})
	if err != nil {
		return fmt.Errorf("id generator: %w", err)
	}
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	leaseDone := make(chan struct{})
	go func() { defer close(leaseDone); l.Run(leaseCtx, ids.HighWater) }()
	// On the way out, after the last request: save the final high-water mark
	// and free the worker ID for the next replica.
	defer func() {
		stopLease()
		<-leaseDone
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx, ids.HighWater()); err != nil {
			log.Warn("releasing the worker id lease failed; it expires by itself", "worker_id", worker, "err", err)
			return
		}
		log.Info("released the worker id lease", "worker_id", worker, "high_water", ids.HighWater())
	}()
	store := token.NewStore(rdb, token.StoreOptions{Timeout: cfg.RedisTimeout, TracerProvider: tp,
		LogRetention: token.LogRetention(cfg.MaxTokenTTL, token.DefaultLeeway)})
	defer store.Close()
	follower, stopFollowing, err := followRevocations(cfg, rdb, store, reg, log)
	if err != nil {
		return err
	}
	defer stopFollowing()
	svc, err := token.NewService(keys, store, ids, token.Options{
		Issuer: cfg.Issuer, Audience: cfg.Audience, TTL: cfg.TokenTTL, MaxTTL: cfg.MaxTokenTTL,
		CacheSize: cacheSize(cfg.CacheSize), Revocations: revocationsOf(follower),
	})
	if err != nil {
		return err
	}
	if err := reg.Register(newDecisions(svc)); err != nil {
		return err
	}
	settings, err := redisSettings(ctx, cfg, rdb, log)
	if err != nil {
		return err
	}
	authLimit, err := authlimit.New(rdb, authlimit.Settings{Failures: cfg.AuthFailures, Window: cfg.AuthWindow,
		IPv4Prefix: cfg.AuthIPv4Prefix, IPv6Prefix: cfg.AuthIPv6Prefix})
	if err != nil {
		return fmt.Errorf("SNOWTOKEN_AUTH_FAILURES: %w", err)
	}
	var draining atomic.Bool
	refused := new(refusals)
	h, err := handlers.NewServer(handlers.Options{Service: svc, Clients: clients, IDs: ids, Logger: log,
		Registry: reg, Ready: settings, Draining: draining.Load, AuthLimiter: authLimit, TrustedProxies: cfg.TrustedProxies,
		TracerProvider: tp, Version: handlers.Version{Clients: clients.Version(), Keys: keys.Version()}, Refused: refused.load,
		Feed: feedOf(follower)})
	if err != nil {
		return err
	}
	reload, err := newReloader(cfg, log, reg, h, svc, clients, refused)
	if err != nil {
		return err
	}
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloadDone := make(chan struct{})
	go func() { defer close(reloadDone); reload.run(reloadCtx) }()
	defer func() { stopReload(); <-reloadDone }()

	// At most maxConns connections: the listener accepts no more until one
	// closes, and the rest wait in the kernel's backlog, so the process
	// keeps file descriptors for the connections it serves, for Redis and
	// for its files (without a cap, held connections used them all and
	// every accept failed with "too many open files"). While at the cap,
	// answers say Connection: close and idle keep-alive connections are
	// closed (SetKeepAlivesEnabled), so that waiting clients get in.
	conns := newConnStates()
	srv := newHTTPServer(h.Engine(), log)
	srv.ConnState = conns.track
	conns.setLimit(maxConns, func(full bool) {
		srv.SetKeepAlivesEnabled(!full)
		if full {
			log.Warn("at the connection cap: closing idle connections; new ones wait", "max_conns", maxConns)
		} else {
			log.Info("below the connection cap again", "max_conns", maxConns)
		}
	})
	ln = newCapListener(ln.(*net.TCPListener), maxConns)
	log.Info("listening", "addr", ln.Addr().String(), "metrics_addr", metricsAddr, "max_conns", maxConns,
		"issuer", cfg.Issuer, "worker_id", worker,
		"bits", cfg.Bits.String(), "epoch", cfg.Epoch, "signing_kid", keys.SigningKeyID(), "production", cfg.Production,
		"memory_limit_bytes", memLimit.bytes, "memory_limit_from", memLimit.from, "cache_size", cfg.CacheSize)
	if !cfg.Production {
		printDevBanner(stdout, cfg, ln.Addr().String(), keys.SigningKeyID(), worker, devSecret)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Drain: fail readiness so balancers stop sending, and answer with
	// Connection: close so clients leave their keep-alive connections instead
	// of sending on one just as it is closed. Then stop accepting and finish
	// every request taken up (finish). The deferred calls above then close
	// the store and, last, release the lease.
	log.Info("shutting down: draining", "drain", cfg.ShutdownDrain)
	draining.Store(true)
	select {
	case <-time.After(cfg.ShutdownDrain):
	case err := <-errc:
		return err
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := finish(sctx, srv, ln, errc, conns); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// newHTTPServer is an http.Server for h whose limits bound what a slow or
// hostile client can hold: the request header must arrive within 5 s and
// fit in 16 KiB, the whole request within 10 s, the answer is written
// within 10 s, and an idle keep-alive connection is closed after 120 s.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serveMetrics serves reg at GET /metrics on addr, a listener apart from
// the API's so that the public port does not serve the metrics, and with
// pprof (SNOWTOKEN_PPROF) Go's profiles at /debug/pprof/; it returns the
// address bound and a function that stops it. An empty addr
// (SNOWTOKEN_METRICS_ADDR=off) serves nothing.
func serveMetrics(addr string, pprof bool, reg *prometheus.Registry, log *slog.Logger) (string, func(), error) {
	if addr == "" {
		return "off", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("SNOWTOKEN_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if pprof {
		// net/http/pprof's init also registers these on
		// http.DefaultServeMux, which snowtoken never serves: they are
		// served here alone, and only when asked for.
		mux.HandleFunc("GET /debug/pprof/", httppprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", httppprof.Trace)
	}
	srv := newHTTPServer(mux, log)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// defaultMaxConns is SNOWTOKEN_MAX_CONNS's default for the process's
// open-file limit (RLIMIT_NOFILE, which Go raises to the hard limit at start).
func defaultMaxConns() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return MaxConnsFor(rl.Cur), nil
}

// MaxConnsFor is the connection cap for an open-file limit: the limit less
// 256 descriptors for Redis connections (go-redis pools up to ten per CPU),
// the listeners and files, or half of a limit below 512.
func MaxConnsFor(limit uint64) int {
	limit = min(limit, 1<<20) // RLIM_INFINITY
	if limit < 512 {
		return max(1, int(limit/2))
	}
	return int(limit - 256)
}

// newLogger is the issuer's log: JSON lines on w, and nothing else writes
// there (go-redis's lines come through redisLog, net/http's through the
// servers' ErrorLog). Failures that repeat (every request while Redis is
// down, every retry of the lease, every accept error) are logged once per
// kind and interval, with a count; the metrics count every failed request.
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString})
	return slog.New(logsum.New(h, logsum.Options{}))
}

// durationString writes a time.Duration as Go writes it ("1.5s"), not as
// slog's JSON handler does: an integer of nanoseconds, which reads as a
// count of nothing in particular.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

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

// startTracing starts OpenTelemetry tracing when the OTEL_* variables ask
// for it (package tracing), with go-redis's spans for the commands sent
// outside the store's pipelines (lease, rate limit, readiness). Off, it
// returns a nil provider and installs nothing. The returned stop flushes the
// spans still buffered, for at most 5 s.
func startTracing(ctx context.Context, env map[string]string, rdb redis.UniversalClient, log *slog.Logger) (trace.TracerProvider, func(), error) {
	tp, shutdown, err := tracing.Start(ctx, env, moduleVersion())
	if err != nil || tp == nil {
		return nil, func() {}, err
	}
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		return nil, nil, fmt.Errorf("tracing redis: %w", err)
	}
	log.Info("tracing on (OTEL_* variables)", "exporter", env["OTEL_TRACES_EXPORTER"],
		"endpoint", cmp.Or(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], env["OTEL_EXPORTER_OTLP_ENDPOINT"]))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}, nil
}

// moduleVersion is the issuer's module version as the build recorded it
// ("(devel)" for a build from a checkout).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
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

// loadKeys loads SNOWTOKEN_SIGNING_KEYS, or in dev mode generates a key.
func loadKeys(cfg config.Config, log *slog.Logger) (*token.KeySet, error) {
	if cfg.Production {
		ks, err := readKeys(cfg.SigningKeys)
		if err != nil {
			return nil, fmt.Errorf("SNOWTOKEN_SIGNING_KEYS: %w", err)
		}
		return ks, nil
	}
	k, err := token.GenerateKey()
	if err != nil {
		return nil, err
	}
	log.Warn("DEV MODE: generated a signing key for this run; tokens stop verifying when the process stops. Set SNOWTOKEN_SIGNING_KEYS.")
	return token.NewKeySet(k)
}

// readKeys reads SNOWTOKEN_SIGNING_KEYS: a keys directory (token.LoadKeyDir),
// or a list of PEM files whose first signs (token.LoadKeySet).
func readKeys(paths []string) (*token.KeySet, error) {
	if dir, ok := keysDir(paths); ok {
		return token.LoadKeyDir(dir)
	}
	return token.LoadKeySet(paths...)
}

// keysDir returns the keys directory SNOWTOKEN_SIGNING_KEYS names, if it
// names one: a single path that is a directory.
func keysDir(paths []string) (string, bool) {
	if len(paths) != 1 {
		return "", false
	}
	fi, err := os.Stat(paths[0])
	return paths[0], err == nil && fi.IsDir()
}

// auditLoaded logs the audit events keys.loaded and clients.loaded
// (docs/audit.md): which keys sign and verify (and of those, which are next
// and which retired), which clients exist and which of them are admins or
// disabled.
func auditLoaded(log *slog.Logger, keys *token.KeySet, clients *token.Clients) {
	var kids, next, retired []string
	for _, k := range keys.Keys() {
		kids = append(kids, k.Kid)
		switch k.State {
		case token.KeyNext:
			next = append(next, k.Kid)
		case token.KeyRetired:
			retired = append(retired, k.Kid)
		}
	}
	log.Info("signing keys loaded", "event", "keys.loaded", "signing_kid", keys.SigningKeyID(), "kids", kids, "next", next, "retired", retired)
	var ids, admins, disabled []string
	for _, c := range clients.All() {
		ids = append(ids, c.ID)
		if c.Admin {
			admins = append(admins, c.ID)
		}
		if c.Disabled {
			disabled = append(disabled, c.ID)
		}
	}
	log.Info("clients loaded", "event", "clients.loaded", "clients", ids, "admins", admins, "disabled", disabled)
}

// secretExpiryWarning is how long before a client secret expires start-up
// warns of it. The metric snowtoken_client_secret_expiry_timestamp_seconds
// lets an alert choose its own horizon.
const secretExpiryWarning = 14 * 24 * time.Hour

// warnExpiringSecrets logs a warning for each client, other than a disabled
// one, whose secret has expired or expires within secretExpiryWarning of now.
func warnExpiringSecrets(log *slog.Logger, clients *token.Clients, now time.Time) {
	for _, c := range clients.All() {
		if c.Disabled || c.SecretExpires.IsZero() {
			continue
		}
		switch left := c.SecretExpires.Sub(now); {
		case left <= 0:
			log.Warn("a client's secret has expired: it no longer authenticates; give the client a new one with snowtoken client rotate-secret",
				"client_id", c.ID, "secret_expires", c.SecretExpires)
		case left < secretExpiryWarning:
			log.Warn("a client's secret expires soon: give the client a new one with snowtoken client rotate-secret",
				"client_id", c.ID, "secret_expires", c.SecretExpires, "expires_in", left.Round(time.Minute).String())
		}
	}
}

// devClient is the client dev mode generates, with a new secret every run.
var devClient = token.Client{ID: "dev", Scopes: []string{"read", "write"}, MaySetSubject: true, Admin: true}

// loadClients loads SNOWTOKEN_CLIENTS_FILE, or in dev mode generates
// devClient and returns its secret.
func loadClients(cfg config.Config, log *slog.Logger) (*token.Clients, string, error) {
	if cfg.Production {
		cs, err := token.LoadClients(cfg.ClientsFile)
		if err != nil {
			return nil, "", fmt.Errorf("SNOWTOKEN_CLIENTS_FILE: %w", err)
		}
		return cs, "", nil
	}
	secret, sum, err := token.NewClientSecret()
	if err != nil {
		return nil, "", err
	}
	c := devClient
	c.SecretSHA256 = sum
	cs, err := token.NewClients([]token.Client{c})
	log.Warn("DEV MODE: generated client \"dev\" (admin, may set the subject, scopes read write); its secret is printed once below. Set SNOWTOKEN_CLIENTS_FILE.")
	return cs, secret, err
}

// workerID is the candidate worker ID: SNOWTOKEN_WORKER_ID, else the last
// octet of the IPv4 address. The lease decides which one the replica gets.
// In dev mode a machine with no usable IPv4 falls back to worker 0. ifaces
// lists the network interfaces; nil means the system's.
func workerID(cfg config.Config, ifaces func() ([]snowflakealg.Interface, error), log *slog.Logger) (int64, error) {
	if cfg.WorkerIDSet {
		return cfg.WorkerID, nil
	}
	src := snowflakealg.IPv4Source{IP: cfg.WorkerIP, Interface: cfg.WorkerInterface, Interfaces: ifaces}
	w, ip, err := snowflakealg.WorkerIDFromIPv4(src, cfg.Bits)
	if errors.Is(err, snowflakealg.ErrNoIPv4) && cfg.Production && cfg.WorkerIP == "" && cfg.WorkerInterface == "" {
		return 0, fmt.Errorf("worker id: %w: the host has no IPv4 address (an IPv6-only network?) whose last octet could be the worker ID; "+
			"set SNOWTOKEN_WORKER_ID to a number unique among the replicas, such as a Kubernetes pod ordinal", err)
	}
	if err != nil {
		if cfg.Production || cfg.WorkerIP != "" || cfg.WorkerInterface != "" {
			return 0, fmt.Errorf("worker id (set SNOWTOKEN_WORKER_ID, SNOWTOKEN_WORKER_IP or SNOWTOKEN_WORKER_INTERFACE): %w", err)
		}
		log.Warn("DEV MODE: no usable IPv4 address; using worker 0", "err", err)
		return 0, nil
	}
	log.Info("worker id from IPv4 last octet", "ip", ip.String(), "worker_id", w)
	return w, nil
}

// printDevBanner tells the user of a dev run what it generated, what is
// real, and how to get and check a first token. Only a dev run has one: its
// secret is generated, and shown nowhere else.
func printDevBanner(w io.Writer, cfg config.Config, addr, kid string, worker int64, secret string) {
	base := "http://localhost" + addr[strings.LastIndexByte(addr, ':'):]
	fmt.Fprintf(w, `
================================================================================
 snowtoken DEV MODE: no SNOWTOKEN_REDIS_*, SNOWTOKEN_SIGNING_KEYS or
 SNOWTOKEN_CLIENTS_FILE is set. Generated for this run, gone when it stops:
   Redis        in memory, in this process; no other replica sees its sessions
   signing key  kid %s; its tokens
                stop verifying when the process stops
   client       %s: admin, may set the subject, scopes %q
 Real: the HTTP API on %s (issuer %s),
   Snowflake IDs of worker %d (layout %s, epoch %s).

 Paste these into a shell: the client's credentials (the secret is shown only
 now), a token in TOKEN, and its validation. The README's examples use them.

 export CLIENT_ID=%s CLIENT_SECRET=%s
 TOKEN=$(curl -s -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials %s/token |
   sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
 curl -s -H "Authorization: Bearer $TOKEN" %s/token/validate
================================================================================
`, kid, devClient.ID, strings.Join(devClient.Scopes, " "), base, cfg.Issuer,
		worker, cfg.Bits, cfg.Epoch.Format(time.RFC3339),
		devClient.ID, secret, base, base)
}

// cacheSize is token.Options.CacheSize for SNOWTOKEN_CACHE_SIZE, where 0
// means off (the Options' zero means its default).
func cacheSize(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
