package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// The cascade end to end: an exchanged token (RFC 8693) carries its
// parents, and is refused wherever one of them is revoked. The tokens are
// minted here as the exchange grant mints them: a token the fleet issued
// (so that its session exists), its claims signed again by the fleet's
// key with parents.

// exchangedToken is plain, a JWT the fleet issued, signed again with the
// key at creds.keyPath with parents, each a token of the same subject the
// fleet issued to the client of the same index (an opaque parent's ID
// decoded at the replica at).
func exchangedToken(tb testing.TB, at *issuer, creds fleetCreds, plain fleetToken, parents []fleetToken, clients []fleetClient) fleetToken {
	tb.Helper()
	pem, err := os.ReadFile(creds.keyPath)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := keyset.ParsePEM(pem)
	if err != nil {
		tb.Fatal(err)
	}
	claims := tokenClaims(tb, plain.AccessToken)
	for i, p := range parents {
		c := tokenClaims(tb, p.AccessToken)
		opaque := strings.HasPrefix(p.AccessToken, jwtpolicy.OpaquePrefix)
		if opaque { // its claims are in its record; its iat is its ID's time, to the second
			c.ID, c.ClientID, c.IssuedAt = p.TokenID.String(), clients[i].id, jwt.NewNumericDate(idTime(tb, at, p.TokenID))
		}
		claims.Parents = append(claims.Parents, jwtpolicy.Parent{ID: c.ID, ClientID: c.ClientID, IssuedAt: c.IssuedAt.Unix(), Opaque: opaque})
	}
	raw := jwttest.Sign(tb, jwt.SigningMethodEdDSA, key.Private, map[string]any{"kid": key.ID, "typ": jwtpolicy.Type}, claims)
	return fleetToken{AccessToken: raw, TokenID: plain.TokenID}
}

// idTime is the time of the ID id, as the replica p decodes it.
func idTime(tb testing.TB, p *issuer, id snowflakealg.ID) time.Time {
	tb.Helper()
	status, _, body := p.call(tb, http.MethodGet, "/ids/"+id.String(), nil, "", nil)
	var parts snowflakealg.Parts
	if status != http.StatusOK || json.Unmarshal(body, &parts) != nil {
		tb.Fatalf("GET /ids/%d at %s: %d %s", id, p.name, status, body)
	}
	return parts.Time
}

// tokenClaims are the claims of raw, a JWT, unverified; the zero Claims
// for an opaque token.
func tokenClaims(tb testing.TB, raw string) jwtpolicy.Claims {
	tb.Helper()
	var c jwtpolicy.Claims
	if strings.HasPrefix(raw, jwtpolicy.OpaquePrefix) {
		return c
	}
	parts := strings.Split(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		tb.Fatalf("the claims of %.16q…: %v", raw, err)
	}
	return c
}

// TestRevlogExchangedCascade: two replicas on a real Redis, following the
// revocation log, and a consumer following the feed of one of them. An
// exchanged token with a JWT parent and an opaque parent is hot at every
// replica (each validation decided from memory, no Redis command) and
// passes at the consumer; revoking either parent at a replica refuses it
// at every replica within the guarantee's bound, and at the consumer,
// while the same token without parents stays live.
func TestRevlogExchangedCascade(t *testing.T) {
	bin := fleetBinary(t)
	creds := newFleetCreds(t, bin)
	f := startRevlogFleet(t, bin, creds, redistest.NewConfiguredServer(t), 2, revlogThreshold)
	v := startFollower(t, f.reps[0], creds.admin)

	for _, c := range []struct {
		name   string
		revoke int // the parent revoked: 0 the JWT, 1 the opaque token
	}{{"its JWT parent revoked", 0}, {"its opaque parent revoked", 1}} {
		t.Run(c.name, func(t *testing.T) {
			clients := []fleetClient{creds.svc, creds.opaque}
			parents := []fleetToken{f.issue(t, f.reps[0], creds.svc), f.reps[1].issue(t, creds.opaque, creds.svc.id)}
			plain := f.issue(t, f.reps[1], creds.svc)
			child := exchangedToken(t, f.reps[0], creds, plain, parents, clients)
			f.mustBeHot(t, child, "before any revocation")
			f.mustBeLive(t, plain, "before any revocation")
			if _, err := v.Validate(t.Context(), child.AccessToken); err != nil {
				t.Fatalf("the consumer, before any revocation: %v", err)
			}

			revoked := f.revoke(t, f.reps[1], clients[c.revoke], parents[c.revoke])
			f.mustRefuse(t, child, revoked, c.name)
			consumerRefuses(t, v, child, c.name)
			f.mustBeHot(t, plain, "the token without parents, "+c.name)
			if _, err := v.Validate(t.Context(), plain.AccessToken); err != nil {
				t.Errorf("the consumer, the token without parents: %v", err)
			}
			if status, _ := f.reps[0].validate(t, child); status != http.StatusUnauthorized {
				t.Errorf("the exchanged token after its parent's revocation: %d, want 401", status)
			}
		})
	}
}

// consumerRefuses checks that the Follow consumer v refuses tok as
// invalid within fleetRejectWait (a bound for a hung test).
func consumerRefuses(tb testing.TB, v *client.Validator, tok fleetToken, why string) {
	tb.Helper()
	for end := time.Now().Add(fleetRejectWait); ; time.Sleep(5 * time.Millisecond) {
		_, err := v.Validate(tb.Context(), tok.AccessToken)
		if errors.Is(err, client.ErrInvalidToken) {
			return
		}
		if time.Now().After(end) {
			tb.Fatalf("token %d at the consumer %s: %v, want ErrInvalidToken", tok.TokenID, why, err)
		}
	}
}
