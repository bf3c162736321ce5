package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/snowtoken/snowtoken/token"
)

// The garbage collector's defaults for the issuer, unless GOGC and
// GOMEMLIMIT say otherwise.
//
// The live heap is small (keys, clients, the verified-token cache), so with
// Go's GOGC=100 the collector runs every few megabytes of allocation, many
// times a second under load. GOGC=400 makes it run a quarter as often: with
// wrk on validate it cut the issuer's CPU per request by about a tenth
// (BENCHMARKS.md).
//
// The soft memory limit keeps the heap under what the process may use: in a
// container with a memory limit (Compose's deploy.resources, a Kubernetes
// pod's limits), containerMemRatio of it, read from the cgroup, so that a
// full verified-token cache and GOGC's growth meet the collector before
// they meet the OOM killer; elsewhere defaultMemLimit, which keeps a full
// cache at the defaults (tens of MB) from growing the heap to five times its
// size. GOMEMLIMIT, when set, wins: Go reads it itself.
const (
	defaultGOGC       = 400
	defaultMemLimit   = 256 << 20
	containerMemRatio = 0.9
)

// Where the soft memory limit came from, for the start-up log and errors.
const (
	limitFromEnv       = "GOMEMLIMIT"
	limitFromContainer = "container"
	limitFromDefault   = "default"
)

// memLimit is the soft memory limit tuneGC set and where it came from.
type memLimit struct {
	bytes int64
	from  string // limitFrom*
}

// tuneGC applies defaultGOGC where GOGC is unset, and a soft memory limit
// where GOMEMLIMIT is unset: containerMemRatio of what container reports
// (memlimit.FromCgroup in production), or defaultMemLimit where it reports
// no limit or cannot tell. It returns the limit in force.
func tuneGC(env map[string]string, container memlimit.Provider) memLimit {
	if env["GOGC"] == "" {
		debug.SetGCPercent(defaultGOGC)
	}
	if env["GOMEMLIMIT"] != "" {
		return memLimit{debug.SetMemoryLimit(-1), limitFromEnv}
	}
	l := memLimit{defaultMemLimit, limitFromDefault}
	if n, err := container(); err == nil && n > 0 && n < math.MaxInt64 {
		l = memLimit{int64(float64(n) * containerMemRatio), limitFromContainer}
	}
	debug.SetMemoryLimit(l.bytes)
	return l
}

// errCacheTooBig is checkCacheFits' refusal.
var errCacheTooBig = errors.New("SNOWTOKEN_CACHE_SIZE: a full verified-token cache would not fit the memory limit")

// checkCacheFits refuses a verified-token cache of entries whose full size
// (token.CacheEntryBytes each) would take more than three quarters of the
// soft memory limit: the collector would run without pause once it filled,
// and in a container the OOM killer would end it. Over half, it warns.
func checkCacheFits(entries int, limit memLimit, log *slog.Logger) error {
	need := int64(entries) * token.CacheEntryBytes
	const mib = 1 << 20
	attrs := []any{"cache_size", entries, "cache_bytes", need, "memory_limit_bytes", limit.bytes, "memory_limit_from", limit.from}
	switch {
	case need > limit.bytes/4*3:
		return fmt.Errorf("%w: %d entries take about %d MiB of heap (%d bytes each), over three quarters of the %d MiB soft memory limit (%s): "+
			"lower SNOWTOKEN_CACHE_SIZE, or raise GOMEMLIMIT or the container's memory limit",
			errCacheTooBig, entries, need/mib, token.CacheEntryBytes, limit.bytes/mib, limitSource(limit.from))
	case need > limit.bytes/2:
		log.Warn("a full verified-token cache takes over half the soft memory limit: the collector will run often; lower SNOWTOKEN_CACHE_SIZE or raise the memory limit", attrs...)
	}
	return nil
}

// limitSource says in words where a limit came from.
func limitSource(from string) string {
	switch from {
	case limitFromContainer:
		return fmt.Sprintf("%.0f%% of the container's memory limit", containerMemRatio*100)
	case limitFromDefault:
		return "the default outside a container with a memory limit"
	}
	return "set by " + from
}
