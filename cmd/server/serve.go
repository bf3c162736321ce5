package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/txn"
)

// shutdownGrace bounds how long in-flight requests may take after SIGTERM.
const shutdownGrace = 15 * time.Second

// Serve runs the issuer until ctx ends, then finishes in-flight requests.
func Serve(ctx context.Context, env map[string]string, stdout io.Writer) error {
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	log, err := newLogger(stdout, cfg.LogLevel)
	if err != nil {
		return err
	}
	if cfg.IssuerAsSet != "" {
		log.Warn("SNOWTOKEN_ISSUER is taken in its canonical form, the iss of every token and the issuer of the metadata; set it so", "set", cfg.IssuerAsSet, "issuer", cfg.Issuer)
	}
	if cfg.DPoPForwardersDefaulted {
		log.Warn("SNOWTOKEN_DPOP_FORWARDERS is unset: the proxies of SNOWTOKEN_TRUSTED_PROXIES also name a DPoP proof's original request; "+
			"set it to the callers that forward proofs (a gateway's auth_request, Remote-mode consumers) or to none, "+
			"and list in SNOWTOKEN_TRUSTED_PROXIES only the proxies in front of clients", "trusted_proxies", strings.Join(cfg.TrustedProxies, ","))
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
	feedMax, feedPerClient, err := feedSlots(cfg, maxConns)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	metricsAddr, stopMetrics, err := serveMetrics(cfg.MetricsAddr, cfg.Pprof, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ext, err := listenExtAuthz(cfg.ExtAuthzAddr)
	if err != nil {
		return err
	}
	defer ext.close()

	rdb, stopRedis, err := openRedis(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopRedis()
	if err := reg.Register(newRedisMetrics(rdb)); err != nil {
		return err
	}
	tp, stopTracing, err := startTracing(ctx, env, rdb, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	keys, err := loadKeys(cfg, log)
	if err != nil {
		return err
	}
	clients, devSecrets, err := loadClients(cfg, log)
	if err != nil {
		return err
	}
	auditLoaded(log, keys, clients)
	warnExpiringSecrets(log, clients, time.Now())
	gen, worker, releaseIDs, err := startIDs(ctx, cfg, rdb, reg, log)
	if err != nil {
		return err
	}
	// On the way out, after the last request: save the final high-water mark
	// and free the worker ID for the next replica.
	defer releaseIDs()
	ids, err := countIDFailures(gen, reg)
	if err != nil {
		return err
	}
	fw := &following{cfg: cfg, rdb: rdb, reg: reg, log: log}
	svc, store, err := newService(cfg, rdb, tp, keys, ids, fw)
	if err != nil {
		fw.stop()
		return err
	}
	defer store.Close()
	defer fw.stop() // before the store closes: the follower revokes through it
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
	var minter *txn.Minter // nil: Transaction Tokens off
	if cfg.TxnTrustDomain != "" {
		if minter, err = txn.New(txn.Options{TrustDomain: cfg.TxnTrustDomain, TTL: cfg.TxnTTL}, ids); err != nil {
			return err
		}
	}
	var draining atomic.Bool
	refused := new(refusals)
	h, err := handlers.NewServer(handlers.Options{Service: svc, Clients: clients, IDs: ids, Logger: log,
		Registry: reg, Ready: settings, Draining: draining.Load, AuthLimiter: authLimit, TrustedProxies: cfg.TrustedProxies,
		TracerProvider: tp, Version: handlers.Version{Clients: clients.Version(), Keys: keys.Version()}, Refused: refused.load,
		Feed: fw.feed(), FeedOptions: revfeed.Options{MaxSubscribers: feedMax, MaxPerClient: feedPerClient}, DPoP: dpop.Options{Replay: store.Proofs()}, DPoPNonces: cfg.DPoPNonce, DPoPForwarders: cfg.DPoPForwarders, Txn: minter,
		Assertions: clientauth.Options{Replay: store.Assertions(),
			MaxLifetime: cfg.AssertionMaxLifetime, MaxWorkloadLifetime: cfg.WorkloadMaxLifetime,
			Fetch: clientauth.FetchOptions{AllowNets: cfg.KeyFetchAllowNets}}})
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
	log.Info("listening", "addr", ln.Addr().String(), "metrics_addr", metricsAddr, "extauthz_addr", ext.addr(), "max_conns", maxConns,
		"feed_max_subscribers", feedMax, "feed_max_per_client", feedPerClient,
		"issuer", cfg.Issuer, "worker_id", worker,
		"bits", cfg.Bits.String(), "epoch", cfg.Epoch, "signing_kid", keys.SigningKeyID(), "production", cfg.Production,
		"memory_limit_bytes", memLimit.bytes, "memory_limit_from", memLimit.from, "cache_size", cfg.CacheSize)
	if !cfg.Production {
		printDevBanner(stdout, cfg, ln.Addr().String(), keys.SigningKeyID(), worker, devSecrets)
	}

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if err := ext.serve(h, reg, tp, errc); err != nil {
		return err
	}
	defer ext.stop(context.Background()) // after a failed start; on the way out it has stopped already
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
	ext.drain()
	select {
	case <-time.After(cfg.ShutdownDrain):
	case err := <-errc:
		return err
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	ext.stop(sctx)
	if err := finish(sctx, srv, ln, errc, conns); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// printDevBanner tells the user of a dev run what it generated, what is
// real, and how to get and check a first token. Only a dev run has one: its
// secret is generated, and shown nowhere else.
func printDevBanner(w io.Writer, cfg config.Config, addr, kid string, worker int64, secrets devSecrets) {
	base := "http://localhost" + addr[strings.LastIndexByte(addr, ':'):]
	fmt.Fprintf(w, `
================================================================================
 snowtoken DEV MODE: no SNOWTOKEN_REDIS_*, SNOWTOKEN_SIGNING_KEYS or
 SNOWTOKEN_CLIENTS_FILE is set. Generated for this run, gone when it stops:
   Redis        in memory, in this process; no other replica sees its sessions
   signing key  kid %s; its tokens
                stop verifying when the process stops
   client       %s: admin, may set the subject, scopes %q, aud %s
                %s: may exchange tokens naming it (docs/exchange.md), scope %q
 Real: the HTTP API on %s (issuer %s),
   Snowflake IDs of worker %d (layout %s, epoch %s),
   Transaction Tokens for the trust domain %s (GET /token/validate?txn_token=1;
   docs/txn-tokens.md).

 Paste these into a shell: the clients' credentials (the secrets are shown only
 now), a token in TOKEN and its validation, then a service acting for its
 subject and a Transaction Token. The README's examples use them.

 export CLIENT_ID=%s CLIENT_SECRET=%s
 export SERVICE_ID=%s SERVICE_SECRET=%s
 TOKEN=$(curl -s -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials %s/token |
   sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
 curl -s -H "Authorization: Bearer $TOKEN" %s/token/validate

 # Identity through a call chain: %s acts for TOKEN's subject with a
 # narrower token of its own (token exchange, RFC 8693: docs/exchange.md).
 SERVICE_TOKEN=$(curl -s -u "$SERVICE_ID:$SERVICE_SECRET" -d grant_type=client_credentials %s/token |
   sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
 curl -s -u "$SERVICE_ID:$SERVICE_SECRET" -d grant_type=urn:ietf:params:oauth:grant-type:token-exchange \
   -d subject_token="$TOKEN" -d subject_token_type=urn:ietf:params:oauth:token-type:access_token \
   -d actor_token="$SERVICE_TOKEN" -d actor_token_type=urn:ietf:params:oauth:token-type:access_token %s/token
%s================================================================================
`, kid, devClient.ID, strings.Join(devClient.Scopes, " "), devClient.Audiences[0],
		devService.ID, strings.Join(devService.Scopes, " "), base, cfg.Issuer,
		worker, cfg.Bits, cfg.Epoch.Format(time.RFC3339), cmp.Or(cfg.TxnTrustDomain, "(off: SNOWTOKEN_TXN_TRUST_DOMAIN=off)"),
		devClient.ID, secrets.client, devService.ID, secrets.service, base, base, devService.ID, base, base, devTxnLines(cfg, base))
}

// devTxnLines are the banner's commands for a Transaction Token, when the
// trust domain is on: the validation a gateway makes, minting one.
func devTxnLines(cfg config.Config, base string) string {
	if cfg.TxnTrustDomain == "" {
		return ""
	}
	return fmt.Sprintf(` # A Transaction Token, minted by the validation a gateway makes
 # (docs/txn-tokens.md), in the Txn-Token header:
 curl -s -o /dev/null -D - -H "Authorization: Bearer $TOKEN" "%s/token/validate?txn_token=1" | grep -i '^txn-token'
`, base)
}
