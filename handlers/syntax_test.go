package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestTokenLineBreaks: a token with a byte outside base64url and its two
// dots (CR, LF, a space, padding) is refused before any signature check,
// wherever it is read: it is not a second spelling of the same token.
func TestTokenLineBreaks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jwtTok := e.issue(t, e.Normal, nil).AccessToken
	opaque := e.issue(t, e.Opaque, url.Values{"subject": {"u1"}}).AccessToken
	for _, tok := range []string{jwtTok, opaque} {
		sig := strings.LastIndexByte(tok, '.') + 10 // inside the signature; for an opaque token, inside its secret
		for _, bad := range []string{
			tok[:sig] + "\r\n" + tok[sig:],
			tok[:sig] + "\n" + tok[sig:],
			tok + "\n",
			tok[:sig] + " " + tok[sig:],
			tok + "==",
		} {
			t.Run("introspect", func(t *testing.T) {
				wantError(t, e.post(t, "/token/introspect", &e.Auditor, url.Values{"token": {bad}}), http.StatusBadRequest, "invalid_request")
			})
			t.Run("revoke", func(t *testing.T) {
				wantError(t, e.post(t, "/token/revoke", &e.Admin, url.Values{"token": {bad}}), http.StatusBadRequest, "invalid_request")
			})
		}
		if r := e.validate(t, tok); r.Status != http.StatusOK {
			t.Errorf("the token itself: validate %d, want 200 (a refused spelling revoked it)", r.Status)
		}
	}
	t.Run("bearer with a tab", func(t *testing.T) {
		sig := strings.LastIndexByte(jwtTok, '.') + 10
		wantInvalidToken(t, e.validate(t, jwtTok[:sig]+"\t"+jwtTok[sig:]), jwtTok)
	})
}
