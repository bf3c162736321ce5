package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

// DPoP (RFC 9449) at the two routes a proof is sent to:
//
//	POST /token           a proof of the token endpoint's URL binds the token
//	                      issued to its key (cnf.jkt; token_type DPoP)
//	GET /token/validate   a bound token counts only with Authorization: DPoP
//	                      and a proof by its key, of the request it came with:
//	                      the original request a DPoP forwarder names
//	                      (resourceRequest), else this one
//
// The proof's checks are package client/dpop's; its replay record is
// Options.DPoP.Replay, which every replica must share (redisstore.Proofs).

// proofHeader returns the DPoP header of a request's headers h, and
// whether it has one; more than one is refused (RFC 9449 §4.3, step 1).
func proofHeader(h http.Header) (string, bool, error) {
	vs := h.Values("DPoP")
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	}
	return "", false, refusal.New(ErrDPoPProof, "the request has %d DPoP headers: send one DPoP proof", len(vs))
}

// checkProof checks proof, sent with a request of method to url that
// presents accessToken (none at the token endpoint), and returns it once
// accepted and recorded against replay: verifyProof, then recordProof.
// The answer's headers are h (a fresh nonce's DPoP-Nonce).
func (s *Server) checkProof(ctx context.Context, h http.Header, st *set, proof, method, url, accessToken string) (*dpop.Proof, error) {
	p, err := s.verifyProof(h, st, proof, method, url, accessToken)
	if err != nil {
		return nil, err
	}
	if err := s.recordProof(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// verifyProof makes every check of a proof but the replay check (it
// records nothing). A refusal is ErrDPoPProof, or ErrDPoPNonce with a
// fresh DPoP-Nonce header set in h, the answer's headers, made with st's
// nonces.
func (s *Server) verifyProof(h http.Header, st *set, proof, method, url, accessToken string) (*dpop.Proof, error) {
	now := s.now()
	p, err := s.dpop.Verify(proof, dpop.Request{Method: method, URL: url, AccessToken: accessToken}, now)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, dpop.ErrRequest): // the forwarded URL, a gateway's
		return nil, refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidRequest, err),
			"X-Forwarded-Proto, -Host and -Uri do not make an absolute http(s) URL a DPoP proof can name")
	case errors.Is(err, dpop.ErrUseNonce):
		h.Set("DPoP-Nonce", st.nonces.give(now))
		return nil, fmt.Errorf("%w: %w", ErrDPoPNonce, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrDPoPProof, err)
}

// recordProof records p, which verifyProof accepted, against replay, in
// the record every replica shares: a proof seen before is ErrDPoPProof; a
// record that does not answer is token.ErrUnavailable (redisstore's), never
// a pass.
func (s *Server) recordProof(ctx context.Context, p *dpop.Proof) error {
	err := s.dpop.Record(ctx, p, s.now())
	if err == nil || errors.Is(err, dpop.ErrReplayRecord) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDPoPProof, err)
}

// tokenURL is the URL a proof sent to the token endpoint names: the
// endpoint under the public URL (Options.BaseURL), never one made of the
// request's Host, which the client chooses.
func (s *Server) tokenURL() string { return s.opts.BaseURL + "/token" }

// resourceRequest returns the method and URL of the request a proof sent to
// GET /token/validate must be for. From a DPoP forwarder (Options.
// DPoPForwarders) that names it in the forwarded headers
// (dpop.HeaderForwardedMethod, -Proto, -Host and -URI), it is the
// original request; from anyone else, or without them, it is this request
// under the public URL (Options.BaseURL), so that a service may call the
// route itself. The forwarded headers of a caller that is not a forwarder
// are ignored: a client must not choose what its proof is checked against.
func (s *Server) resourceRequest(c *gin.Context) (method, url string, err error) {
	h := c.Request.Header
	if _, forwarded := h[dpop.HeaderForwardedMethod]; !forwarded || !s.fromForwarder(c) {
		return c.Request.Method, s.opts.BaseURL + c.Request.URL.Path, nil
	}
	var v [4]string
	for i, name := range forwardedNames {
		vs := h.Values(name)
		if len(vs) != 1 || vs[0] == "" {
			return "", "", refusal.New(token.ErrInvalidRequest, "a forwarded request needs exactly one %s", name)
		}
		v[i] = vs[0]
	}
	return originalRequest(v, forwardedNames)
}

// forwardedNames are the headers a DPoP forwarder names the original
// request in, in originalRequest's order.
var forwardedNames = [4]string{dpop.HeaderForwardedMethod, dpop.HeaderForwardedProto, dpop.HeaderForwardedHost, dpop.HeaderForwardedURI}

// originalRequest is the method and absolute URL of the request a gateway
// names, as method, scheme, host and path (v, in that order; names are
// where each came from, for the refusal): the one rule for a forwarder's
// X-Forwarded-* headers and for an ext_authz CheckRequest's attributes
// (Authorize). A method that is not an HTTP token, a scheme other than
// http and https, or a host and path that do not make an absolute URL
// are the request's invalid_request.
func originalRequest(v, names [4]string) (method, url string, err error) {
	method, proto, host, uri := v[0], strings.ToLower(v[1]), v[2], v[3]
	switch {
	case !isToken(method):
		return "", "", refusal.New(token.ErrInvalidRequest, "%s %.32q is not a method", names[0], method)
	case proto != "http" && proto != "https":
		return "", "", refusal.New(token.ErrInvalidRequest, "%s %.32q is not http or https", names[1], proto)
	case host == "" || strings.ContainsAny(host, "/?#@ ") || !strings.HasPrefix(uri, "/"):
		return "", "", refusal.New(token.ErrInvalidRequest, "%s and %s must be a host and an absolute path", names[2], names[3])
	}
	return method, proto + "://" + host + uri, nil
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), as a
// method is.
func isToken(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// fromForwarder reports whether the TCP peer is one of
// Options.DPoPForwarders.
func (s *Server) fromForwarder(c *gin.Context) bool {
	ap, err := netip.ParseAddrPort(c.Request.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range s.forwarders {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// parsePrefixes reads the option name's list as gin reads TrustedProxies:
// addresses and CIDRs.
func parsePrefixes(name string, list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("handlers: %s: %q is neither an address nor a CIDR", name, s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// proofKey checks the DPoP proof of a request that presents raw, a
// DPoP-bound token, with the DPoP scheme, and returns the RFC 7638
// thumbprint of its key, for token.Service.Verdict to bind the token to
// (token.Request.Proof): the proof must be of the request it came with,
// or of the original request a DPoP forwarder names (resourceRequest),
// and is recorded against replay. No DPoP header is an empty thumbprint,
// which the verdict refuses.
func (s *Server) proofKey(c *gin.Context, st *set, raw string) (string, error) {
	proof, ok, err := proofHeader(c.Request.Header)
	if err != nil || !ok {
		return "", err
	}
	method, url, err := s.resourceRequest(c)
	if err != nil {
		return "", err
	}
	p, err := s.checkProof(c.Request.Context(), c.Writer.Header(), st, proof, method, url, raw)
	if _, forwarded := c.Request.Header[dpop.HeaderForwardedMethod]; (errors.Is(err, dpop.ErrURL) || errors.Is(err, dpop.ErrMethod)) && forwarded && !s.fromForwarder(c) {
		return "", refusal.Describe(err, description(err)+"; the X-Forwarded-* headers were ignored: the caller is not in SNOWTOKEN_DPOP_FORWARDERS")
	}
	if err != nil {
		return "", err
	}
	return p.Thumbprint, nil
}

// dpopChallenge is the WWW-Authenticate of a DPoP refusal at a resource
// (RFC 9449 §7.1): the algorithms accepted and the error code.
func (s *Server) dpopChallenge(code string) string {
	return `DPoP realm="` + realm + `", algs="` + strings.Join(s.dpop.Algorithms(), " ") + `", error="` + code + `"`
}
