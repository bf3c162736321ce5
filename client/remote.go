package client

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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
	// Confirmation is the token's cnf, for a DPoP-bound token.
	Confirmation *struct {
		JKT string `json:"jkt"`
	} `json:"cnf"`
	// Act is an exchanged token's act.
	Act *jwtpolicy.Actor `json:"act"`
}

// oauthAnswer is the issuer's error body (RFC 6749 §5.2, RFC 6750 §3).
type oauthAnswer struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// callIssuer asks GET /token/validate about raw, requiring scopes, as a
// bearer token or, with p, as the DPoP request p describes.
func (v *Validator) callIssuer(ctx context.Context, raw string, scopes []string, p *presentation) (*Claims, error) {
	ctx, cancel := context.WithTimeout(ctx, v.opts.Timeout)
	defer cancel()
	u, q := v.validateURL, url.Values{}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	if v.opts.Audience != "" {
		q.Set("audience", v.opts.Audience) // the issuer checks it too, and names a mismatch
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+raw)
	if p != nil {
		v.setForwarded(req, raw, p)
	}
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
		rej := newRejection(resp.StatusCode, a, resp.Header)
		if p == nil && rej.sentinel == ErrInvalidToken && hasDPoPChallenge(resp.Header) {
			// The issuer refuses a token sent as Bearer with a DPoP
			// challenge only when it is DPoP-bound (RFC 9449 §7.1): say so,
			// as Local mode does, and the middleware's challenge is DPoP's.
			rej.sentinel = ErrTokenBound
		}
		return nil, rej
	default:
		return nil, withRetryAfter(fmt.Errorf("%w: GET /token/validate answered %d", ErrUnavailable, resp.StatusCode), resp.Header)
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
		return nil, refusal.New(ErrInvalidToken, "the issuer says the token is not active")
	}
	if a.Subject == "" || a.ClientID == "" || a.ExpiresAt <= 0 {
		return nil, fmt.Errorf("%w: answer lacks sub, client_id or exp", ErrUnavailable)
	}
	if v.opts.Issuer != "" && a.Issuer != v.opts.Issuer {
		return nil, issuerMismatch(a.Issuer, v.opts.Issuer)
	}
	if v.opts.Audience != "" && !slices.Contains(a.Audience, v.opts.Audience) {
		return nil, audienceMismatch(a.Audience, v.opts.Audience)
	}
	var jkt string
	if a.Confirmation != nil {
		if jkt = a.Confirmation.JKT; jkt == "" {
			return nil, fmt.Errorf("%w: answer with a cnf without jkt", ErrUnavailable)
		}
	}
	return &Claims{
		Subject: a.Subject, ClientID: a.ClientID, Scopes: strings.Fields(a.Scope),
		Issuer: a.Issuer, Audience: a.Audience,
		IssuedAt: time.Unix(a.IssuedAt, 0), ExpiresAt: time.Unix(a.ExpiresAt, 0),
		JTI: a.JTI, WorkerID: a.WorkerID, JKT: jkt, Act: a.Act,
	}, nil
}

// audienceMismatch is the error for a token whose aud lacks want.
func audienceMismatch(aud []string, want string) error {
	return refusal.Describe(fmt.Errorf("%w: audience mismatch: the token is for %.100q, this service is %.100q", ErrInvalidToken, aud, want), "audience mismatch")
}

// issuerMismatch is the error for a token whose iss is not want.
func issuerMismatch(iss, want string) error {
	return refusal.Describe(fmt.Errorf("%w: issuer mismatch: the token is from %.100q, this service trusts %.100q", ErrInvalidToken, iss, want), "issuer mismatch")
}

// rejection is the issuer turning a token down, with its OAuth error code,
// which the middleware answers with. It wraps ErrInsufficientScope for a 403,
// ErrInvalidProof for the DPoP codes (RFC 9449 §7.1, §9: invalid_dpop_proof,
// use_dpop_nonce, with the issuer's DPoP-Nonce, which the middleware passes
// on), ErrTokenBound for a bearer token refused with a DPoP challenge
// (callIssuer) and ErrInvalidToken otherwise.
type rejection struct {
	code, desc string
	nonce      string
	sentinel   error
}

func newRejection(status int, a oauthAnswer, h http.Header) *rejection {
	r := &rejection{code: "invalid_token", desc: a.Description, sentinel: ErrInvalidToken}
	if status == http.StatusForbidden {
		r.code, r.sentinel = "insufficient_scope", ErrInsufficientScope
	}
	if a.Error == "" {
		a.Error = challengeError(h.Values("WWW-Authenticate"))
	}
	if isErrorCode(a.Error) {
		r.code = a.Error
	}
	if r.code == "invalid_dpop_proof" || r.code == "use_dpop_nonce" {
		r.sentinel = ErrInvalidProof
	}
	if n := h.Get("DPoP-Nonce"); isNonce(n) {
		r.nonce = n
	}
	return r
}

// hasDPoPChallenge reports whether h holds a WWW-Authenticate challenge of
// the DPoP scheme.
func hasDPoPChallenge(h http.Header) bool {
	for _, c := range h.Values("WWW-Authenticate") {
		if scheme, _, _ := strings.Cut(strings.TrimSpace(c), " "); strings.EqualFold(scheme, "DPoP") {
			return true
		}
	}
	return false
}

// challengeError returns the error parameter of the first challenge that
// has one, such as use_dpop_nonce in DPoP error="use_dpop_nonce", or "".
func challengeError(challenges []string) string {
	for _, c := range challenges {
		if _, rest, ok := strings.Cut(c, `error="`); ok {
			code, _, _ := strings.Cut(rest, `"`)
			return code
		}
	}
	return ""
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

// withRetryAfter returns err with the wait that h's Retry-After asks for
// (delay-seconds, at most 300), or err alone when h has none that parses.
func withRetryAfter(err error, h http.Header) error {
	if s, perr := strconv.Atoi(h.Get("Retry-After")); perr == nil && s > 0 {
		return &retryError{err: err, after: time.Duration(min(s, 300)) * time.Second}
	}
	return err
}

// answer is one remembered answer of the issuer: claims, or a rejection.
type answer struct {
	claims *Claims
	err    error
	until  time.Time
}

// answerCache remembers answers keyed by the SHA-256 of the token; it never
// holds a token. It holds at most size answers in a ring of slots filled in
// order: a new answer takes the next slot, evicting the one there, the
// oldest, so insert and eviction are O(1) and a full cache costs what an
// empty one does. The oldest answer is also about the first to go stale,
// since every answer is kept for CacheTTL at most. Reads share a read lock
// and never write: an answer past its until is simply not returned, and its
// slot is reused in turn.
//
// It is hand-written, not a cache library (otter served before), so that
// the client module depends on golang-jwt alone: a service that imports it
// gets no other module.
type answerCache struct {
	mu    sync.RWMutex
	index map[[sha256.Size]byte]int // key -> its slot
	slots []slot                    // grows to size, then is reused from next on
	next  int                       // the slot the next new answer takes
	size  int
}

// slot is one answer of the ring; live is false once its key has moved to
// another slot.
type slot struct {
	key  [sha256.Size]byte
	a    answer
	live bool
}

func newAnswerCache(size int) *answerCache {
	return &answerCache{index: make(map[[sha256.Size]byte]int), size: size}
}

// get returns a copy of the answer for key while it is younger than its until.
func (c *answerCache) get(key *[sha256.Size]byte, now time.Time) (*Claims, error, bool) {
	c.mu.RLock()
	i, ok := c.index[*key]
	var a answer
	if ok {
		a = c.slots[i].a
	}
	c.mu.RUnlock()
	switch {
	case !ok || !now.Before(a.until):
		return nil, nil, false
	case a.err != nil:
		return nil, a.err, true
	default:
		return a.claims.clone(), nil, true
	}
}

// put remembers a for key, unless it is already past its until.
func (c *answerCache) put(key *[sha256.Size]byte, a answer, now time.Time) {
	if !now.Before(a.until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[*key]; ok {
		c.slots[i].live = false // the key moves to the newest slot
	}
	s := slot{key: *key, a: a, live: true}
	if len(c.slots) < c.size {
		c.slots = append(c.slots, s)
		c.index[*key] = len(c.slots) - 1
		return
	}
	if old := &c.slots[c.next]; old.live {
		delete(c.index, old.key)
	}
	c.slots[c.next] = s
	c.index[*key] = c.next
	c.next = (c.next + 1) % c.size
}

// len is how many answers the cache holds, stale ones included.
func (c *answerCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.index)
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
