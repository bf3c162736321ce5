package client

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/jwk"
)

// Defaults of Options.
const (
	DefaultTimeout         = 2 * time.Second
	DefaultLeeway          = 5 * time.Second
	DefaultCacheSize       = 10_000
	DefaultJWKSMaxAge      = jwk.DefaultTTL // 5 min
	DefaultJWKSMinInterval = 10 * time.Second
	DefaultRealm           = "snowtoken"
	DefaultFeedThreshold   = 150 * time.Millisecond
	// DefaultFeedRetention is the issuer's default SNOWTOKEN_MAX_TOKEN_TTL.
	DefaultFeedRetention = 24 * time.Hour
	// MaxTokenLen bounds the tokens looked at; the issuer refuses longer ones too.
	MaxTokenLen = 4096
)

// NoLeeway, as Options.Leeway, allows no clock skew: the named value of
// none, since zero is the default (as token.NoLeeway in the issuer).
const NoLeeway time.Duration = -1

// Mode chooses who verifies a token's signature.
type Mode int

const (
	// Remote asks the issuer about every token (GET /token/validate). It is
	// the zero value.
	Remote Mode = iota
	// Local verifies signatures and claims against the issuer's JWKS, then
	// checks revocation as RevocationCheck says.
	Local
)

// RevocationCheck says whether Local mode asks the issuer if a token whose
// signature and claims check out has been revoked.
type RevocationCheck int

const (
	// Check asks the issuer (GET /token/validate) about every token that
	// passed the local checks, through the cache when CacheTTL is set. It is
	// the zero value, so a revoked token is rejected as in Remote mode; Local
	// mode still spares the issuer every forged, expired or malformed token.
	Check RevocationCheck = iota
	// Skip trusts a valid signature alone and never asks the issuer.
	//
	// WARNING: the issuer's revocation (POST /token/revoke, DELETE
	// /subjects/{sub}/tokens) is then NOT SEEN: a revoked token, or every
	// token of a subject whose tokens were all revoked, is accepted until its
	// own exp, up to the issuer's maximum token lifetime (24 h by default).
	// Choose it only for tokens with short lifetimes, or where accepting a
	// revoked token that long is acceptable.
	Skip
	// Follow follows the issuer's revocation feed (GET
	// {IssuerURL}/revocations/events, as FeedClientID, a client with
	// revocation_feed) and decides from what it holds in memory, with no
	// call per token: a token revoked at the issuer is refused here within
	// about a heartbeat (25 ms) and a round trip. The feed's every event and
	// heartbeat is verified with the JWKS. While the followed state is not
	// fresh (no heartbeat for FeedThreshold: the issuer or the feed is
	// down, or the issuer's own state is stale), or when it cannot tell
	// (a token issued within Leeway of a subject's or client's revocation,
	// or before the log's horizon), WhenStale decides: FailClosed (the
	// default: ErrUnavailable, 503) or FallbackRemote. See Start and Close.
	Follow
)

// WhenStale says what RevocationCheck Follow does with a token the followed
// state cannot decide: it is not fresh, or the token is too close to a
// revocation of its subject or client to tell.
type WhenStale int

const (
	// FailClosed refuses the token with ErrUnavailable (the middleware's
	// 503 with Retry-After). It is the zero value.
	FailClosed WhenStale = iota
	// FallbackRemote asks the issuer (GET /token/validate), as Check does,
	// through the cache when CacheTTL is set.
	FallbackRemote
)

// Options configures a Validator. Zero values mean the documented defaults;
// only IssuerURL is required.
type Options struct {
	// IssuerURL is the issuer's base URL as this service reaches it, such as
	// "http://issuer:8080". Required; http or https, no query. A trailing
	// slash makes no difference.
	IssuerURL string

	// Mode is Remote (zero) or Local.
	Mode Mode

	// RevocationCheck applies to Local mode: Check (zero), Skip or Follow.
	// Read Skip before choosing it.
	RevocationCheck RevocationCheck

	// FeedClientID and FeedClientSecret authenticate the Validator to the
	// revocation feed (Follow): a client of the issuer with
	// "revocation_feed": true in its clients file. Required with Follow.
	// The stream is one long request: an HTTPClient with a Timeout of its
	// own ends it every Timeout (it reconnects, resuming); leave it zero.
	FeedClientID, FeedClientSecret string

	// FeedThreshold is how long after a heartbeat was signed, less the age
	// of the issuer's state it reports, the followed state counts as fresh.
	// Zero means DefaultFeedThreshold. It bounds how long a revocation may
	// go unseen here: a heartbeat comes every 25 ms while the issuer is
	// fresh, and the issuer's state may be up to 100 ms old. The time a
	// heartbeat was signed is read on this clock by the stream's first JWT,
	// which the issuer signs with this connection's nonce after the request
	// arrived: network time, and a proxy that holds the stream back, count
	// against the threshold, never on top of it.
	FeedThreshold time.Duration

	// FeedRetention is how long Follow keeps a subject's or a client's
	// revocation in memory: past it and Leeway, it lets the revocation go,
	// so that the memory the state takes stays bounded. Zero means
	// DefaultFeedRetention. A token issued before a revocation let go (plus
	// Leeway) is then one the state cannot decide (WhenStale), never live:
	// set it to the issuer's SNOWTOKEN_MAX_TOKEN_TTL or more, so that only
	// expired tokens are such.
	FeedRetention time.Duration

	// MaxClockSkew is how far this clock may be from the issuer's: a
	// heartbeat, stream JWT or snapshot signed more than FeedThreshold +
	// MaxClockSkew ago, or more than MaxClockSkew ahead, by this clock, is
	// ignored (a recording, or a clock out of step). Zero means Leeway.
	MaxClockSkew time.Duration

	// WhenStale is what Follow does with a token the feed cannot decide:
	// FailClosed (zero) or FallbackRemote.
	WhenStale WhenStale

	// Issuer is the iss a token must carry: the issuer's SNOWTOKEN_ISSUER.
	// Empty means IssuerURL in Local mode; in Remote mode it means no check
	// here (the issuer accepts only its own iss). Like IssuerURL it is taken
	// in its canonical form (jwtpolicy.Issuer: no trailing slash, scheme and
	// host in lower case), the form the issuer signs, so either spelling
	// matches.
	Issuer string

	// Audience, if set, names this service: it must be one of the token's aud
	// values, in both modes. Local mode checks it itself; Remote mode sends it
	// (GET /token/validate?audience=...) for the issuer to check, and checks
	// the answer's aud too. A token for another audience is ErrInvalidToken,
	// "audience mismatch". Empty means no check.
	Audience string

	// Leeway allows for clock skew on exp and iat in Local mode. Zero means
	// DefaultLeeway; NoLeeway means none; any other negative is an error.
	Leeway time.Duration

	// Timeout bounds each call to the issuer. Zero means DefaultTimeout.
	Timeout time.Duration

	// CacheTTL is how long an answer of the issuer is reused, keyed by the
	// SHA-256 of the token. Zero (the default) means no cache: revocation
	// takes effect at once. Above zero, a revoked token may be accepted for at
	// most CacheTTL after its revocation, and never past its exp; rejections
	// are kept for at most CacheTTL; failures are never kept.
	CacheTTL time.Duration

	// CacheSize bounds the cache's entries. Zero means DefaultCacheSize.
	CacheSize int

	// JWKSMaxAge is how old the keys of Local mode may grow before they are
	// fetched again. Zero means the max-age of the issuer's answer
	// (Cache-Control; the issuer says 5 min), at least JWKSMinInterval and
	// at most DefaultJWKSMaxAge, or DefaultJWKSMaxAge if it says none. When
	// a fetch fails the keys already known stay in use.
	JWKSMaxAge time.Duration

	// JWKSMinInterval is the least time between two JWKS fetches, so a flood
	// of tokens with unknown kids costs the issuer at most one fetch per
	// interval. Zero means DefaultJWKSMinInterval. A key is therefore best
	// published in the JWKS (as a verify-only key of the issuer's key set)
	// before it starts signing; otherwise a token signed by it may be refused
	// for up to this long after a fetch.
	JWKSMinInterval time.Duration

	// IDLayout is the layout of the Snowflake IDs in jti, used to find the
	// issuing worker in Local mode with Skip (otherwise the issuer says which).
	// Nil means bitsalloc.Default() (41/10/12).
	IDLayout *bitsalloc.BitsAllocator

	// DPoP configures DPoP-bound tokens (RFC 9449): set DPoP.PublicURL to
	// accept them. The zero value refuses every DPoP-bound token.
	DPoP DPoP

	// Realm names the protection space in WWW-Authenticate challenges. Empty
	// means DefaultRealm.
	Realm string

	// HTTPClient calls the issuer. Nil means a client of its own that does not
	// follow redirects. Timeout applies either way.
	HTTPClient *http.Client

	// Logger receives failures to reach the issuer; never a token. Nil means
	// slog.Default().
	Logger *slog.Logger

	// Now reads the clock. Nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
}
