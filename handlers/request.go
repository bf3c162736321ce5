package handlers

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// MaxQueryLen bounds the query of every route (GET /token/validate's is the
// one read): room for a ?scope= of token.MaxScopeLen bytes, every byte
// percent-encoded.
const MaxQueryLen = 8192

// query returns the request's query parameters, parsed strictly: at most
// MaxQueryLen bytes, and url.ParseQuery's error (a pair with a ';' or a bad
// '%' escape) is the request's invalid_request. gin's c.Query and
// url.URL.Query skip such a pair without a word, so that
// ?scope=orders:write; asked for no scope at all: no handler reads its
// query but through query. Without a query it is nil, at no cost.
func query(c *gin.Context) (url.Values, error) {
	raw := c.Request.URL.RawQuery
	if raw == "" {
		return nil, nil
	}
	if len(raw) > MaxQueryLen {
		return nil, refusal.New(token.ErrInvalidRequest, "query longer than %d bytes", MaxQueryLen)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, refusal.Describe(fmt.Errorf("%w: query: %w", token.ErrInvalidRequest, err),
			"the query is not well-formed: a pair with ';' or a malformed '%' escape")
	}
	return q, nil
}

// noQuery is a request's Form while form parses its body, when it has no
// query: ParseForm leaves a Form that is set alone.
var noQuery = url.Values{}

// form parses a POST body as application/x-www-form-urlencoded, bounded in
// size, and rejects repeated parameters (RFC 6749 §3.2) other than resource
// and audience, which RFC 8707 §2 and RFC 8693 §2.1 let a client repeat.
func (s *Server) form(c *gin.Context) (url.Values, error) {
	req := c.Request
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		return nil, refusal.New(token.ErrInvalidRequest, "content type must be application/x-www-form-urlencoded")
	}
	req.Body = http.MaxBytesReader(c.Writer, req.Body, s.opts.MaxBodyBytes)
	if req.URL.RawQuery == "" {
		// ParseForm would make Form a copy of PostForm (a map, a slice a
		// parameter) and parse the empty query into a map of its own: 4
		// allocations of a client_credentials issue's 81, 6 of an
		// exchange's 131 (BenchmarkExchange). Nothing reads Form; it is
		// PostForm itself instead.
		req.Form = noQuery
		defer func() { req.Form = req.PostForm }()
	}
	if err := req.ParseForm(); err != nil {
		desc := "the body is not a well-formed form"
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			desc = fmt.Sprintf("the body is larger than %d bytes", s.opts.MaxBodyBytes)
		}
		return nil, refusal.Describe(fmt.Errorf("%w: body: %w", token.ErrInvalidRequest, err), desc)
	}
	if len(req.URL.RawQuery) > 0 {
		return nil, refusal.New(token.ErrInvalidRequest, "parameters belong in the body, not the URL")
	}
	for k, v := range req.PostForm {
		if len(v) > 1 && k != "resource" && k != "audience" {
			return nil, refusal.New(token.ErrInvalidRequest, "parameter %.32q repeated", k)
		}
	}
	return req.PostForm, nil
}

// formClient finds the client, in the clients of st, by HTTP Basic (RFC 6749 §2.3.1: id and secret
// form-urlencoded, then base64), by client_id and client_secret in the form,
// or by a client assertion (client_assertion_type and client_assertion, RFC
// 7521 §4.2, RFC 7523 §2.2; see assertedClient); using two is an error. A
// client whose token_endpoint_auth_method names one secret method may use
// only that one.
func (s *Server) formClient(c *gin.Context, st *set, form url.Values) (*clients.Client, error) {
	h, err := authorization(c)
	if err != nil {
		return nil, err
	}
	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if form.Has("client_assertion") || form.Has("client_assertion_type") {
		if h != "" || formSecret != "" {
			return nil, refusal.New(token.ErrInvalidRequest, "use one client authentication method")
		}
		return s.assertedClient(c, st, formID, form.Get("client_assertion_type"), form.Get("client_assertion"))
	}
	if h != "" {
		if formSecret != "" {
			return nil, refusal.New(token.ErrInvalidRequest, "use one client authentication method")
		}
		id, secret, err := parseBasic(h)
		if err != nil {
			return nil, err
		}
		if formID != "" && formID != id {
			return nil, refusal.New(token.ErrInvalidRequest, "client_id does not match the Authorization header")
		}
		return s.authenticateClient(c, st, id, secret, clients.AuthSecretBasic)
	}
	if formID == "" || formSecret == "" {
		return nil, refusal.New(token.ErrInvalidClient, "no client credentials")
	}
	return s.authenticateClient(c, st, formID, formSecret, clients.AuthSecretPost)
}

// assertedClient authenticates a client by its assertion (package
// clientauth): the client of client_id, or without it the assertion's sub
// (a private_key_jwt assertion's iss and sub are its client ID; a workload
// identity token's are not, so its client must send client_id). A
// malformed request is invalid_request; every refusal of the assertion is
// invalid_client, counted by the failed-authentication limit as a wrong
// secret is; the replay record failing is token.ErrUnavailable (503); a
// key set that cannot be fetched is clientauth.ErrFetch (503 too, counted
// and logged as the client's key server's failure: clientKeysUnavailable).
func (s *Server) assertedClient(c *gin.Context, st *set, formID, typ, assertion string) (*clients.Client, error) {
	switch {
	case typ == "" || assertion == "":
		return nil, refusal.New(token.ErrInvalidRequest, "client_assertion and client_assertion_type go together")
	case typ != clientauth.AssertionType:
		return nil, refusal.New(token.ErrInvalidClient, "client_assertion_type %.80q: want %s", typ, clientauth.AssertionType)
	}
	id, subErr := formID, error(nil)
	if id == "" {
		id, subErr = clientauth.Subject(assertion) // bounded: MaxAssertionBytes first
	}
	return s.limited(c, id, func() (*clients.Client, error) {
		if subErr != nil {
			return nil, fmt.Errorf("%w: %w", token.ErrInvalidClient, subErr)
		}
		if s.assertions == nil {
			return nil, refusal.New(token.ErrInvalidClient, "this server does not accept client assertions")
		}
		client, reg, err := st.clients.AssertionClient(id)
		switch {
		case err != nil:
			return nil, err
		case reg.Workload != nil && formID == "":
			return nil, refusal.New(token.ErrInvalidClient, "client_id is required with a workload identity token")
		}
		if err := s.assertions.Verify(c.Request.Context(), reg, assertion); err != nil {
			if errors.Is(err, clientauth.ErrFetch) {
				s.clientKeysUnavailable(id, err)
			}
			return nil, assertionError(err)
		}
		return client, nil
	})
}

// assertionError is how the handlers answer clientauth's err: the replay
// record's failure is the service's (token.ErrUnavailable: 503, counted as
// Redis unavailable), a key set that cannot be fetched the client's key
// server's (clientauth.ErrFetch, its own row of answers: 503 with
// Retry-After), neither counted against the failed-authentication limit
// (a key server down is no one's guess at a credential, and must not push
// the other clients of the network into 429); the rest are the client's
// (invalid_client) with clientauth's own text.
func assertionError(err error) error {
	switch {
	case errors.Is(err, clientauth.ErrFetch):
		return err
	case errors.Is(err, clientauth.ErrUnavailable):
		return fmt.Errorf("%w: %w", token.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", token.ErrInvalidClient, err)
}

// clientKeysUnavailable counts and logs an assertion of client id refused
// because its key set could not be fetched: its own signal
// (snowtoken_client_keys_unavailable_total, a warning "client keys
// unavailable" that internal/logsum summarises per key server), never
// Redis's, which anyone could otherwise raise while some client's key
// server is down.
func (s *Server) clientKeysUnavailable(id string, err error) {
	s.metrics.clientKeys.WithLabelValues(id).Inc()
	s.log.Warn("client keys unavailable", "client_id", id, "err", err)
}

// tokenParam reads the token parameter of introspection and revocation
// from their form.
func tokenParam(form url.Values) (string, error) {
	raw := form.Get("token")
	if raw == "" {
		return "", refusal.New(token.ErrInvalidRequest, "token is required")
	}
	// A byte outside base64url and the dots (a line break, which base64
	// decoding would skip) is a malformed parameter, not a token that
	// is "not active" or "not ours": a 400, never a 200 that revoked
	// nothing. What is merely not in a token's shape is the service's to
	// call inactive (RFC 7662 §2.2, RFC 7009 §2.2).
	if err := jwtpolicy.CheckSyntax(raw); errors.Is(err, jwtpolicy.ErrTokenBytes) {
		return "", refusal.Describe(fmt.Errorf("%w: token: %w", token.ErrInvalidRequest, err),
			"the token parameter holds a byte outside base64url and its two dots (a line break, a space, padding)")
	}
	return raw, nil
}

// basicClient authenticates the client of a request without a body: HTTP
// Basic only, for every client with a secret (there is no form to send it
// in, nor an assertion).
func (s *Server) basicClient(c *gin.Context, st *set) (*clients.Client, error) {
	id, secret, err := basicCredentials(c)
	if err != nil {
		return nil, err
	}
	return s.authenticateClient(c, st, id, secret, "")
}

// authorization is the request's one Authorization header, "" for none
// (jwtpolicy.Authorization, the rule of every route and of the client
// module alike): several are a malformed request, 400 invalid_request,
// whichever comes first.
func authorization(c *gin.Context) (string, error) {
	h, err := jwtpolicy.Authorization(c.Request.Header)
	if err != nil {
		return "", fmt.Errorf("%w: %w", token.ErrInvalidRequest, err)
	}
	return h, nil
}

// basicCredentials are the id and secret of the request's HTTP Basic
// Authorization header (parseBasic).
func basicCredentials(c *gin.Context) (id, secret string, err error) {
	h, err := authorization(c)
	if err != nil {
		return "", "", err
	}
	return parseBasic(h)
}

func parseBasic(h string) (id, secret string, err error) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", refusal.New(token.ErrInvalidClient, "Authorization must be Basic")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", refusal.New(token.ErrInvalidClient, "malformed Basic credentials")
	}
	encID, encSecret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", refusal.New(token.ErrInvalidClient, "malformed Basic credentials")
	}
	if id, err = url.QueryUnescape(encID); err != nil {
		return "", "", refusal.New(token.ErrInvalidClient, "malformed Basic credentials")
	}
	if secret, err = url.QueryUnescape(encSecret); err != nil {
		return "", "", refusal.New(token.ErrInvalidClient, "malformed Basic credentials")
	}
	return id, secret, nil
}
