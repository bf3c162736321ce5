package client

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maypok86/otter/v2"
)

// maxAnswerBytes bounds what is read of an issuer's answer.
const maxAnswerBytes = 64 << 10

// validateAnswer is the issuer's 200 answer to GET /token/validate.
type validateAnswer struct {
	Active    bool     `json:"active"`
	Subject   string   `json:"sub"`
	ClientID  string   `json:"client_id"`
	Scope     string   `json:"scope"`
	Issuer    string   `json:"iss"`
	Audience  []string `json:"aud"`
	IssuedAt  int64    `json:"iat"`
	ExpiresAt int64    `json:"exp"`
	JTI       string   `json:"jti"`
	WorkerID  int64    `json:"worker_id"`
}

// oauthAnswer is the issuer's error body (RFC 6749 §5.2, RFC 6750 §3).
type oauthAnswer struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// callIssuer asks GET /token/validate about raw, requiring scopes.
func (v *Validator) callIssuer(ctx context.Context, raw string, scopes []string) (*Claims, error) {
	ctx, cancel := context.WithTimeout(ctx, v.opts.Timeout)
	defer cancel()
	u := v.validateURL
	if len(scopes) > 0 {
		u += "?" + url.Values{"scope": {strings.Join(scopes, " ")}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+raw)
	req.Header.Set("Accept", "application/json")
	resp, err := v.http.Do(req) // a *url.Error names the URL, which holds no token
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}

	switch resp.StatusCode {
	case http.StatusOK:
		return v.claimsFromAnswer(body)
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		var a oauthAnswer
		_ = json.Unmarshal(body, &a) // a body that does not parse leaves the default code
		return nil, newRejection(resp.StatusCode, a)
	default:
		err := fmt.Errorf("%w: GET /token/validate answered %d", ErrUnavailable, resp.StatusCode)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return nil, &retryError{err: err, after: time.Duration(min(s, 300)) * time.Second}
		}
		return nil, err
	}
}

// claimsFromAnswer reads a 200 answer. One that is not what the issuer
// sends is a failure of the issuer, never a pass.
func (v *Validator) claimsFromAnswer(body []byte) (*Claims, error) {
	var a validateAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("%w: unreadable answer: %w", ErrUnavailable, err)
	}
	if !a.Active {
		return nil, fmt.Errorf("%w: the issuer says the token is not active", ErrInvalidToken)
	}
	if a.Subject == "" || a.ClientID == "" || a.ExpiresAt <= 0 {
		return nil, fmt.Errorf("%w: answer lacks sub, client_id or exp", ErrUnavailable)
	}
	if v.opts.Issuer != "" && a.Issuer != v.opts.Issuer {
		return nil, fmt.Errorf("%w: iss %.100q, want %.100q", ErrInvalidToken, a.Issuer, v.opts.Issuer)
	}
	if v.opts.Audience != "" && !slices.Contains(a.Audience, v.opts.Audience) {
		return nil, fmt.Errorf("%w: aud lacks %.100q", ErrInvalidToken, v.opts.Audience)
	}
	return &Claims{
		Subject: a.Subject, ClientID: a.ClientID, Scopes: strings.Fields(a.Scope),
		Issuer: a.Issuer, Audience: a.Audience,
		IssuedAt: time.Unix(a.IssuedAt, 0), ExpiresAt: time.Unix(a.ExpiresAt, 0),
		TokenID: a.JTI, WorkerID: a.WorkerID,
	}, nil
}

// rejection is the issuer turning a token down, with its OAuth error code,
// which the middleware answers with. It wraps ErrInsufficientScope for a 403
// and ErrInvalidToken otherwise.
type rejection struct {
	code, desc string
	sentinel   error
}

func newRejection(status int, a oauthAnswer) *rejection {
	r := &rejection{code: "invalid_token", desc: a.Description, sentinel: ErrInvalidToken}
	if status == http.StatusForbidden {
		r.code, r.sentinel = "insufficient_scope", ErrInsufficientScope
	}
	if isErrorCode(a.Error) {
		r.code = a.Error
	}
	return r
}

func (r *rejection) Error() string {
	return fmt.Sprintf("%v: issuer says %s: %.200q", r.sentinel, r.code, r.desc)
}

func (r *rejection) Unwrap() error { return r.sentinel }

// isErrorCode accepts an OAuth error code such as "invalid_token"; anything
// else from the wire is not echoed into our headers.
func isErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// retryError is ErrUnavailable with the wait the issuer asked for.
type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }

func (e *retryError) Unwrap() error { return e.err }

// RetryAfter returns how long the issuer asked callers to wait.
func (e *retryError) RetryAfter() time.Duration { return e.after }

// answer is one remembered answer of the issuer: claims, or a rejection.
type answer struct {
	claims *Claims
	err    error
	until  time.Time
}

// answerCache remembers answers keyed by the SHA-256 of the token; it never
// holds a token. It is an otter cache: insert and eviction are O(1) and no
// request waits on another's eviction (the map it replaced scanned itself
// under one lock when full). Entries past their until are dropped when read,
// and are never read again, so the policy evicts them first.
type answerCache struct {
	c *otter.Cache[[sha256.Size]byte, answer]
}

func newAnswerCache(size int) *answerCache {
	return &answerCache{c: otter.Must(&otter.Options[[sha256.Size]byte, answer]{MaximumSize: size})}
}

// get returns a copy of the answer for key while it is younger than its until.
func (c *answerCache) get(key *[sha256.Size]byte, now time.Time) (*Claims, error, bool) {
	a, ok := c.c.GetIfPresent(*key)
	switch {
	case !ok:
		return nil, nil, false
	case !now.Before(a.until):
		c.c.Invalidate(*key)
		return nil, nil, false
	case a.err != nil:
		return nil, a.err, true
	default:
		return a.claims.clone(), nil, true
	}
}

func (c *answerCache) put(key *[sha256.Size]byte, a answer, now time.Time) {
	if now.Before(a.until) {
		c.c.Set(*key, a)
	}
}

// len is how many answers the cache holds, after pending maintenance.
func (c *answerCache) len() int {
	c.c.CleanUp()
	return c.c.EstimatedSize()
}

// retryAfter is how long a caller should wait after err: what the issuer
// said, else one second.
func retryAfter(err error) time.Duration {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) && r.RetryAfter() > 0 {
		return r.RetryAfter()
	}
	return time.Second
}
