package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// infoTimeout bounds the INFO a scrape sends: a Redis that does not answer
// within it is down for snowtoken_redis_up, and the scrape still answers
// within Prometheus's timeout (10 s by default).
const infoTimeout = time.Second

// redisMetrics are the series of the Redis deployment as this replica sees
// it, on its main client (the follower's XREAD BLOCK has a client of its
// own, and is not timed):
//
//	snowtoken_redis_round_trip_seconds              histogram  one command or pipeline, retries included
//	snowtoken_redis_pool_connections{state}         gauge      in_use, idle
//	snowtoken_redis_pool_waits_total                counter    commands that waited for a free connection
//	snowtoken_redis_pool_timeouts_total             counter    commands that gave up waiting for one
//	snowtoken_redis_up                              gauge      1 if every node answered INFO at the scrape
//	snowtoken_redis_memory_used_bytes               gauge      used_memory (the node nearest its maxmemory)
//	snowtoken_redis_memory_max_bytes                gauge      maxmemory of that node; 0: no limit
//	snowtoken_redis_evicted_keys_total              counter    evicted_keys, every master's
//
// The last four come from one INFO (each master's in a Cluster) at each
// scrape; the memory series are missing when INFO is refused (an ACL, a
// managed service) while Redis answers.
type redisMetrics struct {
	rdb       redis.UniversalClient
	roundTrip prometheus.Histogram
	pool, waits, timeouts,
	up, used, maxMem, evicted *prometheus.Desc
}

// newRedisMetrics times every command of rdb from now on; register the
// result to export it.
func newRedisMetrics(rdb redis.UniversalClient) *redisMetrics {
	m := &redisMetrics{rdb: rdb,
		roundTrip: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "snowtoken_redis_round_trip_seconds",
			Help:    "Time of one Redis command or pipeline (one round trip) on the replica's main client, retries included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1, 2.5},
		}),
		pool: prometheus.NewDesc("snowtoken_redis_pool_connections",
			"Connections of the Redis client's pools, by state (in_use, idle).", []string{"state"}, nil),
		waits: prometheus.NewDesc("snowtoken_redis_pool_waits_total",
			"Redis commands that waited for a free connection of the pool.", nil, nil),
		timeouts: prometheus.NewDesc("snowtoken_redis_pool_timeouts_total",
			"Redis commands that gave up waiting for a free connection of the pool.", nil, nil),
		up: prometheus.NewDesc("snowtoken_redis_up",
			"1 if every Redis node (each master of a Cluster) answered INFO within 1 s at this scrape, else 0.", nil, nil),
		used: prometheus.NewDesc("snowtoken_redis_memory_used_bytes",
			"Redis used_memory, of the node nearest its maxmemory in a Cluster.", nil, nil),
		maxMem: prometheus.NewDesc("snowtoken_redis_memory_max_bytes",
			"Redis maxmemory of the node snowtoken_redis_memory_used_bytes reports; 0: no limit.", nil, nil),
		evicted: prometheus.NewDesc("snowtoken_redis_evicted_keys_total",
			"Keys Redis evicted under maxmemory (evicted_keys), summed over the masters.", nil, nil),
	}
	rdb.AddHook(m.hook())
	return m
}

// hook is the go-redis hook that times rdb's round trips.
func (m *redisMetrics) hook() roundTripHook { return roundTripHook{m.roundTrip} }

func (m *redisMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.roundTrip.Describe(ch)
	for _, d := range []*prometheus.Desc{m.pool, m.waits, m.timeouts, m.up, m.used, m.maxMem, m.evicted} {
		ch <- d
	}
}

func (m *redisMetrics) Collect(ch chan<- prometheus.Metric) {
	m.roundTrip.Collect(ch)
	st := m.rdb.PoolStats()
	total, idle, waits, timeouts := st.TotalConns, st.IdleConns, st.WaitCount, st.Timeouts
	if p := st.PipelineStats; p != nil { // pipelines' own pool, where the client has one
		total, idle, waits, timeouts = total+p.TotalConns, idle+p.IdleConns, waits+p.WaitCount, timeouts+p.Timeouts
	}
	ch <- prometheus.MustNewConstMetric(m.pool, prometheus.GaugeValue, float64(total-min(idle, total)), "in_use")
	ch <- prometheus.MustNewConstMetric(m.pool, prometheus.GaugeValue, float64(idle), "idle")
	ch <- prometheus.MustNewConstMetric(m.waits, prometheus.CounterValue, float64(waits))
	ch <- prometheus.MustNewConstMetric(m.timeouts, prometheus.CounterValue, float64(timeouts))

	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	mem, up := redisMemory(ctx, m.rdb)
	ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, boolValue(up))
	if mem.known {
		ch <- prometheus.MustNewConstMetric(m.used, prometheus.GaugeValue, mem.used)
		ch <- prometheus.MustNewConstMetric(m.maxMem, prometheus.GaugeValue, mem.max)
		ch <- prometheus.MustNewConstMetric(m.evicted, prometheus.CounterValue, mem.evicted)
	}
}

// memory is what the INFO of the masters says: used and max of the node
// nearest its limit (the largest used/max; without limits, the largest
// used), evicted summed over them. known is false when some node's INFO
// did not answer or did not say.
type memory struct {
	used, max, evicted float64
	known              bool
}

// redisMemory reads INFO from every master of rdb; up is false when one did
// not answer (a reply that refuses INFO is an answer).
func redisMemory(ctx context.Context, rdb redis.UniversalClient) (mem memory, up bool) {
	var (
		mu    sync.Mutex
		nodes []memory
	)
	read := func(ctx context.Context, c redis.UniversalClient) error {
		info, err := c.Info(ctx).Result()
		var reply redis.Error
		if errors.As(err, &reply) {
			mu.Lock()
			nodes = append(nodes, memory{})
			mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		n := parseInfo(info)
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return read(ctx, c) })
	} else {
		err = read(ctx, rdb)
	}
	if err != nil || len(nodes) == 0 {
		return memory{}, false
	}
	mem = nodes[0]
	for _, n := range nodes[1:] {
		if !n.known {
			mem.known = false
		}
		evicted := mem.evicted + n.evicted
		if fuller(n, mem) {
			mem.used, mem.max = n.used, n.max
		}
		mem.evicted = evicted
	}
	return mem, true
}

// fuller reports whether a is nearer its maxmemory than b.
func fuller(a, b memory) bool {
	switch {
	case a.max > 0 && b.max > 0:
		return a.used/a.max > b.used/b.max
	case a.max > 0 || b.max > 0:
		return a.max > 0 // a limit is nearer than none
	default:
		return a.used > b.used
	}
}

// parseInfo reads used_memory, maxmemory and evicted_keys from an INFO
// reply; known only if it has all three.
func parseInfo(info string) memory {
	var m memory
	found := 0
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "used_memory":
			m.used = v
		case "maxmemory":
			m.max = v
		case "evicted_keys":
			m.evicted = v
		default:
			continue
		}
		found++
	}
	m.known = found == 3
	return m
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// roundTripHook observes the time of every command and pipeline.
type roundTripHook struct{ h prometheus.Histogram }

func (roundTripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t roundTripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		t.h.Observe(time.Since(start).Seconds())
		return err
	}
}

func (t roundTripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		t.h.Observe(time.Since(start).Seconds())
		return err
	}
}
