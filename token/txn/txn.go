// Package txn mints Transaction Tokens (Txn-Tokens, draft-ietf-oauth-transaction-tokens-10)
// from a verified access token: one place that says what a Txn-Token the
// issuer signs holds (Claims, a pure function), signs it (Minter.Mint) and
// the rule a replacement Txn-Token must follow (Narrow). The wire format,
// its claims and how they are verified are package client/txntoken's,
// shared with the services that verify them.
//
// What a minted token says:
//
//	typ     txntoken+jwt (header), alg EdDSA, kid of the issuer's current key
//	iss     the issuer
//	aud     the trust domain (Options.TrustDomain: SNOWTOKEN_TXN_TRUST_DOMAIN)
//	txn     a Snowflake ID of the issuer's generator, in decimal
//	sub     the access token's subject
//	scope   the requested scopes the access token holds (all of its scopes
//	        when none are requested): never wider than the access token
//	req_wl  the workload that asked (Request.Workload)
//	iat     now; exp: now + Options.TTL, never past the access token's exp
//	tctx    {client_id, act?}: the access token's client and actor
//	rctx    {req_ip?, transport?, method?, path?}: what a trusted gateway told
//
// A Txn-Token is not a session: it has no Redis record and no revocation
// entry, and revoking the access token it came from does not end it (no
// parents, no cascade). That is by design (draft §Txn-Token Lifetime): it
// lives for seconds (Options.TTL, at most MaxTTL), and minting one costs
// an Ed25519 signature and no Redis command, so that the gateway can mint
// one on every validation it already makes.
package txn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Defaults and bounds of Options.TTL.
const (
	DefaultTTL = 60 * time.Second
	MinTTL     = time.Second
	MaxTTL     = 5 * time.Minute
)

// Errors of this package, wrapped with detail; match them with errors.Is.
var (
	ErrOptions = errors.New("txn: bad options")
	// ErrScope: the Txn-Token would hold no scope (none of the requested
	// scopes is the access token's, or it has none), or a replacement's
	// scope would grow.
	ErrScope = errors.New("txn: scope")
	// ErrReplacement: a replacement that changes what must stay (txn, sub,
	// aud, tctx), lives longer than its original, or replaces an expired one.
	ErrReplacement = errors.New("txn: not a narrowing of the Txn-Token it replaces")
	// ErrExpired: the access token has expired.
	ErrExpired = errors.New("txn: the access token has expired")
)

// Source is what a Txn-Token is made from: a verified access token
// (*token.Verified is one).
type Source interface {
	Issuer() string
	Subject() string
	ClientID() string
	Scopes() []string
	ExpiresAt() time.Time
}

// Request is what the caller adds to a Txn-Token: who asks, for what, and
// the context it vouches for.
type Request struct {
	// Scopes are the scopes asked for: the Txn-Token holds those of them
	// the access token holds. None means all of the access token's.
	Scopes []string
	// Workload names the requesting workload (req_wl). Required.
	Workload string
	// Actor is the access token's act claim, if any (tctx.act).
	Actor *txntoken.Actor
	// Context is the request context (rctx); nil or empty means none.
	Context *txntoken.RequestContext
}

// Params are the issuer's side of a Txn-Token: its trust domain, lifetime,
// the time and the transaction ID.
type Params struct {
	TrustDomain string
	TTL         time.Duration
	Now         time.Time
	Txn         snowflakealg.ID
}

// Claims makes the claims of a Txn-Token for src and req (see the package
// doc). It fails with ErrExpired for an access token past its exp, with
// ErrScope when the token would hold no scope, and with ErrOptions when
// req names no workload.
func Claims(src Source, req Request, p Params) (txntoken.Claims, error) {
	exp := p.Now.Add(p.TTL)
	switch {
	case req.Workload == "":
		return txntoken.Claims{}, fmt.Errorf("%w: no requesting workload", ErrOptions)
	case !p.Now.Before(src.ExpiresAt()):
		return txntoken.Claims{}, ErrExpired
	case src.ExpiresAt().Before(exp):
		exp = src.ExpiresAt()
	}
	scopes := src.Scopes()
	if len(req.Scopes) > 0 {
		held := scopes
		scopes = nil
		for _, s := range req.Scopes {
			if slices.Contains(held, s) && !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	if len(scopes) == 0 {
		return txntoken.Claims{}, fmt.Errorf("%w: none of the scopes asked for is the access token's", ErrScope)
	}
	c := txntoken.Claims{
		Issuer: src.Issuer(), IssuedAt: p.Now.Unix(), ExpiresAt: exp.Unix(),
		Audience: p.TrustDomain, Txn: strconv.FormatInt(int64(p.Txn), 10),
		Subject: src.Subject(), Scope: strings.Join(scopes, " "), Workload: req.Workload,
		Transaction: &txntoken.TransactionContext{ClientID: src.ClientID(), Actor: req.Actor},
	}
	if req.Context != nil && *req.Context != (txntoken.RequestContext{}) {
		rc := *req.Context
		c.Request = &rc
	}
	return c, nil
}

// Narrow reports whether next may replace prev (draft §Txn-Token as a
// subject_token), at now: prev not expired; txn, sub, aud and tctx
// unchanged; next's scope within prev's and not empty; next not issued
// before prev nor expiring after it. The requesting workload (req_wl) and
// rctx may differ: they are the replacement's own. A failure wraps
// ErrReplacement or ErrScope.
func Narrow(prev, next txntoken.Claims, now time.Time) error {
	switch {
	case now.Unix() >= prev.ExpiresAt:
		return fmt.Errorf("%w: the Txn-Token replaced has expired", ErrReplacement)
	case next.Txn != prev.Txn || next.Subject != prev.Subject || next.Audience != prev.Audience:
		return fmt.Errorf("%w: txn, sub and aud never change", ErrReplacement)
	case !reflect.DeepEqual(next.Transaction, prev.Transaction):
		return fmt.Errorf("%w: tctx never changes", ErrReplacement)
	case next.ExpiresAt > prev.ExpiresAt || next.IssuedAt < prev.IssuedAt:
		return fmt.Errorf("%w: a replacement expires no later than, and is issued no earlier than, the Txn-Token it replaces", ErrReplacement)
	}
	want := next.Scopes()
	if len(want) == 0 {
		return fmt.Errorf("%w: a replacement needs a scope", ErrScope)
	}
	if missing := syntax.Missing(prev.Scopes(), want); len(missing) > 0 {
		return fmt.Errorf("%w: would grow by %q", ErrScope, missing)
	}
	return nil
}

// Options configure a Minter.
type Options struct {
	// TrustDomain is every token's aud. Required: a deployment without
	// one has no Minter (Transaction Tokens off).
	TrustDomain string
	// TTL is every token's lifetime, at most the access token's remaining
	// one. Zero means DefaultTTL; otherwise MinTTL to MaxTTL.
	TTL time.Duration
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
}

// IDs issues the transaction IDs: the issuer's Snowflake generator.
type IDs interface {
	NextID(ctx context.Context) (snowflakealg.ID, error)
}

// Signer signs a payload as a JWT of type typ with the issuer's current
// key: token.Service.SignEventPayload.
type Signer interface {
	SignEventPayload(typ string, payload ...[]byte) ([]byte, error)
}

// Minter mints Txn-Tokens. It is safe for concurrent use.
type Minter struct {
	opts Options
	ids  IDs
}

// New returns a Minter of opts that takes its transaction IDs from ids.
func New(opts Options, ids IDs) (*Minter, error) {
	switch {
	case syntax.CheckAudience(opts.TrustDomain) != nil:
		return nil, fmt.Errorf("%w: TrustDomain %.64q: want 1 to 256 printable ASCII bytes, no space, quote or backslash", ErrOptions, opts.TrustDomain)
	case opts.TTL == 0:
		opts.TTL = DefaultTTL
	case opts.TTL < MinTTL || opts.TTL > MaxTTL:
		return nil, fmt.Errorf("%w: TTL %v: want %v to %v", ErrOptions, opts.TTL, MinTTL, MaxTTL)
	}
	if ids == nil {
		return nil, fmt.Errorf("%w: no ID generator", ErrOptions)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Minter{opts: opts, ids: ids}, nil
}

// TrustDomain is the aud of the tokens m mints.
func (m *Minter) TrustDomain() string { return m.opts.TrustDomain }

// Replace makes a replacement of prev, a Txn-Token this issuer signed and
// the caller verified, for the requesting workload workload, and returns
// it signed by s (draft §Txn-Token as a subject_token): the same txn, sub,
// aud, tctx and rctx; scope the scopes asked for (none: prev's), which must
// be prev's or fewer; issued now, expiring after TTL but never after prev.
// A replacement that would not narrow (Narrow) wraps ErrReplacement or
// ErrScope.
func (m *Minter) Replace(s Signer, prev txntoken.Claims, scopes []string, workload string) (string, txntoken.Claims, error) {
	if workload == "" {
		return "", txntoken.Claims{}, fmt.Errorf("%w: no requesting workload", ErrOptions)
	}
	now := m.opts.Now()
	next := prev
	next.IssuedAt, next.ExpiresAt, next.Workload = now.Unix(), min(prev.ExpiresAt, now.Add(m.opts.TTL).Unix()), workload
	if len(scopes) > 0 {
		next.Scope = strings.Join(scopes, " ")
	}
	if err := Narrow(prev, next, now); err != nil {
		return "", txntoken.Claims{}, err
	}
	raw, err := sign(s, next)
	return raw, next, err
}

// sign returns c signed by s as a Txn-Token: one Ed25519 signature.
func sign(s Signer, c txntoken.Claims) (string, error) {
	payload, err := c.MarshalJSON()
	if err != nil {
		return "", err
	}
	raw, err := s.SignEventPayload(txntoken.Type, base64.RawURLEncoding.AppendEncode(nil, payload))
	if err != nil {
		return "", err
	}
	return string(raw), nil
}

// Mint makes the claims of a Txn-Token for src and req (Claims), with a new
// transaction ID, and returns them signed by s: one Ed25519 signature, no
// Redis command. An ID the generator cannot give is its error.
func (m *Minter) Mint(ctx context.Context, s Signer, src Source, req Request) (string, txntoken.Claims, error) {
	id, err := m.ids.NextID(ctx)
	if err != nil {
		return "", txntoken.Claims{}, err
	}
	c, err := Claims(src, req, Params{TrustDomain: m.opts.TrustDomain, TTL: m.opts.TTL, Now: m.opts.Now(), Txn: id})
	if err != nil {
		return "", txntoken.Claims{}, err
	}
	raw, err := sign(s, c)
	if err != nil {
		return "", txntoken.Claims{}, err
	}
	return raw, c, nil
}
