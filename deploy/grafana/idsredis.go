package main

// idsAndRedis: each replica's worker ID lease, clock rollbacks and IDs
// issued; Redis as the replicas see it: round trips, commands per request,
// the pool, reachability, memory and evictions.
func idsAndRedis() *board {
	b := newBoard("snowtoken-ids-redis", "snowtoken / IDs and Redis",
		"Worker ID leases, clock rollbacks and IDs per replica; Redis round trips, pool, memory and evictions as the issuer exports them (no exporter needed).")

	b.row("IDs")
	b.table("Worker ID per replica", "The Snowflake worker ID each replica holds the lease of.", "none", 8,
		query{`snowtoken_worker_id{` + sel + `}`, "{{instance}}"})
	b.graph("Lease time left", "Until each replica's lease ends unless renewed: renewals every third of the TTL keep it above two thirds of it; 0: lost, the replica issues no ID.", "s", 8,
		query{`snowtoken_worker_lease_remaining_seconds{` + sel + `}`, "{{instance}}"},
		query{`max(snowtoken_worker_lease_ttl_seconds{` + sel + `})`, "TTL"})
	b.graph("IDs issued", "Tokens (and so IDs) issued a second, by replica.", "reqps", 8,
		query{`sum by (instance) (rate(snowtoken_tokens_issued_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})
	b.graph("ID failures by reason", "IDs not issued: lease (no worker ID), clock_rollback (503 with Retry-After), clock_unhealthy (the replica not ready), other.", "short", 8,
		query{`sum by (reason) (increase(snowtoken_id_failures_total{` + sel + `}[$__rate_interval]))`, "{{reason}}"})
	b.graph("Clock rollbacks", "ID requests that found the clock behind the last ID (at any tier), by replica.", "short", 8,
		query{`sum by (instance) (increase(snowtoken_id_clock_rollbacks_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})
	b.graph("Generator waits", "ID requests that waited for a used-up millisecond (4,096 IDs in one on a replica).", "short", 8,
		query{`sum by (instance) (increase(snowtoken_id_generator_waits_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})

	b.row("Redis")
	b.graph("Round-trip time", "One command or pipeline on the replicas' main Redis clients: median and 99th percentile.", "s", 8,
		query{`histogram_quantile(0.5, sum by (le) (rate(snowtoken_redis_round_trip_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p50"},
		query{`histogram_quantile(0.99, sum by (le) (rate(snowtoken_redis_round_trip_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p99"})
	b.graph("Round trips per request", "Redis round trips for each HTTP request, background work (heartbeats, lease renewals) included; and the share of validations that read Redis.", "short", 8,
		query{`sum(rate(snowtoken_redis_round_trip_seconds_count{` + sel + `}[$__rate_interval])) / sum(rate(snowtoken_http_requests_total{` + sel + `}[$__rate_interval]))`, "round trips / request"},
		query{`sum(rate(snowtoken_validation_decisions_total{` + sel + `,by=~"redis_.*"}[$__rate_interval])) / sum(rate(snowtoken_validation_decisions_total{` + sel + `}[$__rate_interval]))`, "validations reading Redis"})
	b.stat("Redis reachable", "1 while every replica's INFO answers within 1 s; the page SnowtokenRedisUnreachable fires after a minute at 0.", "none", 8,
		steps("red", 1.0, "green"), valueText("0", "unreachable", "red", "1", "up", "green"),
		query{`min(snowtoken_redis_up{` + sel + `})`, ""})
	b.graph("Pool connections", "Connections of the replicas' Redis pools, in use and idle.", "short", 8,
		query{`sum by (state) (snowtoken_redis_pool_connections{` + sel + `})`, "{{state}}"})
	b.graph("Pool waits and timeouts", "Commands that waited for a free connection, and those that gave up: the pool is too small (pool_size in the Redis URL) or Redis too slow.", "ops", 8,
		query{`sum(rate(snowtoken_redis_pool_waits_total{` + sel + `}[$__rate_interval]))`, "waits"},
		query{`sum(rate(snowtoken_redis_pool_timeouts_total{` + sel + `}[$__rate_interval]))`, "timeouts"})
	b.graph("Memory", "Redis used_memory and maxmemory (of the node nearest its limit in a Cluster); every replica reports the same Redis.", "bytes", 8,
		query{`max(snowtoken_redis_memory_used_bytes{` + sel + `})`, "used"},
		query{`max(snowtoken_redis_memory_max_bytes{` + sel + `} > 0)`, "maxmemory"})
	b.graph("Evictions", "Keys Redis evicted: sessions and subject markers lost (docs/redis.md).", "short", 12,
		query{`max(increase(snowtoken_redis_evicted_keys_total{` + sel + `}[$__rate_interval]))`, "evicted"})
	b.graph("503s by replica", "Requests answered 503 because Redis or the ID generator failed.", "reqps", 12,
		query{`sum by (instance) (rate(snowtoken_unavailable_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})
	return b
}
