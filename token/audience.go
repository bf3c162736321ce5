package token

import (
	"fmt"
	"slices"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// A client may ask only for its own Audiences, or for Options.Audience when
// it lists none; anything else is ErrInvalidTarget. Asking for none gives
// the first of them, or no aud when there are none. The syntax of an
// audience and of a request's resource and audience is package syntax's.

// allowedAudiences returns the audiences c may ask for, the default first.
func (s *Service) allowedAudiences(c *clients.Client) []string {
	if len(c.Audiences) > 0 {
		return c.Audiences
	}
	return s.defaultAud
}

// audiences returns the aud of a token for c asking for req.
func (s *Service) audiences(c *clients.Client, req IssueRequest) ([]string, error) {
	want, err := syntax.RequestedAudiences(req.Resource, req.Audience)
	if err != nil {
		return nil, err
	}
	allowed := s.allowedAudiences(c)
	if len(want) == 0 {
		return allowed[:min(1, len(allowed))], nil
	}
	for _, a := range want {
		if !slices.Contains(allowed, a) {
			return nil, refusal.New(ErrInvalidTarget, "client %q may not ask for audience %q", c.ID, a)
		}
	}
	return want, nil
}

// checkClient checks that v may still be used as its client stands in cs
// today: the client is there and not disabled, and the
// token's aud is one the client could get now, every value one it may ask
// for and none only if it has none to ask for. So disabling or removing a
// client, or taking an audience off it (or changing Options.Audience for a
// client that lists none), ends its tokens at once. The error wraps
// ErrInvalidToken. It costs a map lookup and a scan of the client's
// audiences, and allocates only to refuse.
func (s *Service) checkClient(cs *clients.Registry, v *Verified) error {
	c, ok := cs.Lookup(v.claims.ClientID)
	if !ok || c.Disabled {
		return v.refusedForClient("its client was removed or disabled")
	}
	allowed, aud := s.allowedAudiences(c), v.claims.Audience
	if len(aud) == 0 && len(allowed) > 0 {
		return v.refusedForClient("it has no audience, and its client's tokens now have one")
	}
	for _, a := range aud {
		if !slices.Contains(allowed, a) {
			return v.refusedForClient("its audience is no longer allowed for its client")
		}
	}
	return nil
}

// refusedForClient is checkClient's refusal of v: why, the client's to
// read, and in its text (the log's) the token's client, aud and jti.
func (v *Verified) refusedForClient(why string) error {
	return refusal.Describe(fmt.Errorf("%w: %s (client_id %q, aud %q, jti %s)",
		ErrInvalidToken, why, v.claims.ClientID, v.claims.Audience, v.claims.ID), why)
}

// Narrowed returns, sorted, the clients enabled in both cs and next whose
// tokens checkClient starts to refuse some of after a reload from cs to
// next: their allowed audiences lose one, or become some where they were
// none (a token without aud is then refused). With Registry.Dropped, these
// are the clients whose tokens a reload ends.
func (s *Service) Narrowed(cs, next *clients.Registry) []string {
	var out []string
	for _, c := range cs.All() {
		n, ok := next.Lookup(c.ID)
		if !ok || c.Disabled || n.Disabled {
			continue
		}
		was, now := s.allowedAudiences(&c), s.allowedAudiences(n)
		if len(was) == 0 && len(now) > 0 || slices.ContainsFunc(was, func(a string) bool { return !slices.Contains(now, a) }) {
			out = append(out, c.ID)
		}
	}
	return out
}
