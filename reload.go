package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/watch"
	"github.com/snowtoken/snowtoken/token"
)

// reloader reads the clients file and the signing keys again on SIGHUP and
// when they change on disk (package watch), checks the new set as a start
// does, and swaps it into the server (handlers.Server.Swap): requests under
// way finish with the set they began with. A set that does not load is
// refused with one log line naming the file and the problem, and the set in
// force keeps serving. Dev mode generates its key and client: it has
// nothing to read again.
type reloader struct {
	cfg     config.Config
	log     *slog.Logger
	srv     *handlers.Server
	svc     *token.Service // in force
	clients *token.Clients // in force
	refused string         // the last refusal logged, so that it is logged once
	hup     chan os.Signal

	info    *prometheus.GaugeVec
	reloads *prometheus.CounterVec
}

// newReloader returns the reloader of srv, which serves svc and clients,
// and registers its metrics in reg. From then on SIGHUP no longer ends the
// process (its default action): run reloads on it.
func newReloader(cfg config.Config, log *slog.Logger, reg *prometheus.Registry, srv *handlers.Server, svc *token.Service, clients *token.Clients) (*reloader, error) {
	r := &reloader{cfg: cfg, log: log, srv: srv, svc: svc, clients: clients, hup: make(chan os.Signal, 1),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snowtoken_config_info",
			Help: "1 for the clients file and signing keys in force, by the first 12 hex digits of their SHA-256 (as /readyz shows): every replica should show the same.",
		}, []string{"clients", "keys"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_config_reloads_total",
			Help: "Reloads of the clients file and signing keys that changed the set (ok), and new sets refused (refused): the old set keeps serving.",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{r.info, r.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	r.reloads.WithLabelValues("ok")
	r.reloads.WithLabelValues("refused")
	v := r.version()
	r.info.WithLabelValues(v.Clients, v.Keys).Set(1)
	signal.Notify(r.hup, syscall.SIGHUP)
	return r, nil
}

// version names the set in force.
func (r *reloader) version() handlers.Version {
	return handlers.Version{Clients: r.clients.Version(), Keys: r.svc.Keys().Version()}
}

// run reloads on SIGHUP and on changes to the files' directories until ctx
// ends. If the directories cannot be watched (such as at the inotify limit,
// fs.inotify.max_user_watches), it says so and SIGHUP still reloads.
func (r *reloader) run(ctx context.Context) {
	defer signal.Stop(r.hup)
	var changes <-chan struct{}
	if r.cfg.Production {
		dirs := r.watchedDirs()
		var err error
		if changes, err = watch.Dirs(ctx, dirs, watch.Options{Logger: r.log}); err != nil {
			r.log.Error("cannot watch the clients file and signing keys: only SIGHUP reloads them", "dirs", dirs, "err", err)
		} else {
			r.log.Info("watching the clients file and signing keys for changes; SIGHUP reloads them too", "dirs", dirs)
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

// watchedDirs are the directories of the clients file and of the signing
// keys: a keys directory itself, or the directory of each key file.
func (r *reloader) watchedDirs() []string {
	dirs := []string{filepath.Dir(r.cfg.ClientsFile)}
	if dir, ok := keysDir(r.cfg.SigningKeys); ok {
		dirs = append(dirs, dir)
	} else {
		for _, p := range r.cfg.SigningKeys {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// reload reads the files again and swaps in the new set, if it loads and
// differs from the one in force.
func (r *reloader) reload(trigger string) {
	clients, err := token.LoadClients(r.cfg.ClientsFile)
	if err != nil {
		r.refuse(trigger, "SNOWTOKEN_CLIENTS_FILE", r.cfg.ClientsFile, err)
		return
	}
	keys, err := readKeys(r.cfg.SigningKeys)
	if err != nil {
		r.refuse(trigger, "SNOWTOKEN_SIGNING_KEYS", keysSource(r.cfg.SigningKeys), err)
		return
	}
	was := r.version()
	v := handlers.Version{Clients: clients.Version(), Keys: keys.Version()}
	r.refused = ""
	if v == was {
		level := slog.LevelDebug
		if trigger == "sighup" {
			level = slog.LevelInfo
		}
		r.log.Log(context.Background(), level, "reload: the clients file and signing keys are unchanged", "trigger", trigger, "config", v)
		return
	}
	svc := r.svc
	if v.Keys != was.Keys {
		if svc, err = r.svc.WithKeys(keys); err != nil {
			r.refuse(trigger, "SNOWTOKEN_SIGNING_KEYS", keysSource(r.cfg.SigningKeys), err)
			return
		}
	}
	r.srv.Swap(svc, clients, v)
	r.svc, r.clients = svc, clients
	r.info.Reset()
	r.info.WithLabelValues(v.Clients, v.Keys).Set(1)
	r.reloads.WithLabelValues("ok").Inc()
	r.log.Info("reloaded the clients file and signing keys", "event", "config.reloaded", "trigger", trigger, "config", v, "was", was)
	auditLoaded(r.log, keys, clients)
	warnExpiringSecrets(r.log, clients, time.Now())
}

// refuse counts a set that does not load and logs it, once for as long as
// it stays the same.
func (r *reloader) refuse(trigger, variable, file string, err error) {
	r.reloads.WithLabelValues("refused").Inc()
	if err.Error() == r.refused {
		return
	}
	r.refused = err.Error()
	r.log.Error("reload refused: the set in force keeps serving until this is fixed", "event", "config.reload_refused",
		"trigger", trigger, "variable", variable, "file", file, "err", err, "config", r.version())
}

// keysSource names the signing keys' files for a log line: the keys
// directory, or the list.
func keysSource(paths []string) string {
	if dir, ok := keysDir(paths); ok {
		return dir
	}
	return strings.Join(paths, ",")
}
