package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisTimeout is SNOWTOKEN_REDIS_TIMEOUT when it is not set.
const DefaultRedisTimeout = 2 * time.Second

// Redis is the Redis deployment the SNOWTOKEN_REDIS_* variables name, as
// go-redis options with credentials, TLS and timeouts applied. At most one
// field is set; none in dev mode, which embeds a Redis instead.
type Redis struct {
	Standalone *redis.Options
	Cluster    *redis.ClusterOptions
	Failover   *redis.FailoverOptions // Sentinel
}

// redisFields points at the settings the three go-redis option types share,
// so that one piece of code applies them to whichever is set.
type redisFields struct {
	password          *string
	sentinelPassword  *string // nil but for Sentinel
	dial, read, write *time.Duration
	contextTimeout    *bool
	tls               **tls.Config
}

func (r Redis) fields() (redisFields, bool) {
	switch {
	case r.Standalone != nil:
		o := r.Standalone
		return redisFields{&o.Password, nil, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.TLSConfig}, true
	case r.Cluster != nil:
		o := r.Cluster
		return redisFields{&o.Password, nil, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.TLSConfig}, true
	case r.Failover != nil:
		o := r.Failover
		return redisFields{&o.Password, &o.SentinelPassword, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled, &o.TLSConfig}, true
	}
	return redisFields{}, false
}

// loadRedis reads the SNOWTOKEN_REDIS_* variables. No error it returns holds
// a URL, a password or a file's content.
//
// A deployment is named by one go-redis URL, parsed by go-redis itself
// (redis.ParseURL, ParseClusterURL, ParseFailoverURL), so that a user, a
// password, rediss:// and the URL options mean what go-redis documents; or,
// as before these URLs, by the address lists alone. Passwords may instead
// come from files, as Docker and Kubernetes mount secrets.
func loadRedis(getenv func(string) string) (Redis, time.Duration, []error) {
	var errs []error
	bad := func(name string, err error) {
		errs = append(errs, fmt.Errorf("%w: %s: %v", ErrConfig, name, err))
	}

	timeout := DefaultRedisTimeout
	if v := getenv("SNOWTOKEN_REDIS_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			bad("SNOWTOKEN_REDIS_TIMEOUT", fmt.Errorf("%.64q: want a positive duration such as 2s", v))
		} else {
			timeout = d
		}
	}

	var (
		r   Redis
		set []string // the variables that name a deployment
		err error
	)
	if v := getenv("SNOWTOKEN_REDIS_URL"); v != "" {
		set = append(set, "SNOWTOKEN_REDIS_URL")
		r.Standalone, err = parseRedisURL(v, redis.ParseURL)
		if err != nil {
			bad("SNOWTOKEN_REDIS_URL", err)
		}
	}
	if v := getenv("SNOWTOKEN_REDIS_CLUSTER_URL"); v != "" {
		set = append(set, "SNOWTOKEN_REDIS_CLUSTER_URL")
		r.Cluster, err = parseRedisURL(v, redis.ParseClusterURL)
		if err != nil {
			bad("SNOWTOKEN_REDIS_CLUSTER_URL", err)
		}
	}
	if addrs := list(getenv("SNOWTOKEN_REDIS_CLUSTER_ADDRS")); len(addrs) > 0 {
		set = append(set, "SNOWTOKEN_REDIS_CLUSTER_ADDRS")
		r.Cluster = &redis.ClusterOptions{Addrs: addrs}
	}
	if v := getenv("SNOWTOKEN_REDIS_SENTINEL_URL"); v != "" {
		set = append(set, "SNOWTOKEN_REDIS_SENTINEL_URL")
		r.Failover, err = parseRedisURL(v, redis.ParseFailoverURL)
		if err == nil && r.Failover.MasterName == "" {
			err = errors.New("want the master's name as master_name=NAME in the URL")
		}
		if err != nil {
			bad("SNOWTOKEN_REDIS_SENTINEL_URL", err)
		}
	}
	master, sentinels := getenv("SNOWTOKEN_REDIS_SENTINEL_MASTER"), list(getenv("SNOWTOKEN_REDIS_SENTINEL_ADDRS"))
	if master != "" || len(sentinels) > 0 {
		set = append(set, "SNOWTOKEN_REDIS_SENTINEL_MASTER")
		if master == "" || len(sentinels) == 0 {
			bad("SNOWTOKEN_REDIS_SENTINEL_ADDRS", errors.New("set both SNOWTOKEN_REDIS_SENTINEL_MASTER and SNOWTOKEN_REDIS_SENTINEL_ADDRS, or neither"))
		}
		r.Failover = &redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels}
	}
	if len(set) > 1 {
		bad(strings.Join(set, ", "), errors.New("set only one Redis deployment: SNOWTOKEN_REDIS_URL, SNOWTOKEN_REDIS_CLUSTER_URL, SNOWTOKEN_REDIS_CLUSTER_ADDRS, SNOWTOKEN_REDIS_SENTINEL_URL or SNOWTOKEN_REDIS_SENTINEL_MASTER"))
	}
	if len(errs) > 0 {
		return Redis{}, timeout, errs
	}

	f, ok := r.fields()
	for _, s := range []struct {
		name string
		to   *string
	}{
		{"SNOWTOKEN_REDIS_PASSWORD_FILE", f.password},
		{"SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE", f.sentinelPassword},
	} {
		path := getenv(s.name)
		switch {
		case path == "":
		case !ok:
			bad(s.name, errors.New("set without a Redis deployment"))
		case s.to == nil:
			bad(s.name, errors.New("for a Sentinel deployment only"))
		case *s.to != "":
			bad(s.name, errors.New("the URL holds a password too; give it in one place"))
		default:
			if *s.to, err = readSecretFile(path); err != nil {
				bad(s.name, err)
			}
		}
	}
	if path := getenv("SNOWTOKEN_REDIS_TLS_CA_FILE"); path != "" {
		if !ok || *f.tls == nil {
			bad("SNOWTOKEN_REDIS_TLS_CA_FILE", errors.New("set with a rediss:// URL only"))
		} else if (*f.tls).RootCAs, err = readCertPool(path); err != nil {
			bad("SNOWTOKEN_REDIS_TLS_CA_FILE", err)
		}
	}
	if !ok {
		return r, timeout, errs
	}
	if *f.tls != nil && (*f.tls).InsecureSkipVerify {
		errs = append(errs, fmt.Errorf("%w: %s: skip_verify=true would send the password to any server; give the servers' CA in SNOWTOKEN_REDIS_TLS_CA_FILE", ErrConfig, set[0]))
	}
	if *f.dial != 0 || *f.read != 0 || *f.write != 0 {
		errs = append(errs, fmt.Errorf("%w: %s: set the timeouts with SNOWTOKEN_REDIS_TIMEOUT, not dial_timeout, read_timeout or write_timeout in the URL", ErrConfig, set[0]))
	}
	// Every socket operation waits at most the timeout, and with
	// ContextTimeoutEnabled the caller's deadline cuts it shorter. The
	// command as a whole, retries included, is bounded by the deadline
	// NewRedisClient gives it.
	*f.dial, *f.read, *f.write, *f.contextTimeout = timeout, timeout, timeout, true
	return r, timeout, errs
}

// parseRedisURL parses a redis:// or rediss:// URL with go-redis's parse.
// url.Parse errors quote the whole URL, password included, so they are
// replaced; go-redis's own errors name options and paths, never userinfo.
func parseRedisURL[T any](v string, parse func(string) (*T, error)) (*T, error) {
	if !strings.HasPrefix(v, "redis://") && !strings.HasPrefix(v, "rediss://") {
		return nil, errors.New("want a redis:// or rediss:// URL")
	}
	o, err := parse(v)
	if _, ok := errors.AsType[*url.Error](err); ok {
		return nil, errors.New("not a valid URL (percent-encode any of / : @ ? # % in the user or password)")
	}
	// go-redis drops a malformed query pair, a password= among them, unseen.
	if u, uerr := url.Parse(v); err == nil && uerr == nil {
		if _, qerr := url.ParseQuery(u.RawQuery); qerr != nil {
			return nil, errors.New("not a valid URL query (percent-encode any of & = ; % in a value)")
		}
	}
	return o, err
}

// readSecretFile returns the content of a mounted secret without one
// trailing newline. Its errors never hold the content.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError: the path and why, not the content
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// readCertPool reads PEM certificates into a pool.
func readCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// NewRedisClient returns a client of the configured Redis deployment, or nil
// when none is configured (dev mode). Each command, and each pipeline, ends
// by RedisTimeout, retries included, unless its context ends sooner.
func (c Config) NewRedisClient() redis.UniversalClient {
	var rdb redis.UniversalClient
	switch r := c.Redis; {
	case r.Standalone != nil:
		rdb = redis.NewClient(r.Standalone)
	case r.Cluster != nil:
		rdb = redis.NewClusterClient(r.Cluster)
	case r.Failover != nil:
		rdb = redis.NewFailoverClient(r.Failover)
	default:
		return nil
	}
	rdb.AddHook(deadlineHook(c.RedisTimeout))
	return rdb
}

// deadlineHook gives each command and pipeline a deadline of its duration
// unless its context has an earlier one. Per-operation timeouts alone cannot
// bound a command: go-redis retries it (MaxRetries, timeouts included),
// dials up to DialerRetries times, and a Cluster client retries on another
// node; a context deadline ends all of them, as ContextTimeoutEnabled makes
// every socket deadline, dial and retry back-off honour it. Retries still
// happen within the bound: a connection the server closed is replaced at once.
type deadlineHook time.Duration

func (h deadlineHook) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= time.Duration(h) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(h))
}

func (h deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, cancel := h.bound(ctx)
		defer cancel()
		return next(ctx, cmd)
	}
}

func (h deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, cancel := h.bound(ctx)
		defer cancel()
		return next(ctx, cmds)
	}
}
