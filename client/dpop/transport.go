package dpop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MaxNonceOrigins bounds the origins a Transport remembers a nonce for.
const MaxNonceOrigins = 256

// maxErrorBody bounds what a Transport reads of a 400 answer to find its
// error code; the caller reads the whole body all the same.
const maxErrorBody = 16 << 10

// Transport is an http.RoundTripper that sends every request with a fresh
// DPoP proof of Prover, as a DPoP client does (RFC 9449):
//
//   - The proof is for the request's method and URL; when the request
//     carries Authorization: DPoP <token>, it carries the token's hash (ath).
//   - Every DPoP-Nonce a server answers with, on any response, is
//     remembered for its origin (scheme://host[:port]) and put in the later
//     proofs to that origin (RFC 9449 §8, §9). At most MaxNonceOrigins
//     origins are remembered; past that a new one takes the place of one
//     of the others.
//   - A response asking for a nonce (use_dpop_nonce: a 400 whose JSON error
//     is use_dpop_nonce, from a token endpoint, or a 401 whose
//     WWW-Authenticate DPoP challenge has error="use_dpop_nonce", from a
//     resource) with a DPoP-Nonce other than the one sent, is retried once
//     with a proof carrying it, provided the body can be sent again: the
//     request has none or has GetBody (http.NewRequest sets it for
//     in-memory bodies). Otherwise that response is returned.
//
// The caller's request is never changed: each attempt is a clone.
// A Transport must not be copied after its first use.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Prover signs the proofs. Required: RoundTrip fails without one.
	Prover *Prover
	// Now reads the clock for a proof's iat; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	nonces map[string]string // origin -> the last DPoP-Nonce it sent
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Prover == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, ErrNoProver
	}
	o := origin(req.URL)
	sent := t.nonce(o)
	resp, err := t.send(req, req.Body, sent, o)
	if err != nil {
		return nil, err
	}
	fresh := resp.Header.Get("DPoP-Nonce")
	if fresh == "" || fresh == sent || !asksForNonce(resp) {
		return resp, nil
	}
	body := req.Body
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil // the caller gets the answer it would have had
		}
	} else if body != nil && body != http.NoBody {
		return resp, nil // sent already: it cannot be sent again
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	return t.send(req, body, fresh, o)
}

// send sends a clone of req with body and a fresh proof carrying nonce,
// and remembers the DPoP-Nonce of the answer as origin's.
func (t *Transport) send(req *http.Request, body io.ReadCloser, nonce, origin string) (*http.Response, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	var token string
	if scheme, tok, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "DPoP") {
		token = strings.TrimSpace(tok)
	}
	proof, err := t.Prover.Proof(req.Method, req.URL.String(), token, nonce, now())
	if err != nil {
		if body != nil {
			_ = body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	r.Header.Set("DPoP", proof)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err == nil {
		if n := resp.Header.Get("DPoP-Nonce"); n != "" {
			t.remember(origin, n)
		}
	}
	return resp, err
}

// nonce returns the last nonce origin gave, or "".
func (t *Transport) nonce(origin string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nonces[origin]
}

// remember keeps nonce as origin's, making room among MaxNonceOrigins.
func (t *Transport) remember(origin, nonce string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nonces == nil {
		t.nonces = make(map[string]string)
	}
	if _, ok := t.nonces[origin]; !ok && len(t.nonces) >= MaxNonceOrigins {
		for o := range t.nonces { // any one: map order is random
			delete(t.nonces, o)
			break
		}
	}
	t.nonces[origin] = nonce
}

// asksForNonce reports whether resp is use_dpop_nonce: a 401 with a DPoP
// challenge naming it, or a 400 whose JSON error is it. The 400's body is
// read for that (at most maxErrorBody) and put back for the caller.
func asksForNonce(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		for _, c := range resp.Header.Values("WWW-Authenticate") {
			if strings.Contains(strings.ToLower(c), "dpop") && strings.Contains(c, `error="use_dpop_nonce"`) {
				return true
			}
		}
	case http.StatusBadRequest:
		head, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		var e struct {
			Error string `json:"error"`
		}
		return err == nil && json.Unmarshal(head, &e) == nil && e.Error == "use_dpop_nonce"
	}
	return false
}

// origin returns the origin of u, scheme://host[:port], as a Transport
// keys its nonces.
func origin(u *url.URL) string { return u.Scheme + "://" + strings.ToLower(u.Host) }
