package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/internal/refusal"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// Claims are what a valid token says.
type Claims struct {
	Subject   string
	ClientID  string
	Scopes    []string
	Issuer    string
	Audience  []string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// JTI is the jti: the token's Snowflake ID in decimal.
	JTI string
	// WorkerID is the issuer worker that made JTI.
	WorkerID int64
	// JKT is the thumbprint of the DPoP key the token is bound to, its
	// cnf.jkt (RFC 9449 §6), which the request's proof was signed with;
	// empty for a bearer token.
	JKT string
	// Act is an exchanged token's act (RFC 8693 §4.1): who acts for the
	// subject, the outermost actor first, each earlier one nested in it;
	// nil for a token with no actor. Only the outermost counts for
	// authorization (Actor).
	Act *jwtpolicy.Actor

	// parents are an exchanged token's (its parents claim), each with its
	// iat, as RevocationCheck Follow judges them (the cascade: the token
	// is revoked when any of them is); nil for any other token.
	parents []revocation.Parent
}

// Actor is the sub of the token's outermost act: the party acting for the
// subject now, the one to authorize (RFC 8693 §4.1); "" for a token with no
// actor.
func (c *Claims) Actor() string {
	if c.Act == nil {
		return ""
	}
	return c.Act.Subject
}

// HasScope reports whether the token carries scope.
func (c *Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

func (c *Claims) clone() *Claims {
	d := *c
	d.Scopes = slices.Clone(c.Scopes)
	d.Audience = slices.Clone(c.Audience)
	for p := &d.Act; *p != nil; p = &(*p).Act { // a copy of every actor in the chain
		a := **p
		*p = &a
	}
	return &d
}

// requireScopes returns nil when c carries every scope in want.
func requireScopes(c *Claims, want []string) error {
	for _, s := range want {
		if !c.HasScope(s) {
			return refusal.New(ErrInsufficientScope, "token lacks %q", strings.Join(want, " "))
		}
	}
	return nil
}

// checkScopes accepts scopes as RFC 6749 §3.3 defines them: printable ASCII
// other than space, double quote and backslash.
func checkScopes(scopes []string) error {
	for _, s := range scopes {
		if s == "" || len(s) > 128 {
			return fmt.Errorf("%w: %.32q must be 1 to 128 characters", ErrBadScope, s)
		}
		if i := notNQChar(s); i >= 0 {
			return fmt.Errorf("%w: %.32q: character %q not allowed", ErrBadScope, s, s[i])
		}
	}
	return nil
}

// notNQChar returns the index of the first byte of s that is not an NQCHAR
// (printable ASCII but space, double quote and backslash: RFC 6749 §A,
// which a scope token and a DPoP nonce are made of), or -1.
func notNQChar(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

// claimsKey keys the claims in a context.Context.
type claimsKey struct{}

// GinKey is the key a gin handler stores the *Claims under with c.Set, so
// that ClaimsFrom finds them in a *gin.Context (see Authenticate).
const GinKey = "github.com/snowtoken/snowtoken/client.claims"

// NewContext returns a copy of ctx that carries c, as the middleware passes it
// on; handler tests use it too.
func NewContext(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFrom returns the claims the middleware put in ctx. A *gin.Context
// works too: it finds what was stored under GinKey.
func ClaimsFrom(ctx context.Context) (*Claims, bool) {
	if c, ok := ctx.Value(claimsKey{}).(*Claims); ok && c != nil {
		return c, true
	}
	c, ok := ctx.Value(GinKey).(*Claims)
	return c, ok && c != nil
}
