package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// startIDs leases a worker ID in rdb and starts its renewal: the
// generator of this replica's IDs, its worker ID, and release, which stops
// the renewal, saves the final high-water mark and frees the worker ID for
// the next replica (call it after the last request). It registers the
// lease's metrics in reg.
func startIDs(ctx context.Context, cfg config.Config, rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) (ids *lease.Generator, worker int64, release func(), err error) {
	candidate, err := workerID(cfg, nil, log)
	if err != nil {
		return nil, 0, nil, err
	}
	l, err := lease.Acquire(ctx, rdb, lease.Options{
		Candidate: candidate, MaxWorker: cfg.Bits.MaxWorker(), Strict: cfg.WorkerIDStrict, TTL: cfg.LeaseTTL, Logger: log,
		PrivateStore: !cfg.RedisConfigured(), // the embedded dev Redis: new with this process
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("worker id lease (SNOWTOKEN_WORKER_ID_STRICT=%t): %w", cfg.WorkerIDStrict, err)
	}
	worker = l.WorkerID()
	if err := reg.Register(newLeaseMetrics(l)); err != nil {
		return nil, 0, nil, err
	}
	ids, err = lease.NewGenerator(l, snowflakealg.Settings{Allocator: cfg.Bits, Epoch: cfg.Epoch})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("id generator: %w", err)
	}
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	leaseDone := make(chan struct{})
	go func() { defer close(leaseDone); l.Run(leaseCtx, ids.HighWater) }()
	release = func() {
		stopLease()
		<-leaseDone
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx, ids.HighWater()); err != nil {
			log.Warn("releasing the worker id lease failed; it expires by itself", "worker_id", worker, "err", err)
			return
		}
		log.Info("released the worker id lease", "worker_id", worker, "high_water", ids.HighWater())
	}
	return ids, worker, release, nil
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
