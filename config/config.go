// Package config reads snowtoken's settings from SNOWTOKEN_* environment variables.
//
// Every variable is listed in Vars, which `snowtoken -h` prints and the Docker
// tests check the Compose file against. A value that does not parse stops
// start-up with an error naming the variable, and so does a SNOWTOKEN_
// variable that is not in Vars (LoadEnv), with the nearest known name.
//
// Dev mode generates its Redis (in memory), its signing key and one client.
// It applies only when none of them is configured: no SNOWTOKEN_REDIS_*
// variable, no SNOWTOKEN_SIGNING_KEYS, no SNOWTOKEN_CLIENTS_FILE. Any one of
// them, or SNOWTOKEN_ENV=production, makes the configuration a production one,
// in which every dev default is an error naming the variable to set; a
// missing or misspelt variable cannot start a production replica in dev mode.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/redisconf"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("config")

// DefaultMetricsAddr is where GET /metrics is served unless
// SNOWTOKEN_METRICS_ADDR says otherwise: loopback only, and not 9090,
// which is Prometheus's own port on the machines that run it beside us.
const DefaultMetricsAddr = "127.0.0.1:9464"

// Var documents one environment variable.
type Var struct {
	Name    string
	Default string
	Help    string
}

// Vars lists every variable snowtoken reads.
var Vars = []Var{
	{"SNOWTOKEN_ADDR", ":8080", "listen address"},
	{"SNOWTOKEN_METRICS_ADDR", "127.0.0.1:9464", "listen address of GET /metrics (Prometheus), apart from the API so the public port does not serve it; off: no metrics listener"},
	{"SNOWTOKEN_EXTAUTHZ_ADDR", "off", "listen address of Envoy's ext_authz gRPC service (envoy.service.auth.v3.Authorization, with gRPC health), for Istio, Envoy Gateway, Contour and Envoy (docs/gateways.md); off: none"},
	{"SNOWTOKEN_PPROF", "false", "true: also serve Go's profiles (net/http/pprof) at /debug/pprof/ on SNOWTOKEN_METRICS_ADDR, never on the API's port; for profiling under load, and keep that listener private"},
	{"SNOWTOKEN_MAX_CONNS", "(the open-file limit less 256, or half of it below 512)", "most client connections open at once on SNOWTOKEN_ADDR; more wait in the kernel's backlog until one closes, and idle keep-alive connections are closed while at the cap"},
	{"SNOWTOKEN_FEED_MAX_SUBSCRIBERS", "(half of SNOWTOKEN_MAX_CONNS, at most 1000)", "most streams and waiting polls of the revocation feed at once, each holding a connection; below SNOWTOKEN_MAX_CONNS, so that the feed never holds every connection; past it 503"},
	{"SNOWTOKEN_FEED_MAX_PER_CLIENT", "8", "most streams and waiting polls of the revocation feed one client may hold at once, at most SNOWTOKEN_FEED_MAX_SUBSCRIBERS; past it 429. A Follow consumer holds one stream: raise it for a service of more than four replicas sharing one feed client"},
	{"SNOWTOKEN_ENV", "development", "development or production; production refuses every dev-mode default, and is implied by any SNOWTOKEN_REDIS_*, SNOWTOKEN_SIGNING_KEYS or SNOWTOKEN_CLIENTS_FILE"},
	{"SNOWTOKEN_REDIS_URL", "(dev: embedded in-memory Redis)", "a single Redis: redis://[user:password@]host:port/db, rediss:// for TLS; this or another Redis deployment is required in production"},
	{"SNOWTOKEN_REDIS_CLUSTER_URL", "(none)", "a Redis Cluster instead: redis[s]://[user:password@]host:port?addr=host2:port2&addr=host3:port3 (seed nodes)"},
	{"SNOWTOKEN_REDIS_CLUSTER_ADDRS", "(none)", "a Redis Cluster by comma-separated seed addresses (host:port) alone"},
	{"SNOWTOKEN_REDIS_SENTINEL_URL", "(none)", "Redis Sentinel instead: redis[s]://[user:password@]sentinel:port/db?master_name=NAME&addr=sentinel2:port&username=USER; the URL's user and password are the Sentinels' own"},
	{"SNOWTOKEN_REDIS_SENTINEL_MASTER", "(none)", "Redis Sentinel by master name alone, with SNOWTOKEN_REDIS_SENTINEL_ADDRS"},
	{"SNOWTOKEN_REDIS_SENTINEL_ADDRS", "(none)", "comma-separated Sentinel addresses (host:port)"},
	{"SNOWTOKEN_REDIS_PASSWORD_FILE", "(none: the URL's password, if any)", "file holding the Redis servers' password (a mounted secret), instead of one in the URL; one trailing newline is dropped"},
	{"SNOWTOKEN_REDIS_SENTINEL_PASSWORD_FILE", "(none: the URL's password, if any)", "file holding the Sentinels' own password (their requirepass)"},
	{"SNOWTOKEN_REDIS_TLS_CA_FILE", "(the system's CAs)", "PEM file of the CA certificates that verify the Redis servers of a rediss:// URL"},
	{"SNOWTOKEN_REDIS_TIMEOUT", "2s", "longest wait for one Redis command, retries and reconnecting included; also the dial, read and write timeout"},
	{"SNOWTOKEN_REDIS_ACCEPT_RISK", "(none)", "comma-separated Redis settings whose unsafe values you accept instead of a failing /readyz: maxmemory-policy, persistence (docs/redis.md)"},
	{"SNOWTOKEN_ISSUER", "http://localhost:8080", "iss of every token, and the base URL in the metadata: an http(s) URL with no query or fragment, taken in its canonical form (no trailing slash, scheme and host in lower case), which clients derive too; required in production"},
	{"SNOWTOKEN_AUDIENCE", "(none)", "aud of the tokens of clients that list no audiences, and the one audience they may ask for; 1 to 256 printable ASCII bytes, no space, quote or backslash"},
	{"SNOWTOKEN_TOKEN_TTL", "1h", "lifetime of a token when the client does not ask"},
	{"SNOWTOKEN_MAX_TOKEN_TTL", "24h", "longest lifetime any token may have"},
	{"SNOWTOKEN_CACHE_SIZE", "100000", "verified tokens remembered so that their signature is not checked again (at most 790 bytes of heap each); off turns the cache off (0, which did, is refused)"},
	{"SNOWTOKEN_CLIENTS_FILE", "(dev: one generated client)", "JSON clients file; required in production"},
	{"SNOWTOKEN_SIGNING_KEYS", "(dev: a generated key)", "a keys directory (keys.json says which key is next, active or retired; snowtoken keys rotate), or comma-separated Ed25519 PEM files: the first signs, all verify; reloaded on change and on SIGHUP; required in production"},
	{"SNOWTOKEN_WORKER_ID", "(last octet of the IPv4 address)", "explicit Snowflake worker ID"},
	{"SNOWTOKEN_WORKER_ID_STRICT", "false", "true: refuse to start when the candidate worker ID is leased by a live replica, instead of taking the lowest free one"},
	{"SNOWTOKEN_WORKER_LEASE_TTL", "10s", "lifetime of the worker-ID lease in Redis; renewed every third of it"},
	{"SNOWTOKEN_WORKER_IP", "(first up, non-loopback interface)", "IPv4 address whose last octet is the worker ID"},
	{"SNOWTOKEN_WORKER_INTERFACE", "(first up, non-loopback interface)", "network interface whose IPv4 last octet is the worker ID"},
	{"SNOWTOKEN_EPOCH", "2026-01-01T00:00:00Z", "RFC 3339 epoch of the ID timestamps; never change it once IDs exist"},
	{"SNOWTOKEN_BITS", "41/10/12", "timestamp/worker/sequence widths, summing to 63"},
	{"SNOWTOKEN_AUTH_FAILURES", "10/1m", "failed client authentications allowed per client ID and per source network (see the two below; the TCP peer, or X-Forwarded-For from SNOWTOKEN_TRUSTED_PROXIES) in a burst, then one per window/N; past it 429 with Retry-After, even for the right secret"},
	{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX", "32", "prefix length of the IPv4 network that counts as one source address for SNOWTOKEN_AUTH_FAILURES, 16 to 32; an IPv4-mapped IPv6 address counts as IPv4"},
	{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX", "64", "prefix length of the IPv6 network that counts as one source address for SNOWTOKEN_AUTH_FAILURES, 32 to 128; 64: every address of a customer's /64 shares one budget"},
	{"SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME", "5m", "how far ahead a private_key_jwt client assertion's exp may be (its jti is kept in Redis until then), 1s to 1h"},
	{"SNOWTOKEN_KEY_FETCH_ALLOW_NETS", "(none: public addresses only, and loopback for a URL that names it)", "comma-separated CIDRs or addresses of private networks (10.96.0.0/12: a cluster's Services) the issuer may fetch client key sets from (a jwks_uri, a workload issuer's discovery document and keys); a discovery document's jwks_uri reaches loopback only through these. Link-local (169.254.0.0/16), unspecified and multicast addresses are refused even within them"},
	{"SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME", "24h", "longest lifetime (exp − iat, and exp − now) of a workload identity token sent as a client assertion, such as a Kubernetes service-account token, 1s to 168h"},
	{"SNOWTOKEN_TRUSTED_PROXIES", "(none: the TCP peer is the client)", "comma-separated addresses or CIDRs (10.0.0.5, 10.0.0.0/8) of the proxies in front of clients whose X-Forwarded-For names the client's address, for the failed-authentication limit and the audit log; from any other peer it is ignored. List no consumer here: see SNOWTOKEN_DPOP_FORWARDERS"},
	{"SNOWTOKEN_DPOP_FORWARDERS", "(SNOWTOKEN_TRUSTED_PROXIES)", "comma-separated addresses or CIDRs of the callers whose X-Forwarded-Method, -Proto, -Host and -Uri name the original request a DPoP proof sent to GET /token/validate is checked against: a gateway's auth_request, a Remote-mode consumer; from any other peer they are ignored. Being one does not let a caller name the client's address. none: no one"},
	{"SNOWTOKEN_DPOP_NONCE", "false", "true: every DPoP proof must carry a nonce this service gave out in a DPoP-Nonce header (RFC 9449 §8), good for 1 to 2 minutes at every replica; a client without one gets use_dpop_nonce and retries"},
	{"SNOWTOKEN_REVLOG_THRESHOLD", "100ms", "how long after the read that brought the revocation log's last heartbeat a replica still validates from memory (no Redis command); past it, or while it resyncs, every validation reads Redis. A revoke that answered 200 at t is refused by every replica from t plus this. off: no follower, every validation reads Redis (0s, which did, is refused). 50ms to 10s, and at least 4 times SNOWTOKEN_REVLOG_HEARTBEAT"},
	{"SNOWTOKEN_REVLOG_HEARTBEAT", "25ms", "how often the replica holding the writer key appends a heartbeat to the revocation log's heartbeat stream (every replica tries: one EVALSHA each per period)"},
	{"SNOWTOKEN_TXN_TRUST_DOMAIN", "(off; dev: dev.snowtoken.local)", "the trust domain of Transaction Tokens (draft-ietf-oauth-transaction-tokens-10): their aud, and what turns them on: GET /token/validate?txn_token=1 then answers with a Txn-Token header (docs/txn-tokens.md); off: none, such a request is refused"},
	{"SNOWTOKEN_TXN_TTL", "60s", "lifetime of a Transaction Token, never past the access token's exp; 1s to 5m"},
	{"SNOWTOKEN_SHUTDOWN_DRAIN", "1s", "on SIGTERM: fail /readyz and close keep-alive connections for this long before refusing new connections (0s: at once)"},
	{"SNOWTOKEN_LOG_LEVEL", "info", "debug, info, warn or error"},
}

// Config is the parsed configuration.
type Config struct {
	Addr            string
	MetricsAddr     string // empty: no metrics listener
	ExtAuthzAddr    string // empty: no ext_authz listener
	Pprof           bool   // serve /debug/pprof/ on the metrics listener
	MaxConns        int    // 0: derived from the open-file limit (cmd/server)
	Production      bool
	RedisURL        string        // SNOWTOKEN_REDIS_URL as set, password included: never log it
	Redis           Redis         // zero in dev: embedded Redis
	RedisTimeout    time.Duration // bounds one Redis command
	RedisAcceptRisk []string      // redisconf settings whose unsafe values are accepted
	Issuer          string        // canonical (jwtpolicy.Issuer)
	IssuerAsSet     string        // SNOWTOKEN_ISSUER as set, when that is not its canonical form
	IssuerDefaulted bool
	Audience        string
	TokenTTL        time.Duration
	MaxTokenTTL     time.Duration
	CacheSize       int      // verified-token cache entries (token.Options.CacheSize): token.CacheOff for off
	ClientsFile     string   // empty in dev: a generated client
	SigningKeys     []string // empty in dev: a generated key
	WorkerID        int64
	WorkerIDSet     bool
	WorkerIDStrict  bool
	LeaseTTL        time.Duration
	WorkerIP        string
	WorkerInterface string
	Epoch           time.Time
	Bits            *bitsalloc.BitsAllocator
	LogLevel        slog.Level
	ShutdownDrain   time.Duration
	AuthFailures    int           // failed authentications per key per AuthWindow (package authlimit)
	AuthWindow      time.Duration // the period of AuthFailures
	AuthIPv4Prefix  int           // the IPv4 network of one source address (package authlimit)
	AuthIPv6Prefix  int           // the IPv6 network of one source address
	TrustedProxies  []string      // addresses and CIDRs whose X-Forwarded-For is believed
	DPoPForwarders  []string      // addresses and CIDRs whose X-Forwarded-Method, -Proto, -Host, -Uri are believed
	DPoPNonce       bool          // DPoP proofs must carry a server nonce
	RevlogThreshold time.Duration // freshness of the revocation log follower (package revlog)
	RevlogOff       bool          // SNOWTOKEN_REVLOG_THRESHOLD=off: no follower, every validation reads Redis
	RevlogPeriod    time.Duration // the heartbeat period
	TxnTrustDomain  string        // aud of Transaction Tokens; empty: off
	TxnTTL          time.Duration // their lifetime

	// DPoPForwardersDefaulted: SNOWTOKEN_DPOP_FORWARDERS is unset, so the
	// DPoPForwarders are the TrustedProxies (loadProxies).
	DPoPForwardersDefaulted bool

	// AssertionMaxLifetime and WorkloadMaxLifetime bound client assertions
	// (clientauth.Options.MaxLifetime, MaxWorkloadLifetime).
	AssertionMaxLifetime time.Duration
	WorkloadMaxLifetime  time.Duration
	// KeyFetchAllowNets are the networks beyond the public ones client
	// key sets may be fetched from (clientauth.FetchOptions.AllowNets).
	KeyFetchAllowNets []netip.Prefix

	// FeedMaxSubscribers and FeedMaxPerClient bound the revocation feed's
	// streams and waiting polls, in all and of one client
	// (revfeed.Options.MaxSubscribers, MaxPerClient). 0: derived from the
	// connection cap, and revfeed's default (cmd/server).
	FeedMaxSubscribers int
	FeedMaxPerClient   int
}

// Load reads the configuration through getenv.
func Load(getenv func(string) string) (Config, error) {
	c := Config{
		Addr:            or(getenv("SNOWTOKEN_ADDR"), ":8080"),
		MetricsAddr:     or(getenv("SNOWTOKEN_METRICS_ADDR"), DefaultMetricsAddr),
		RedisURL:        getenv("SNOWTOKEN_REDIS_URL"),
		Issuer:          getenv("SNOWTOKEN_ISSUER"),
		Audience:        getenv("SNOWTOKEN_AUDIENCE"),
		ClientsFile:     getenv("SNOWTOKEN_CLIENTS_FILE"),
		WorkerIP:        getenv("SNOWTOKEN_WORKER_IP"),
		WorkerInterface: getenv("SNOWTOKEN_WORKER_INTERFACE"),
	}
	var errs []error
	bad := func(name, value string, err error) {
		errs = append(errs, fmt.Errorf("%w: %s=%.64q: %v", ErrConfig, name, value, err))
	}

	if strings.EqualFold(c.MetricsAddr, "off") {
		c.MetricsAddr = ""
	} else if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
		bad("SNOWTOKEN_METRICS_ADDR", c.MetricsAddr, errors.New("want host:port, such as 127.0.0.1:9464 or :9090, or off"))
	}
	if v := getenv("SNOWTOKEN_EXTAUTHZ_ADDR"); v != "" && !strings.EqualFold(v, "off") {
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad("SNOWTOKEN_EXTAUTHZ_ADDR", v, errors.New("want host:port, such as :9191, or off"))
		}
		c.ExtAuthzAddr = v
	}
	if v := getenv("SNOWTOKEN_PPROF"); v != "" {
		var err error
		if c.Pprof, err = strconv.ParseBool(v); err != nil {
			bad("SNOWTOKEN_PPROF", v, errors.New("want true or false"))
		} else if c.Pprof && c.MetricsAddr == "" {
			bad("SNOWTOKEN_PPROF", v, errors.New("the profiles are served on the metrics listener, which SNOWTOKEN_METRICS_ADDR=off turns off"))
		}
	}
	for _, v := range []struct {
		name, what string
		n          *int
	}{{"SNOWTOKEN_MAX_CONNS", "connections", &c.MaxConns}, {"SNOWTOKEN_FEED_MAX_SUBSCRIBERS", "subscribers", &c.FeedMaxSubscribers},
		{"SNOWTOKEN_FEED_MAX_PER_CLIENT", "subscribers", &c.FeedMaxPerClient}} {
		if s := getenv(v.name); s != "" {
			if n, err := strconv.Atoi(s); err != nil || n < 1 {
				bad(v.name, s, fmt.Errorf("want a positive number of %s", v.what))
			} else {
				*v.n = n
			}
		}
	}
	if c.Issuer == "" {
		c.Issuer, c.IssuerDefaulted = "http://localhost"+portOf(c.Addr), true
	} else if iss, err := jwtpolicy.Issuer(c.Issuer); err != nil {
		bad("SNOWTOKEN_ISSUER", c.Issuer, err)
	} else if iss != c.Issuer {
		c.IssuerAsSet, c.Issuer = c.Issuer, iss
	}
	var redisErrs []error
	c.Redis, c.RedisTimeout, redisErrs = loadRedis(getenv)
	errs = append(errs, redisErrs...)
	c.SigningKeys = list(getenv("SNOWTOKEN_SIGNING_KEYS"))
	c.RedisAcceptRisk = list(getenv("SNOWTOKEN_REDIS_ACCEPT_RISK"))
	for _, r := range c.RedisAcceptRisk {
		if r != redisconf.SettingPolicy && r != redisconf.SettingPersistence {
			bad("SNOWTOKEN_REDIS_ACCEPT_RISK", r, fmt.Errorf("want %s or %s", redisconf.SettingPolicy, redisconf.SettingPersistence))
		}
	}
	durationVar := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err == nil && d < time.Second {
			err = errors.New("want at least 1s")
		}
		if err != nil {
			bad(name, v, err)
			return def
		}
		return d
	}
	c.ShutdownDrain = time.Second
	if v := getenv("SNOWTOKEN_SHUTDOWN_DRAIN"); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			bad("SNOWTOKEN_SHUTDOWN_DRAIN", v, errors.New("want a duration such as 1s, or 0s"))
		} else {
			c.ShutdownDrain = d
		}
	}
	c.AuthFailures, c.AuthWindow = 10, time.Minute
	if v := getenv("SNOWTOKEN_AUTH_FAILURES"); v != "" {
		if n, w, err := parseRate(v); err != nil {
			bad("SNOWTOKEN_AUTH_FAILURES", v, err)
		} else {
			c.AuthFailures, c.AuthWindow = n, w
		}
	}
	c.AuthIPv4Prefix, c.AuthIPv6Prefix = authlimit.DefaultIPv4Prefix, authlimit.DefaultIPv6Prefix
	for _, p := range []struct {
		name     string
		bits     *int
		min, max int
	}{
		{"SNOWTOKEN_AUTH_FAILURES_IPV4_PREFIX", &c.AuthIPv4Prefix, authlimit.MinIPv4Prefix, 32},
		{"SNOWTOKEN_AUTH_FAILURES_IPV6_PREFIX", &c.AuthIPv6Prefix, authlimit.MinIPv6Prefix, 128},
	} {
		if v := getenv(p.name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < p.min || n > p.max {
				bad(p.name, v, fmt.Errorf("want a prefix length from %d to %d", p.min, p.max))
			} else {
				*p.bits = n
			}
		}
	}
	c.TrustedProxies, c.DPoPForwarders, c.DPoPForwardersDefaulted = loadProxies(getenv, bad)
	if v := getenv("SNOWTOKEN_DPOP_NONCE"); v != "" {
		var err error
		if c.DPoPNonce, err = strconv.ParseBool(v); err != nil {
			bad("SNOWTOKEN_DPOP_NONCE", v, errors.New("want true or false"))
		}
	}
	c.LeaseTTL = durationVar("SNOWTOKEN_WORKER_LEASE_TTL", 10*time.Second)
	c.AssertionMaxLifetime = durationVar("SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME", 5*time.Minute)
	c.WorkloadMaxLifetime = durationVar("SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME", 24*time.Hour)
	if c.AssertionMaxLifetime > clientauth.MaxMaxLifetime {
		bad("SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME", c.AssertionMaxLifetime.String(), fmt.Errorf("want at most %v", clientauth.MaxMaxLifetime))
	}
	if c.WorkloadMaxLifetime > clientauth.MaxMaxWorkloadLifetime {
		bad("SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME", c.WorkloadMaxLifetime.String(), fmt.Errorf("want at most %v", clientauth.MaxMaxWorkloadLifetime))
	}
	c.KeyFetchAllowNets = networks(getenv, "SNOWTOKEN_KEY_FETCH_ALLOW_NETS", bad)
	c.RevlogThreshold, c.RevlogPeriod, c.RevlogOff = loadRevlog(getenv, bad)
	txnDomain, txnSet, txnTTL := loadTxn(getenv, bad)
	c.TxnTrustDomain, c.TxnTTL = txnDomain, txnTTL
	c.TokenTTL = durationVar("SNOWTOKEN_TOKEN_TTL", token.DefaultTTL)
	c.MaxTokenTTL = durationVar("SNOWTOKEN_MAX_TOKEN_TTL", token.DefaultMaxTTL)
	c.CacheSize = token.DefaultCacheSize
	switch v := getenv("SNOWTOKEN_CACHE_SIZE"); v {
	case "":
	case "off":
		c.CacheSize = token.CacheOff
	case "0":
		// 0 meant off; refused, so that it does not silently become the
		// default, 100000 entries, in a container sized for no cache.
		bad("SNOWTOKEN_CACHE_SIZE", v, errors.New("0 no longer turns the cache off: write SNOWTOKEN_CACHE_SIZE=off, or leave it unset for the default"))
	default:
		n, err := strconv.Atoi(v)
		if err == nil && (n < 1 || n > 100_000_000) {
			err = errors.New("want off, or 1 to 100000000 entries")
		}
		if err != nil {
			bad("SNOWTOKEN_CACHE_SIZE", v, err)
		} else {
			c.CacheSize = n
		}
	}
	if c.Audience != "" {
		if err := syntax.CheckAudience(c.Audience); err != nil {
			bad("SNOWTOKEN_AUDIENCE", c.Audience, err)
		}
	}
	if c.MaxTokenTTL < c.TokenTTL {
		bad("SNOWTOKEN_MAX_TOKEN_TTL", c.MaxTokenTTL.String(), fmt.Errorf("below SNOWTOKEN_TOKEN_TTL (%v)", c.TokenTTL))
	}

	var err error
	c.Bits = bitsalloc.Default()
	if v := getenv("SNOWTOKEN_BITS"); v != "" {
		if c.Bits, err = bitsalloc.Parse(v); err != nil {
			bad("SNOWTOKEN_BITS", v, err)
			c.Bits = bitsalloc.Default()
		}
	}
	if v := getenv("SNOWTOKEN_WORKER_ID"); v != "" {
		c.WorkerID, err = strconv.ParseInt(v, 10, 64)
		if err == nil {
			err = c.Bits.CheckWorker(c.WorkerID)
		}
		if err != nil {
			bad("SNOWTOKEN_WORKER_ID", v, err)
		}
		c.WorkerIDSet = true
	}
	if v := getenv("SNOWTOKEN_WORKER_ID_STRICT"); v != "" {
		if c.WorkerIDStrict, err = strconv.ParseBool(v); err != nil {
			bad("SNOWTOKEN_WORKER_ID_STRICT", v, errors.New("want true or false"))
		}
	}
	c.Epoch = snowflakealg.DefaultEpoch
	if v := getenv("SNOWTOKEN_EPOCH"); v != "" {
		if c.Epoch, err = time.Parse(time.RFC3339, v); err != nil {
			bad("SNOWTOKEN_EPOCH", v, err)
		}
	}
	if v := getenv("SNOWTOKEN_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			bad("SNOWTOKEN_LOG_LEVEL", v, err)
		}
	}
	// Dev mode only by intent: see the package doc.
	var set []string // the production settings that are set
	for _, v := range Vars {
		if impliesProduction(v.Name) && getenv(v.Name) != "" {
			set = append(set, v.Name)
		}
	}
	why := "when SNOWTOKEN_ENV=production"
	switch mode := strings.ToLower(getenv("SNOWTOKEN_ENV")); mode {
	case "prod", "production":
		c.Production = true
	case "dev", "development":
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%w: SNOWTOKEN_ENV=%s conflicts with %[3]s: dev mode generates its Redis, signing key and client; unset SNOWTOKEN_ENV for production, or unset %[3]s for dev mode",
				ErrConfig, mode, strings.Join(set, ", ")))
		}
	case "":
		c.Production = len(set) > 0
		why = "in production, which " + strings.Join(set, ", ") + " imply (dev mode needs all of SNOWTOKEN_REDIS_*, SNOWTOKEN_SIGNING_KEYS and SNOWTOKEN_CLIENTS_FILE unset)"
	default:
		bad("SNOWTOKEN_ENV", mode, errors.New("want development or production"))
	}
	if !c.Production && !txnSet {
		c.TxnTrustDomain = DevTxnTrustDomain
	}
	if c.Production {
		for _, req := range []struct {
			name, or string
			missing  bool
		}{
			{"SNOWTOKEN_REDIS_URL", " (or another Redis deployment: SNOWTOKEN_REDIS_CLUSTER_URL, _CLUSTER_ADDRS, _SENTINEL_URL, _SENTINEL_MASTER)", !c.RedisConfigured() && len(redisErrs) == 0},
			{"SNOWTOKEN_SIGNING_KEYS", "", len(c.SigningKeys) == 0},
			{"SNOWTOKEN_CLIENTS_FILE", "", c.ClientsFile == ""},
			{"SNOWTOKEN_ISSUER", "", c.IssuerDefaulted},
		} {
			if req.missing {
				errs = append(errs, fmt.Errorf("%w: %s is required%s %s", ErrConfig, req.name, req.or, why))
			}
		}
	}
	return c, errors.Join(errs...)
}

// LoadEnv reads the configuration from env, a process's environment by
// name, as Load does, and also refuses every SNOWTOKEN_ variable that is not
// in Vars, so that a misspelt name is not silently ignored. Names are
// compared in upper case, so snowtoken_env is caught too. SNOWTOKEN_TEST_
// variables belong to the test suite (internal/redistest) and are let be.
func LoadEnv(env map[string]string) (Config, error) {
	c, err := Load(func(name string) string { return env[name] })
	return c, errors.Join(checkNames(slices.Sorted(maps.Keys(env))), err)
}

// impliesProduction reports whether setting variable name means a production
// deployment: a Redis deployment or its credentials, signing keys, a clients
// file. The Redis tuning variables (timeout, accepted risks) do not.
func impliesProduction(name string) bool {
	switch name {
	case "SNOWTOKEN_REDIS_TIMEOUT", "SNOWTOKEN_REDIS_ACCEPT_RISK":
		return false
	}
	return strings.HasPrefix(name, "SNOWTOKEN_REDIS_") || name == "SNOWTOKEN_SIGNING_KEYS" || name == "SNOWTOKEN_CLIENTS_FILE"
}

// RedisConfigured reports whether any Redis deployment is set; without one,
// dev mode embeds an in-memory Redis.
func (c Config) RedisConfigured() bool {
	return c.Redis != Redis{}
}

// parseRate reads "N/window" such as "10/1m": N at least 1, window at least 1s.
func parseRate(v string) (int, time.Duration, error) {
	want := errors.New(`want failures/window such as "10/1m", at least 1 per 1s`)
	ns, ws, ok := strings.Cut(v, "/")
	if !ok {
		return 0, 0, want
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 {
		return 0, 0, want
	}
	w, err := time.ParseDuration(ws)
	if err != nil || w < time.Second {
		return 0, 0, want
	}
	return n, w, nil
}

// list splits a comma-separated value, dropping empty entries.
func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// portOf returns ":8080" of "0.0.0.0:8080" or ":8080".
func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i:]
	}
	return ""
}

// LocalURL is the issuer's own address as seen from inside its host or container.
func (c Config) LocalURL() string { return "http://127.0.0.1" + portOf(c.Addr) }

// Usage writes the variable table.
func Usage(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range Vars {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, v.Default, v.Help)
	}
	tw.Flush()
}
