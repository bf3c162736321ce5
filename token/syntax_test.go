package token_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/snowtoken/snowtoken/token"
)

// TestValidateRefusesOtherBytes: a token with a byte outside base64url and
// its two dots is no spelling of a token of ours, for Validate as for
// Revoke: base64 decoding skips CR and LF, so without the check a token
// with a line break in its signature was the same token under another
// cache key, verified again on every call.
func TestValidateRefusesOtherBytes(t *testing.T) {
	t.Parallel()
	e := newOpaqueEnv(t, Options{}, false)
	jwtTok := e.issue(t, e.svc, "svc", IssueRequest{ExpiresIn: time.Minute}).AccessToken
	opaque := e.issue(t, e.svc, "osvc", IssueRequest{ExpiresIn: time.Minute}).AccessToken
	for _, tok := range []string{jwtTok, opaque} {
		at := strings.LastIndexByte(tok, '.') + 10
		for _, bad := range []string{
			tok[:at] + "\r\n" + tok[at:],
			tok[:at] + "\n" + tok[at:],
			"\n" + tok,
			tok + "\r\n",
			tok[:at] + " " + tok[at:],
			tok[:at] + "=" + tok[at:],
			tok[:at] + "+" + tok[at:],
			tok[:at] + "\x00" + tok[at:],
		} {
			if _, err := e.svc.Validate(t.Context(), bad); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Validate(%.20q...%q): %v, want ErrInvalidToken", bad, bad[len(bad)-8:], err)
			}
			if jti, err := e.svc.Revoke(t.Context(), e.clients["admin"], bad); jti != "" || err != nil {
				t.Errorf("Revoke(%.20q...): %q, %v; want nothing revoked, no error", bad, jti, err)
			}
		}
		if _, err := e.svc.Validate(t.Context(), tok); err != nil {
			t.Errorf("the token itself: %v (a refused spelling revoked it)", err)
		}
	}
}
