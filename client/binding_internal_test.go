package client

import (
	"errors"
	"net/http"
	"testing"
)

// TestNewRejectionDPoP: the issuer's DPoP refusals, from its body or its
// challenge, are ErrInvalidProof with their code, and its DPoP-Nonce is
// kept only when it is a nonce (no quote, space or line break to pass on).
func TestNewRejectionDPoP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		body      oauthAnswer
		challenge string
		nonce     string
		code      string
		sentinel  error
		wantNonce string
	}{
		{"body code", oauthAnswer{Error: "invalid_dpop_proof"}, "", "", "invalid_dpop_proof", ErrInvalidProof, ""},
		{"challenge code", oauthAnswer{}, `DPoP algs="EdDSA", error="use_dpop_nonce", error_description="x"`, "n-1", "use_dpop_nonce", ErrInvalidProof, "n-1"},
		{"body first", oauthAnswer{Error: "invalid_token"}, `DPoP error="use_dpop_nonce"`, "", "invalid_token", ErrInvalidToken, ""},
		{"hostile code", oauthAnswer{}, `DPoP error="a\r\nb"`, "", "invalid_token", ErrInvalidToken, ""},
		{"hostile nonce", oauthAnswer{Error: "use_dpop_nonce"}, "", "n\r\nSet-Cookie: a=b", "use_dpop_nonce", ErrInvalidProof, ""},
		{"quoted nonce", oauthAnswer{Error: "use_dpop_nonce"}, "", `n"1`, "use_dpop_nonce", ErrInvalidProof, ""},
		{"description only", oauthAnswer{}, `DPoP error_description="x"`, "", "invalid_token", ErrInvalidToken, ""},
	} {
		h := http.Header{}
		if tc.challenge != "" {
			h.Set("WWW-Authenticate", tc.challenge)
		}
		if tc.nonce != "" {
			h["Dpop-Nonce"] = []string{tc.nonce}
		}
		r := newRejection(http.StatusUnauthorized, tc.body, h)
		if r.code != tc.code || !errors.Is(r, tc.sentinel) || r.nonce != tc.wantNonce {
			t.Errorf("%s: got code %q nonce %q (%v), want %q %q (%v)", tc.name, r.code, r.nonce, r.sentinel, tc.code, tc.wantNonce, tc.sentinel)
		}
	}
}
