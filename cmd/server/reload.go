package server

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/watch"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// reloader reads the clients file and the signing keys again on SIGHUP and
// when they change on disk (package watch), checks each new set as a start
// does, and swaps it into the server (handlers.Server.Swap): requests under
// way finish with the set they began with. Each of the two sources (the
// clients file, the keys) reloads on its own: one that does not load is
// refused, with one log line naming the file and the problem and until it
// loads the gauge snowtoken_reload_refused and /readyz's config.refused,
// while its set in force keeps serving and the other source still reloads.
// Dev mode generates its key and client: it has nothing to read again.
type reloader struct {
	cfg      config.Config
	log      *slog.Logger
	srv      *handlers.Server
	svc      *token.Service    // in force
	clients  *clients.Registry // in force
	refusals *refusals
	hup      chan os.Signal
	// keys is svc's keys, for the key metrics a scrape reads.
	keys atomic.Pointer[keyset.Set]

	info         *prometheus.GaugeVec
	reloads      *prometheus.CounterVec
	failures     *prometheus.CounterVec
	refusedGauge *prometheus.GaugeVec
}

// The sources a reload reads, as the metrics' source label and /readyz's
// config.refused name them.
const (
	sourceClients = "clients"
	sourceKeys    = "keys"
)

// refusals holds the sources whose last reload was refused, for /readyz
// (handlers.Options.Refused). The reloader writes it, requests read it.
type refusals struct {
	p atomic.Pointer[map[string]handlers.Refusal]
}

// load returns the refusals in force: nil when none.
func (f *refusals) load() map[string]handlers.Refusal {
	if m := f.p.Load(); m != nil {
		return *m
	}
	return nil
}

// newReloader returns the reloader of srv, which serves svc and clients and
// shows refused in /readyz, and registers its metrics in reg. From then on
// SIGHUP no longer ends the process (its default action): run reloads on it.
func newReloader(cfg config.Config, log *slog.Logger, reg *prometheus.Registry, srv *handlers.Server, svc *token.Service, clients *clients.Registry, refused *refusals) (*reloader, error) {
	r := &reloader{cfg: cfg, log: log, srv: srv, svc: svc, clients: clients, refusals: refused, hup: make(chan os.Signal, 1),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowtoken_config_info",
			Help: "1 for the clients file and signing keys in force, by the first 12 hex digits of their SHA-256 (as /readyz shows): every replica should show the same.",
		}, []string{"clients", "keys"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_config_reloads_total",
			Help: "Reloads of the clients file and signing keys that changed the set (ok), and new sets refused (refused): the old set keeps serving.",
		}, []string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_reload_failures_total",
			Help: "Reloads refused, by source (clients: the clients file; keys: the signing keys): the source's set in force keeps serving.",
		}, []string{"source"}),
		refusedGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowtoken_reload_refused",
			Help: "1 while the last reload of the source (clients, keys) was refused: the file on disk is not the set in force; 0 once one loads.",
		}, []string{"source"}),
	}
	r.keys.Store(svc.Keys())
	for _, c := range []prometheus.Collector{r.info, r.reloads, r.failures, r.refusedGauge, newKeyMetrics(r.keys.Load)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	r.reloads.WithLabelValues("ok")
	r.reloads.WithLabelValues("refused")
	for _, src := range []string{sourceClients, sourceKeys} {
		r.failures.WithLabelValues(src)
		r.refusedGauge.WithLabelValues(src).Set(0)
	}
	v := r.version()
	r.info.WithLabelValues(v.Clients, v.Keys).Set(1)
	signal.Notify(r.hup, syscall.SIGHUP)
	return r, nil
}

// version names the set in force.
func (r *reloader) version() handlers.Version {
	return handlers.Version{Clients: r.clients.Version(), Keys: r.svc.Keys().Version()}
}

// run reloads on SIGHUP and on changes to the files until ctx ends. If they
// cannot be watched (such as at the inotify limit,
// fs.inotify.max_user_watches), it says so and SIGHUP still reloads.
func (r *reloader) run(ctx context.Context) {
	defer signal.Stop(r.hup)
	var changes <-chan struct{}
	if r.cfg.Production {
		files := append([]string{r.cfg.ClientsFile}, r.cfg.SigningKeys...)
		var err error
		if changes, err = watch.Files(ctx, files, watch.Options{Logger: r.log}); err != nil {
			r.log.Error("cannot watch the clients file and signing keys: only SIGHUP reloads them", "files", files, "err", err)
		} else {
			r.log.Info("watching the clients file and signing keys for changes; SIGHUP reloads them too", "files", files)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.hup:
			if !r.cfg.Production {
				r.log.Info("SIGHUP: nothing to reload in dev mode, which generates its key and client")
				continue
			}
			r.reload("sighup")
		case <-changes:
			r.reload("file change")
		}
	}
}

// reload reads the clients file and the keys again, each on its own, and
// swaps in the new set if it differs from the one in force. A source that
// does not load is refused and keeps its set in force; the other is still
// swapped in.
func (r *reloader) reload(trigger string) {
	was := r.version()
	clients, err := clients.Load(r.cfg.ClientsFile)
	if err != nil {
		r.refuse(trigger, sourceClients, "SNOWTOKEN_CLIENTS_FILE", r.cfg.ClientsFile, err)
		clients = r.clients
	} else {
		r.accept(sourceClients)
	}
	svc := r.svc
	keys, err := readKeys(r.cfg.SigningKeys)
	if err == nil && keys.Version() != was.Keys {
		svc, err = r.svc.WithKeys(keys)
	}
	if err != nil {
		r.refuse(trigger, sourceKeys, "SNOWTOKEN_SIGNING_KEYS", keysSource(r.cfg.SigningKeys), err)
		svc = r.svc
	} else {
		r.accept(sourceKeys)
	}
	v := handlers.Version{Clients: clients.Version(), Keys: svc.Keys().Version()}
	if v == was {
		level := slog.LevelDebug
		if trigger == "sighup" {
			level = slog.LevelInfo
		}
		r.log.Log(context.Background(), level, "reload: the set in force is unchanged", "trigger", trigger, "config", v,
			"refused", slices.Sorted(maps.Keys(r.refusals.load())))
		return
	}
	r.srv.Swap(svc, clients, v)
	dropped, narrowed := r.clients.Dropped(clients), svc.Narrowed(r.clients, clients)
	r.svc, r.clients = svc, clients
	r.keys.Store(svc.Keys())
	if len(dropped) > 0 {
		go revokeDropped(svc, dropped, "a client removed or disabled in the clients file", r.log)
	}
	if len(narrowed) > 0 {
		go revokeDropped(svc, narrowed, "a client whose audiences the clients file narrowed", r.log)
	}
	r.info.Reset()
	r.info.WithLabelValues(v.Clients, v.Keys).Set(1)
	r.reloads.WithLabelValues("ok").Inc()
	r.log.Info("reloaded the clients file and signing keys", "event", "config.reloaded", "trigger", trigger, "config", v, "was", was)
	auditLoaded(r.log, svc.Keys(), clients)
	warnExpiringSecrets(r.log, clients, time.Now())
}

// refuse counts a source that does not load, marks it refused, and logs it
// once for as long as the reason stays the same.
func (r *reloader) refuse(trigger, source, variable, file string, err error) {
	r.reloads.WithLabelValues("refused").Inc()
	r.failures.WithLabelValues(source).Inc()
	r.refusedGauge.WithLabelValues(source).Set(1)
	m := maps.Clone(r.refusals.load())
	if m == nil {
		m = map[string]handlers.Refusal{}
	}
	last, was := m[source]
	if was && last.Reason == err.Error() {
		return
	}
	if !was {
		last.Since = time.Now().UTC()
	}
	last.Reason = err.Error()
	m[source] = last
	r.refusals.p.Store(&m)
	r.log.Error("reload refused: the set in force keeps serving until this is fixed", "event", "config.reload_refused",
		"trigger", trigger, "source", source, "variable", variable, "file", file, "err", err, "config", r.version())
}

// accept marks a source loaded: no longer refused.
func (r *reloader) accept(source string) {
	m := r.refusals.load()
	if _, ok := m[source]; !ok {
		return
	}
	m = maps.Clone(m)
	delete(m, source)
	r.refusals.p.Store(&m)
	r.refusedGauge.WithLabelValues(source).Set(0)
	r.log.Info("reload: a refused source loads again", "source", source)
}

// keysSource names the signing keys' files for a log line: the keys
// directory, or the list.
func keysSource(paths []string) string {
	if dir, ok := keysDir(paths); ok {
		return dir
	}
	return strings.Join(paths, ",")
}

// revokeDropped revokes every token of the clients a reload removed or
// disabled, or whose audiences it narrowed (token.Service.RevokeClient; why
// says which, in the log). This replica refuses their tokens, or those for
// an audience taken off, from the swap on (token.Service.Verdict); the revocation puts it in
// the revocation log too, so that the consumers that follow the log's feed
// (client.Follow), which never see the clients file, refuse them as well.
// Every replica reloads the file and revokes: the latest time wins, and a
// client enabled again later does not get its earlier tokens back. A
// narrowed client loses every token issued before the reload, those for the
// audiences it keeps too: the feed carries a client's cutoff, not one per
// audience, and its services get new tokens at once. Redis failing, it
// tries three times, a second apart, then logs an error.
func revokeDropped(svc *token.Service, clients []string, why string, log *slog.Logger) {
	for _, id := range clients {
		var err error
		for try := range 3 {
			if try > 0 {
				time.Sleep(time.Second)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = svc.RevokeClient(ctx, id)
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			log.Error(why+": revoking its tokens failed; consumers that follow the revocation feed accept them until they expire: revoke them (DELETE /clients/{client}/tokens)",
				"event", "client.revoke_failed", "client_id", id, "err", err)
			continue
		}
		log.Info(why+": its tokens are revoked", "event", "client.revoked", "client_id", id)
	}
}
