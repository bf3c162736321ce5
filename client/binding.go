package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// DPoP configures how a Validator accepts DPoP-bound tokens (RFC 9449):
// tokens whose cnf.jkt binds them to a key, presented as
// Authorization: DPoP <token> with a DPoP header holding a proof signed by
// that key for this very request. Zero values mean the documented defaults;
// without PublicURL, DPoP is off and every DPoP-bound token is refused.
type DPoP struct {
	// PublicURL is this service's base URL as its clients reach it, such
	// as "https://orders.example.com": http or https, no query or fragment;
	// a trailing slash makes no difference. A proof's htu must be it
	// followed by the request's path as this service receives it (escaped,
	// without the query), so a proxy that strips a path prefix belongs in
	// it ("https://example.com/orders-api"). The request's Host and
	// X-Forwarded-* headers are never used: a client sets them. Empty (the
	// default) means DPoP is off: Authorization: DPoP is refused, and so is
	// every token with a cnf (ErrDPoPOff, ErrTokenBound).
	PublicURL string

	// Algorithms are the proof algorithms accepted, among "EdDSA" and
	// "ES256"; empty means both.
	Algorithms []string

	// MaxAge is how long after its iat a proof is accepted, and how long
	// its jti is remembered against replay; zero means dpop.DefaultMaxAge
	// (60 s). Skew is how far in the future an iat may be; zero means
	// dpop.DefaultSkew (5 s).
	MaxAge, Skew time.Duration

	// Replay records the proofs accepted, so that one is accepted once.
	// Nil means a dpop.MemoryReplay of this Validator: a proof replayed to
	// ANOTHER replica of the service within MaxAge is then accepted there.
	// To refuse that, plug in a record all replicas share (Redis SET NX PX,
	// dpop.ReplayCache's contract), in a key space of this service's own:
	// one shared with the issuer's record would make the issuer refuse, as
	// replayed, every proof this service forwards to it.
	Replay dpop.ReplayCache
}

// dpopSetup is a Validator's DPoP configuration, from Options.DPoP with a
// PublicURL.
type dpopSetup struct {
	checker *dpop.Checker
	proto   string // PublicURL's scheme, for X-Forwarded-Proto
	host    string // its host[:port], for X-Forwarded-Host
	prefix  string // its path, without a trailing slash
	algs    string // the accepted algorithms, for challenges
}

// newDPoPSetup checks d; it returns nil when DPoP is off.
func newDPoPSetup(d DPoP) (*dpopSetup, error) {
	if d.PublicURL == "" {
		return nil, nil
	}
	u, err := url.Parse(d.PublicURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: DPoP.PublicURL: %w", ErrOptions, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.User != nil, u.Opaque != "",
		u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.HasSuffix(d.PublicURL, "#"):
		return nil, fmt.Errorf("%w: DPoP.PublicURL %.100q must be an http(s) base URL such as https://orders.example.com", ErrOptions, d.PublicURL)
	}
	algs := d.Algorithms
	if len(algs) == 0 {
		algs = []string{dpop.AlgEdDSA, dpop.AlgES256}
	}
	c, err := dpop.New(dpop.Options{Algorithms: algs, MaxAge: d.MaxAge, Skew: d.Skew, Replay: d.Replay})
	if err != nil {
		return nil, fmt.Errorf("%w: DPoP: %w", ErrOptions, err)
	}
	return &dpopSetup{
		checker: c, proto: u.Scheme, host: u.Host,
		prefix: strings.TrimRight(u.EscapedPath(), "/"), algs: strings.Join(algs, " "),
	}, nil
}

// presentation is a request that presents its token with the DPoP scheme:
// its proof and what the proof must match.
type presentation struct {
	proof  string
	method string
	htu    string // PublicURL and the request's escaped path
	uri    string // PublicURL's path, the request's escaped path and query: X-Forwarded-Uri
}

// authorization reads the token of Authorization: Bearer (RFC 6750 §2.1)
// or Authorization: DPoP (RFC 9449 §7.1), the only place it is taken
// from, and reports whether it came with DPoP: jwtpolicy.Presented, the
// issuer's rule too. Several Authorization headers are ErrInvalidRequest.
func authorization(h http.Header) (raw string, isDPoP bool, err error) {
	raw, isDPoP, err = jwtpolicy.Presented(h)
	switch {
	case errors.Is(err, jwtpolicy.ErrAuthorizations):
		return "", false, refusal.New(ErrInvalidRequest, "%w", err)
	case err != nil:
		return "", false, refusal.New(ErrNoToken, "%w", err)
	}
	return raw, isDPoP, nil
}

// present reads the DPoP presentation of r: exactly one DPoP header
// (RFC 9449 §4.3, step 1), and the htu its proof must carry, built from
// PublicURL and r's path alone.
func (v *Validator) present(r *http.Request) (*presentation, error) {
	if v.dpop == nil {
		return nil, ErrDPoPOff
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 || proofs[0] == "" {
		return nil, refusal.New(ErrInvalidProof, "exactly one DPoP header is required, got %d", len(proofs))
	}
	path := v.dpop.prefix + r.URL.EscapedPath()
	uri := path
	if r.URL.RawQuery != "" {
		uri += "?" + r.URL.RawQuery
	}
	return &presentation{
		proof: proofs[0], method: r.Method, uri: uri,
		htu: v.dpop.proto + "://" + v.dpop.host + path,
	}, nil
}

// verifyProof makes every check of p's proof for the token raw but the
// replay check (dpop.Checker.Verify), on the Validator's clock; nothing is
// recorded until the token passes too (recordProof). A refused proof is
// ErrInvalidProof.
func (v *Validator) verifyProof(raw string, p *presentation) (*dpop.Proof, error) {
	proof, err := v.dpop.checker.Verify(p.proof, dpop.Request{Method: p.method, URL: p.htu, AccessToken: raw}, v.opts.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProof, err)
	}
	return proof, nil
}

// recordProof records proof against replay (dpop.Checker.Record): one
// seen before is ErrInvalidProof; a replay record that fails is
// ErrUnavailable.
func (v *Validator) recordProof(ctx context.Context, proof *dpop.Proof) error {
	err := v.dpop.checker.Record(ctx, proof, v.opts.Now())
	switch {
	case errors.Is(err, dpop.ErrReplayRecord):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrInvalidProof, err)
	}
	return nil
}

// checkBinding checks that c is bound to the key of proof, and that a
// token presented without a proof (proof nil) is bound to none:
// jwtpolicy.CheckBinding, the issuer's rule too. A bound token as Bearer
// is ErrTokenBound (RFC 9449 §7.2), a token without cnf as DPoP
// ErrInvalidToken (jwtpolicy.ErrNotBound says why), a proof of another key
// ErrInvalidProof, as the issuer answers it.
func checkBinding(c *Claims, proof *dpop.Proof) error {
	thumb := ""
	if proof != nil {
		thumb = proof.Thumbprint
	}
	err := jwtpolicy.CheckBinding(c.JKT, proof != nil, thumb)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwtpolicy.ErrBound):
		return ErrTokenBound
	case errors.Is(err, jwtpolicy.ErrProofKey):
		return refusal.New(ErrInvalidProof, "%w", err)
	}
	return refusal.New(ErrInvalidToken, "%w", err)
}

// setForwarded makes req, a call to the issuer about a DPoP request,
// present the token as the request did: Authorization: DPoP, its proof, and
// the request as the issuer must see it to check the proof's htm and htu
// (the X-Forwarded-* headers, which the issuer believes only from its DPoP
// forwarders, SNOWTOKEN_DPOP_FORWARDERS).
func (v *Validator) setForwarded(req *http.Request, raw string, p *presentation) {
	req.Header.Set("Authorization", "DPoP "+raw)
	req.Header.Set("DPoP", p.proof)
	req.Header.Set(dpop.HeaderForwardedMethod, p.method)
	req.Header.Set(dpop.HeaderForwardedProto, v.dpop.proto)
	req.Header.Set(dpop.HeaderForwardedHost, v.dpop.host)
	req.Header.Set(dpop.HeaderForwardedURI, p.uri)
}

// isNonce accepts a DPoP-Nonce value as RFC 9449 §8.1 defines it,
// 1*NQCHAR; anything else from the issuer is not echoed into a header.
func isNonce(s string) bool { return s != "" && len(s) <= 512 && notNQChar(s) < 0 }
