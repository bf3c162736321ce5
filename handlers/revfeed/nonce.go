package revfeed

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

// MinNonceLen and MaxNonceLen bound a nonce: 128 bits base64url (unpadded)
// at least.
const (
	MinNonceLen = 22
	MaxNonceLen = 128
)

// CheckNonce returns the request's nonce query parameter: "" without one;
// an error wrapping token.ErrInvalidRequest when it is given more than once
// or is not MinNonceLen to MaxNonceLen characters of base64url (RFC 4648 §5,
// unpadded).
func CheckNonce(r *http.Request) (string, error) {
	vals := r.URL.Query()["nonce"]
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", refusal.New(token.ErrInvalidRequest, "nonce given more than once")
	}
	if err := checkNonceValue(vals[0]); err != nil {
		return "", err
	}
	return vals[0], nil
}

// checkNonceValue returns an error wrapping token.ErrInvalidRequest unless
// n is MinNonceLen to MaxNonceLen characters of base64url.
func checkNonceValue(n string) error {
	if len(n) < MinNonceLen || len(n) > MaxNonceLen || strings.Trim(n, base64URL) != "" {
		return refusal.Describe(refusal.New(token.ErrInvalidRequest, "nonce"),
			fmt.Sprintf("nonce must be %d to %d characters of base64url (A-Z a-z 0-9 - _)", MinNonceLen, MaxNonceLen))
	}
	return nil
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// bind writes the stream's first JWT, signed now, after the request
// arrived, with its nonce: the consumer measures the heartbeats' age by it.
func (s *stream) bind() error {
	now := s.f.opts.Now()
	raw, err := s.f.opts.Sign(revocation.TypeStream, &revocation.StreamClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: s.f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Nonce: s.nonce,
	})
	if err != nil {
		return fmt.Errorf("revfeed: signing the stream: %w", err)
	}
	s.buf = append(s.buf, "event: stream\ndata: "...)
	s.buf = append(s.buf, raw...)
	s.buf = append(s.buf, "\n\n"...)
	s.bound, s.boundMs = true, now.UnixMilli()
	return nil
}
