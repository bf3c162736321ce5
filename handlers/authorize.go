package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/token"
)

// Resource is a request a gateway asks about over a protocol of its own
// (package handlers/extauthz: Envoy's ext_authz), with no gin in the way:
// what GET /token/validate reads of its request, as fields.
type Resource struct {
	// Header is the original request's headers: Authorization (or the
	// DPoP scheme's) and DPoP are read, as GET /token/validate reads its
	// own.
	Header http.Header
	// Method, Scheme, Host and Path are the original request's, which a
	// DPoP proof must be of (htm, htu): the rule of a forwarder's
	// X-Forwarded-* headers (originalRequest). Read only for a DPoP proof.
	Method, Scheme, Host, Path string
	// Audience and Scope are what ?audience= and ?scope= would require:
	// token.Request's.
	Audience []string
	Scope    string
	// TxnToken asks for a Transaction Token on success, as ?txn_token=1
	// does (mintTxn), in the Txn-Token header of the answer; Addr is the
	// original client's address as the gateway saw it, its rctx req_ip
	// ("" for none), and Scheme, Method and Path its transport, method and
	// path.
	TxnToken bool
	Addr     string
}

// Answer is the issuer's answer to a Resource, as GET /token/validate
// would write it: its status, headers (on a 200 the identity headers and
// Cache-Control; else the challenge, Retry-After, DPoP-Nonce) and, for a
// refusal, the OAuth2 JSON body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	// Verified is the token that passed, on a 200; Err the refusal,
	// otherwise (Outcome names it).
	Verified *token.Verified
	Err      error
}

// resourceNames name Resource's Method, Scheme, Host and Path in a
// refusal.
var resourceNames = [4]string{"the request's method", "the request's scheme", "the request's host", "the request's path"}

// Authorize answers whether r's token is good for r: the verdict
// (token.Service.Verdict) of the set in force, as GET /token/validate
// asks it, made an answer by Refusal. A proof, for a DPoP-bound token
// presented as DPoP, must be of r's original request and is recorded
// against replay. ctx bounds the Redis commands.
func (s *Server) Authorize(ctx context.Context, r Resource) Answer {
	st := s.set.Load()
	h := make(http.Header, 6)
	raw, asDPoP, err := presented(r.Header)
	if err != nil {
		return s.Refusal(h, err, r.Scope)
	}
	req := token.Request{Token: raw, Scheme: token.Bearer, Audience: r.Audience, Scope: r.Scope}
	if asDPoP {
		req.Scheme = token.DPoP
		req.Proof = func() (string, error) {
			proof, ok, err := proofHeader(r.Header)
			if err != nil || !ok {
				return "", err
			}
			method, url, err := originalRequest([4]string{r.Method, r.Scheme, r.Host, r.Path}, resourceNames)
			if err != nil {
				return "", err
			}
			p, err := s.checkProof(ctx, h, st, proof, method, url, raw)
			if err != nil {
				return "", err
			}
			return p.Thumbprint, nil
		}
	}
	v, err := st.svc.Verdict(ctx, st.clients, req)
	if err != nil {
		s.logMismatch(err)
		return s.Refusal(h, err, r.Scope)
	}
	if r.TxnToken {
		tok, err := s.mintTxn(ctx, st, v, r.Scope, &txntoken.RequestContext{IP: r.Addr, Transport: r.Scheme, Method: r.Method, Path: r.Path})
		if err != nil {
			return s.Refusal(h, err, r.Scope)
		}
		h[txntoken.Header] = []string{tok}
	}
	setIdentity(h, v)
	return Answer{Status: http.StatusOK, Header: h, Verified: v}
}

// Refusal is err's answer to a gateway's check, whose headers are h (a
// DPoP-Nonce may be there already) and which required scope: refuse's, the
// one table every front door answers by, with the body GET /token/validate
// writes.
func (s *Server) Refusal(h http.Header, err error, scope string) Answer {
	status, body := s.refuse(h, err, "ext_authz", true, func() string { return scope })
	b, _ := json.Marshal(body) // two strings: it cannot fail
	h.Set("Content-Type", "application/json; charset=utf-8")
	return Answer{Status: status, Header: h, Body: b, Err: err}
}
