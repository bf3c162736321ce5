// Package authlimit limits failed client authentications, shared by every
// replica through Redis, with the GCRA rate limiter of
// github.com/go-redis/redis_rate: each key (a client ID, a source address)
// may fail Settings.Failures times in a burst, then once per
// Window/Failures, so no more than Failures+1 times in any Window.
//
// A source address counts as its network: IPv4 by /32 and IPv6 by /64 unless
// Settings say otherwise (Settings.IPv4Prefix, Settings.IPv6Prefix), and an
// IPv4-mapped IPv6 address (::ffff:192.0.2.1) as the IPv4 address it maps.
// An IPv6 customer gets a /64 (RFC 6177), so keying by the whole address
// would give one attacker 2^64 budgets.
//
// A successful authentication costs no Redis command: only a failure is
// recorded (Fail), and the answer that a key is limited is kept in this
// process until Redis says the key may fail again, so that the next
// attempts on the key are refused (Blocked) before the secret is checked,
// from memory. Another replica learns of a limited key at the first failure
// it records for it.
//
// # Redis keys
//
// With the default Prefix "st:" (the token store's own):
//
//	rate:st:authfail:client:{sha256 of the ID, base64url}   string  GCRA "theoretical arrival time"  EX until reset
//	rate:st:authfail:address:{network}                       string  the same                          EX until reset
//
// where {network} is the address's prefix in CIDR notation, such as
// 192.0.2.1/32 or 2001:db8:1:2::/64.
//
// redis_rate writes them ("rate:" is its own prefix) and sets each to expire
// when the key is back to its full burst. A key that disappears (evicted by a
// volatile-* policy, a failover that lost it) forgives its failures: the
// attacker gets a full burst again, nothing else.
package authlimit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Defaults of Settings.
const (
	DefaultFailures = 10
	DefaultWindow   = time.Minute
	DefaultPrefix   = "st:"
	// DefaultIPv4Prefix and DefaultIPv6Prefix are the networks a source
	// address counts as: one IPv4 address, one IPv6 /64 (what a customer
	// gets, RFC 6177).
	DefaultIPv4Prefix = 32
	DefaultIPv6Prefix = 64
	// MinIPv4Prefix and MinIPv6Prefix bound the networks from below: a
	// shorter prefix would hold many unrelated customers (an IPv6 /32 is a
	// whole ISP's allocation), whom one guesser could then lock out at once.
	MinIPv4Prefix = 16
	MinIPv6Prefix = 32
	// maxEntries bounds the limited keys kept in memory before the expired
	// ones are swept.
	maxEntries = 10000
)

// Kinds of Key.
const (
	Client  = "client"
	Address = "address"
)

// Errors of this package.
var (
	// ErrLimited is wrapped by every *LimitedError.
	ErrLimited = errors.New("too many failed authentications")
	// ErrSettings is wrapped by New's refusal of Settings.
	ErrSettings = errors.New("authlimit: bad settings")
)

// Settings configures a Limiter. The zero value means 10 failures a minute.
type Settings struct {
	// Failures is how many failures a key may have in a burst. Zero means
	// DefaultFailures.
	Failures int
	// Window is the period of Failures: after a burst, one more failure is
	// allowed every Window/Failures. Zero means DefaultWindow.
	Window time.Duration
	// Prefix goes before every key, after redis_rate's "rate:". Empty means
	// DefaultPrefix.
	Prefix string
	// IPv4Prefix is the length of the IPv4 network an Address key counts
	// as, MinIPv4Prefix to 32. Zero means DefaultIPv4Prefix (one address).
	IPv4Prefix int
	// IPv6Prefix is the length of the IPv6 network an Address key counts
	// as, MinIPv6Prefix to 128. Zero means DefaultIPv6Prefix (a /64).
	IPv6Prefix int
	// Now reads the clock of the in-process state. Nil means time.Now.
	// Redis keeps the limit's own time (TIME in its script).
	Now func() time.Time
}

// Key is what failures count against: a client ID or a source address.
// The Limiter counts an Address by its network (see the package doc), and
// names that network in a LimitedError's Key.
type Key struct {
	Kind string // Client or Address
	Name string
}

// LimitedError says that a key has used up its failures.
type LimitedError struct {
	Key Key
	// Wait is how long until the key may fail again.
	Wait time.Duration
	// Report is true for the first refusal of the key in this process in a
	// Window: the one to log.
	Report bool
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("%s: this %s is refused for %s; retry later", ErrLimited, e.Key.Kind, max(e.Wait, time.Second).Round(time.Second))
}

func (e *LimitedError) Unwrap() error { return ErrLimited }

// Description is what the client is told (refusal.Description): the whole
// text, which names no internals.
func (e *LimitedError) Description() string { return e.Error() }

// RetryAfter is Wait, for a Retry-After header.
func (e *LimitedError) RetryAfter() time.Duration { return e.Wait }

// Limiter counts failed authentications.
type Limiter struct {
	rl    *redis_rate.Limiter
	limit redis_rate.Limit
	s     Settings

	mu      sync.Mutex
	limited map[Key]*entry
}

// entry is what this process knows of a limited key.
type entry struct {
	until    time.Time // refused until then
	reported time.Time // last LimitedError with Report
}

// New returns a Limiter keeping its counts in rdb. It refuses a negative
// Failures, a Window shorter than a second, and prefix lengths out of range.
func New(rdb redis.UniversalClient, s Settings) (*Limiter, error) {
	if s.Failures == 0 {
		s.Failures = DefaultFailures
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.Failures < 0 || s.Window < time.Second {
		return nil, fmt.Errorf("%w: want at least 1 failure per at least 1s, got %d/%s", ErrSettings, s.Failures, s.Window)
	}
	if s.IPv4Prefix != 0 && (s.IPv4Prefix < MinIPv4Prefix || s.IPv4Prefix > 32) ||
		s.IPv6Prefix != 0 && (s.IPv6Prefix < MinIPv6Prefix || s.IPv6Prefix > 128) {
		return nil, fmt.Errorf("%w: want an IPv4 prefix length from %d to 32 and an IPv6 one from %d to 128, got /%d and /%d",
			ErrSettings, MinIPv4Prefix, MinIPv6Prefix, s.IPv4Prefix, s.IPv6Prefix)
	}
	if s.IPv4Prefix == 0 {
		s.IPv4Prefix = DefaultIPv4Prefix
	}
	if s.IPv6Prefix == 0 {
		s.IPv6Prefix = DefaultIPv6Prefix
	}
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return &Limiter{
		rl:      redis_rate.NewLimiter(rdb),
		limit:   redis_rate.Limit{Rate: s.Failures, Burst: s.Failures, Period: s.Window},
		s:       s,
		limited: map[Key]*entry{},
	}, nil
}

// Blocked returns a *LimitedError if this process knows one of keys to be
// limited, else nil. It asks nothing of Redis.
func (l *Limiter) Blocked(keys ...Key) error {
	now := l.s.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.limited) == 0 {
		return nil
	}
	for _, k := range keys {
		k = l.network(k)
		if e := l.limited[k]; e != nil && now.Before(e.until) {
			return &LimitedError{Key: k, Wait: e.until.Sub(now)}
		}
	}
	return nil
}

// Fail records one failed authentication against every key. It returns a
// *LimitedError for the key that has used up its failures with the longest
// wait, nil while none has, or Redis's error. Every limited key is
// remembered for Blocked.
func (l *Limiter) Fail(ctx context.Context, keys ...Key) error {
	var limited []*LimitedError
	for _, k := range keys {
		k = l.network(k)
		res, err := l.rl.Allow(ctx, l.redisKey(k), l.limit)
		if err != nil {
			return fmt.Errorf("authlimit: recording a failure: %w", err)
		}
		if res.Allowed == 0 {
			limited = append(limited, &LimitedError{Key: k, Wait: res.RetryAfter})
		}
	}
	if len(limited) == 0 {
		return nil
	}
	worst := slices.MaxFunc(limited, func(a, b *LimitedError) int { return cmp.Compare(a.Wait, b.Wait) })
	now := l.s.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, le := range limited {
		e := l.limited[le.Key]
		if e == nil {
			if len(l.limited) >= maxEntries {
				l.sweep(now)
			}
			e = &entry{}
			l.limited[le.Key] = e
		}
		e.until = now.Add(le.Wait)
		if le == worst && (e.reported.IsZero() || now.Sub(e.reported) >= l.s.Window) {
			e.reported, le.Report = now, true
		}
	}
	return worst
}

// sweep forgets the keys that are no longer limited and were last reported
// a Window ago.
func (l *Limiter) sweep(now time.Time) {
	for k, e := range l.limited {
		if !now.Before(e.until) && now.Sub(e.reported) >= l.s.Window {
			delete(l.limited, k)
		}
	}
}

// network returns k with an Address replaced by its network in CIDR
// notation: an IPv4-mapped IPv6 address as IPv4, IPv4 by IPv4Prefix, IPv6 by
// IPv6Prefix (its zone dropped). A name that is no IP address, which the
// handlers never give, stays a key of its own.
func (l *Limiter) network(k Key) Key {
	if k.Kind != Address {
		return k
	}
	ip, err := netip.ParseAddr(k.Name)
	if err != nil {
		return k
	}
	ip = ip.Unmap().WithZone("")
	bits := l.s.IPv6Prefix
	if ip.Is4() {
		bits = l.s.IPv4Prefix
	}
	p, err := ip.Prefix(bits) // cannot fail: bits is checked by New
	if err != nil {
		return k
	}
	return Key{Kind: Address, Name: p.String()}
}

// redisKey names k's key; a client ID is hashed, so that any ID makes a
// short key of plain characters.
func (l *Limiter) redisKey(k Key) string {
	name := k.Name
	if k.Kind == Client {
		sum := sha256.Sum256([]byte(name))
		name = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return l.s.Prefix + "authfail:" + k.Kind + ":" + name
}
