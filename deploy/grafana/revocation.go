package main

// revocation: revokes, each replica's revocation state (heartbeat age, time
// stale, resyncs), the feed's followers, and where validations decided.
func revocation() *board {
	b := newBoard("snowtoken-revocation", "snowtoken / Revocation",
		"Revocation pushed to every validator (docs/revocation.md): revokes, each replica's freshness, resyncs, feed subscribers, and whether validations decided from memory or read Redis.")

	b.row("Revokes")
	b.graph("Revoke rate", "Revocations by route (a token, a subject's tokens, a client's tokens) and status.", "reqps", 12,
		query{`sum by (route, status) (rate(snowtoken_http_requests_total{` + sel + `,` + revokeRoutes + `}[$__rate_interval]))`, "{{route}} {{status}}"})
	b.graph("Log entries applied", "Revocation log entries each replica's follower applied.", "ops", 12,
		query{`sum by (instance) (rate(snowtoken_revlog_entries_applied_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})

	b.row("Freshness per replica")
	b.graph("Heartbeat age", "Since the read that brought each replica's last heartbeat (-1: none since its last resync). Above SNOWTOKEN_REVLOG_THRESHOLD (100 ms by default) the replica is stale: validation reads Redis.", "s", 12,
		query{`snowtoken_revlog_heartbeat_age_seconds{` + sel + `}`, "{{instance}}"})
	b.graph("Time stale", "Share of the time each replica's revocation state was not fresh. The ticket SnowtokenRevocationStale fires above 10% for 10 minutes.", "percentunit", 12,
		query{`rate(snowtoken_revlog_stale_seconds_total{` + sel + `}[$__rate_interval])`, "{{instance}}"})
	b.stat("Fresh over the time range", "Share of the time range each replica decided from memory: the revocation SLO (99.9%, docs/slo.md).", "percentunit", 12,
		steps("red", 0.999, "green"), nil,
		query{`1 - rate(snowtoken_revlog_stale_seconds_total{` + sel + `}[$__range])`, "{{instance}}"})
	b.graph("Resyncs by reason", "Full reads of the revocation log: start, epoch, loss, unapplied, trimmed, error, quiet, entry, backlog (docs/revocation.md).", "short", 12,
		query{`sum by (reason) (increase(snowtoken_revlog_resyncs_total{` + sel + `}[$__rate_interval]))`, "{{reason}}"})

	b.row("Validations and consumers")
	b.graph("Decisions by source", "Where validations learned a token's session state: log_live and log_revoked from memory (no Redis command); redis_unknown, redis_uncached, redis_no_log from Redis.", "ops", 12,
		query{`sum by (by) (rate(snowtoken_validation_decisions_total{` + sel + `}[$__rate_interval]))`, "{{by}}"})
	b.graph("Feed subscribers", "Consumers following the revocation feed (GET /revocations/events), by replica.", "short", 12,
		query{`sum by (instance) (snowtoken_revfeed_subscribers{` + sel + `})`, "{{instance}}"})
	return b
}
