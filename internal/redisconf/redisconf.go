// Package redisconf checks that a Redis is configured the way snowtoken's
// promises need, and says which setting is unsafe and what the safe values are.
//
// What each setting may be (docs/redis.md has the long form):
//
//	setting           safe                                   refused (unless accepted)
//	maxmemory-policy  noeviction: a full Redis refuses new   allkeys-*: a cache policy; it evicts
//	                  sessions (503, /readyz fails)          keys without a TTL (worker marks) as
//	                  volatile-*: sessions and subject       well as sessions
//	                  markers may be evicted (logouts)
//	persistence       appendonly yes, appendfsync always     RDB snapshots only: a restart restores
//	                  or everysec; or none at all (a         records that were revoked after the
//	                  restart ends every session)            snapshot; appendfsync no: the same
//	                                                         after a crash of the host
//
// Eviction can log users out but never revives a revoked token, and a lost
// worker mark makes a replica wait a lease TTL, never issue a duplicate ID
// (packages token and lease fail closed): what these checks prevent is a
// store that silently restores old state, and a store shared as a cache.
//
// Where CONFIG GET is not allowed (managed Redis services rename or forbid
// it), Check says so once in the log and passes.
package redisconf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The settings Check reads, as Options.Accept names them.
const (
	SettingPolicy      = "maxmemory-policy"
	SettingPersistence = "persistence"
)

// Errors returned by Check.
var (
	ErrUnsafe = errors.New("redisconf: redis settings break snowtoken's promises")
)

// Options configures a Checker.
type Options struct {
	// Accept lists settings (SettingPolicy, SettingPersistence) whose unsafe
	// values the operator accepts: Check logs them once and passes.
	Accept []string
	// Logger receives the one-time notes. Nil means slog.Default().
	Logger *slog.Logger
}

// Checker checks the settings of one Redis deployment.
type Checker struct {
	rdb    redis.UniversalClient
	accept []string
	log    *slog.Logger

	mu     sync.Mutex
	logged map[string]bool // notes already logged
}

// New returns a Checker of rdb. An unknown name in opts.Accept is an error.
func New(rdb redis.UniversalClient, opts Options) (*Checker, error) {
	for _, a := range opts.Accept {
		if a != SettingPolicy && a != SettingPersistence {
			return nil, fmt.Errorf("redisconf: cannot accept %q: want %s or %s", a, SettingPolicy, SettingPersistence)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Checker{rdb: rdb, accept: opts.Accept, log: opts.Logger, logged: map[string]bool{}}, nil
}

// Problem is one unsafe setting.
type Problem struct {
	Setting string // SettingPolicy or SettingPersistence
	Value   string // what Redis has, e.g. "allkeys-lru"
	Safe    string // the safe values
	Why     string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s is %s (%s); safe: %s", p.Setting, p.Value, p.Why, p.Safe)
}

// Evaluate returns the problems of one server's CONFIG GET answer.
func Evaluate(cfg map[string]string) []Problem {
	var ps []Problem
	switch policy := cfg["maxmemory-policy"]; {
	case policy == "noeviction", strings.HasPrefix(policy, "volatile-"):
	default:
		ps = append(ps, Problem{SettingPolicy, policy,
			"maxmemory-policy noeviction, or volatile-*",
			"it treats the store as a cache: sessions and worker marks are evicted under memory pressure"})
	}
	aof, save := cfg["appendonly"] == "yes", strings.TrimSpace(cfg["save"]) != ""
	switch fsync := cfg["appendfsync"]; {
	case aof && fsync == "no":
		ps = append(ps, Problem{SettingPersistence, "appendonly yes, appendfsync no",
			"appendfsync always or everysec",
			"a crash of the host restores an older state, without the latest revocations"})
	case !aof && save:
		ps = append(ps, Problem{SettingPersistence, "RDB snapshots only (save " + strings.TrimSpace(cfg["save"]) + ")",
			"appendonly yes with appendfsync everysec or always (or no persistence at all)",
			"a restart restores a snapshot taken before the latest revocations, and revoked tokens validate again"})
	}
	return ps
}

// Check reads the settings of every master and returns an error wrapping
// ErrUnsafe that names each unsafe setting not accepted, or nil. Accepted
// problems, and a Redis that does not allow CONFIG GET, are logged once.
// An error reaching Redis is returned as it is.
func (c *Checker) Check(ctx context.Context) error {
	var (
		mu       sync.Mutex
		problems []string
	)
	check := func(ctx context.Context, node redis.UniversalClient, name string) error {
		cfg, err := node.ConfigGet(ctx, "*").Result()
		if err != nil {
			if isNotAllowed(err) {
				c.once("config get not allowed", "redis: CONFIG GET is not allowed; cannot check maxmemory-policy and persistence: see docs/redis.md for what they must be",
					"node", name, "err", err.Error())
				return nil
			}
			return err
		}
		for _, p := range Evaluate(cfg) {
			if slices.Contains(c.accept, p.Setting) {
				c.once("accepted "+name+p.Setting+p.Value, "redis: an unsafe setting is accepted by SNOWTOKEN_REDIS_ACCEPT_RISK",
					"node", name, "problem", p.String())
				continue
			}
			mu.Lock()
			problems = append(problems, name+": "+p.String())
			mu.Unlock()
		}
		return nil
	}
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return check(ctx, m, m.Options().Addr)
		})
	} else {
		err = check(ctx, c.rdb, "redis")
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%w: %s; set them, or accept the risk by naming them in SNOWTOKEN_REDIS_ACCEPT_RISK",
			ErrUnsafe, strings.Join(problems, "; "))
	}
	return nil
}

// once logs msg the first time key is seen.
func (c *Checker) once(key, msg string, args ...any) {
	c.mu.Lock()
	seen := c.logged[key]
	c.logged[key] = true
	c.mu.Unlock()
	if !seen {
		c.log.Warn(msg, args...)
	}
}

// isNotAllowed reports an error of a Redis that refuses CONFIG: an unknown
// (renamed) command, or an ACL without the permission.
func isNotAllowed(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.HasPrefix(msg, "err unknown command") || strings.HasPrefix(msg, "noperm") ||
		strings.Contains(msg, "unknown command")
}
