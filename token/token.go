// Package token turns Snowflake IDs into session tokens and checks them.
//
// A token is a JWT, or, for a client whose token_format is "opaque", an
// opaque token (see opaque.go): "st_" and the base64url of the 8-byte ID and
// 16 random bytes, whose claims live in its Redis record only.
//
// A JWT is (RFC 9068 access token: typ "at+jwt") signed with Ed25519
// (alg "EdDSA"), whose kid is the RFC 7638 thumbprint of the key and whose jti
// is the Snowflake ID in decimal:
//
//	header  {"alg":"EdDSA","kid":"<thumbprint>","typ":"at+jwt"}
//	claims  {"iss","sub","aud"?,"client_id","scope","iat","exp","jti":"<snowflake id>","act"?,"parents"?}
//
// The aud is what the client asked for with resource (RFC 8707) or audience,
// or else its default: the first of its audiences, or Options.Audience for a
// client that lists none; a token has no aud only when neither exists. A
// token stays good only while its aud is one its client could get today
// (Service.Verdict).
//
// The ID alone is predictable (time, worker, counter) and never a credential:
// a token counts only when its signature and claims check out AND its session
// record is in the session store (Store). The record is what makes
// revocation immediate: a subject's tokens share a marker that its
// revocation replaces, a client's tokens a revocation time, and every
// revocation is appended to the revocation log, which validators follow
// (Options.Revocations, package revlog) to decide from memory. The domain
// declares what it needs of the store (Store) in its own terms (a JWT's
// SessionRef, an opaque token's jti and OpaqueRecord, a Session), and
// decides on what the store holds (SessionLive, SessionCreated); package
// redisstore keeps it in Redis, and its package doc draws the keys, the
// opaque record's bytes, the marker's lifecycle, the revocation log and
// what happens when a key disappears. A verified token keeps the store's
// SessionHandle, which the domain never reads, so that a validation that
// reads its session builds no key.
//
// Whether a token is good for a request is answered by one call,
// Service.Verdict (verdict.go), in this order:
//
//	signature and claims ─ session (the log, else Redis) ─ client's standing
//	  ─ DPoP binding (jwtpolicy.CheckBinding) ─ audience ─ scopes
//
// Its steps are unexported: no caller can stop after the first and accept
// a disabled client's token. What it returns (Verified, verified.go) is
// shared through the cache and read through accessors only.
//
// An exchanged token (RFC 8693) is revoked with any of its parents, each
// judged as a token of its own, from the log and from Redis alike
// (parents.go, the cascade).
//
// Verifying an Ed25519 signature costs ~60 µs, so Verdict remembers JWTs it
// has verified, keyed by the SHA-256 of the token, until they expire (with
// Options.Revocations, opaque tokens too, with their claims). The cache
// only skips repeating the signature and claims check of a byte-for-byte
// identical token, and remembers the log's mark at its last Redis check;
// without Options.Revocations the Redis record is checked on every call,
// and with it whenever the log cannot tell.
//
// A token may also be exchanged for a narrower one of the same subject
// (RFC 8693, Service.Exchange, exchange.go): its act names who acts for
// the subject, its parents the tokens it derives from (chain.go writes
// both, into the JWT or the opaque record); Issue and Exchange mint
// alike (mint.go).
//
// Beside the domain, in rooms of their own below it: the clients registry
// and its file (package clients: who may ask, how a client proves it is
// one), the signing keys and their directory (package keyset), and the
// syntax of names, scopes and audiences (package syntax). The Service
// takes the registry wherever a client's standing decides, and signs and
// verifies with a key set (NewService, WithKeys).
package token

import (
	"errors"
	"time"

	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Errors returned by this package. The HTTP layer maps each to its OAuth2 /
// RFC 6750 error; details are wrapped with %w.
var (
	ErrKey               = keyset.ErrKey
	ErrInvalidClient     = clients.ErrInvalidClient
	ErrInvalidRequest    = errors.New("token: invalid request")
	ErrInvalidScope      = syntax.ErrInvalidScope
	ErrInvalidTarget     = syntax.ErrInvalidTarget
	ErrInvalidToken      = errors.New("token: invalid token")
	ErrRevoked           = errors.New("token: revoked")
	ErrInsufficientScope = errors.New("token: insufficient scope")
	ErrForbidden         = errors.New("token: not allowed for this client")
	// ErrUnauthorizedClient: the client may not use this grant as it asks
	// (RFC 6749 §5.2 unauthorized_client): an exchange by a client not
	// opted in to it, or without an actor where it may not impersonate.
	ErrUnauthorizedClient = errors.New("token: the client is not authorized for this grant")
	ErrUnavailable        = errors.New("token: temporarily unavailable")
	// ErrClientRevoking comes with ErrUnavailable from Issue for a client
	// whose tokens were revoked moments ago: a token issued now would be
	// covered by the revocation (see RevokeClient), so none is; the error
	// says when one will not be (RetryAfter).
	ErrClientRevoking = errors.New("token: the client's tokens were revoked moments ago")
	// ErrKeysUndecided comes with ErrUnavailable from Revoke for a token
	// whose kid this replica does not hold while it cannot tell whether
	// the kid is one of ours: its key set is not known to be current
	// (keyset.Set.Current), or the token is recent enough for its key to be
	// still on its way here.
	ErrKeysUndecided = errors.New("token: the token's key is not known here and may yet be loaded")
	// ErrDPoPRequired: a client whose tokens are all DPoP-bound
	// (Client.DPoPBoundAccessTokens) asked for one without a DPoP proof.
	ErrDPoPRequired = errors.New("token: this client's tokens are DPoP-bound; send a DPoP proof")
	// ErrDPoPProof: a DPoP proof missing where a token needs one, or
	// refused (by its checks, package client/dpop, or as made by another
	// key than the token's); ErrDPoPBound: a DPoP-bound token presented
	// as Bearer (Verdict).
	ErrDPoPProof   = errors.New("token: invalid DPoP proof")
	ErrDPoPBound   = errors.New("token: DPoP-bound token presented as Bearer")
	ErrDuplicateID = errors.New("token: session for this id already exists")
	ErrMarkerLost  = errors.New("token: the subject's revocation marker is missing")
	ErrOptions     = errors.New("token: bad options")
	// ErrUnreadableRecord: a Store holds an opaque token's record that it
	// cannot read (another layout version, written by hand): the token is
	// invalid, never misread.
	ErrUnreadableRecord = errors.New("token: unreadable opaque session record")
)

// Defaults of Options.
const (
	DefaultTTL       = time.Hour
	DefaultMaxTTL    = 24 * time.Hour
	DefaultLeeway    = 5 * time.Second
	DefaultCacheSize = 100_000
	// CacheEntryBytes bounds the heap one verified-token cache entry takes
	// with its Verified (TestVerifiedCacheMemory measures 755 bytes for a
	// JWT, 676 for an opaque token, and holds both under this bound): 75
	// MiB at DefaultCacheSize. It was 720 until the claims of an exchanged
	// token (act, may_act, parents) took Verified past a size class of the
	// allocator. An exchanged token's entry holds its parents besides
	// (parents.go), a few hundred bytes each.
	CacheEntryBytes = 790
	// MaxTokenLen bounds what Verdict reads; our tokens are about 400 bytes.
	MaxTokenLen = 4096
)

// Named values of Options where zero is the default: any other negative
// value is an error (ErrOptions).
const (
	// CacheOff, as Options.CacheSize, turns the verified-token cache off.
	CacheOff = -1
	// NoLeeway, as Options.Leeway, allows no clock skew.
	NoLeeway time.Duration = -1
)

// Limits on what a client asks for (package syntax).
const (
	MaxScopes      = syntax.MaxScopes
	MaxScopeLen    = syntax.MaxScopeLen
	MaxAudiences   = syntax.MaxAudiences
	MaxAudienceLen = syntax.MaxAudienceLen
)
