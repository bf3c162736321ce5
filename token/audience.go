package token

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Audiences. A client asks for the aud of its token with resource (RFC 8707:
// an absolute URI without a fragment) or with audience (RFC 8693 §2.1, the
// name most issuers take: any string without spaces), each repeatable, at
// most MaxAudiences times. Given both, they must name the same audiences:
// which one is meant is not guessed. Each audience is 1 to MaxAudienceLen
// bytes of printable ASCII other than space, double quote and backslash.
//
// The client may ask only for its own Audiences, or for Options.Audience
// when it lists none; anything else is ErrInvalidTarget. Asking for none
// gives the first of them, or no aud when there are none.

// CheckAudience checks one audience's syntax, as ?audience= gives it to
// validation; the error wraps ErrInvalidTarget.
func CheckAudience(a string) error {
	if err := checkAudience(a); err != nil {
		return refusal.New(ErrInvalidTarget, "audience %.64q: %w", a, err)
	}
	return nil
}

func checkAudience(a string) error { return checkPrintable(a, MaxAudienceLen, "an audience") }

// checkResource accepts a resource indicator (RFC 8707 §2): an audience that
// is an absolute URI with no fragment.
func checkResource(r string) error {
	if err := checkAudience(r); err != nil {
		return err
	}
	u, err := url.Parse(r)
	switch {
	case err != nil:
		return refusal.Phrase("not a URI") // url's error repeats the value in full
	case !u.IsAbs():
		return refusal.Phrase("not an absolute URI (it needs a scheme, such as https:)")
	case strings.IndexByte(r, '#') >= 0:
		return refusal.Phrase("a fragment is not allowed (RFC 8707 §2)")
	}
	return nil
}

// checkAudienceList checks a client's audiences: each one's syntax, and none
// listed twice.
func checkAudienceList(list []string) error {
	for i, a := range list {
		if err := checkAudience(a); err != nil {
			return fmt.Errorf("%.64q: %w", a, err)
		}
		if slices.Contains(list[:i], a) {
			return fmt.Errorf("%.64q listed twice", a)
		}
	}
	return nil
}

// requestedAudiences returns the audiences a request names, repeats dropped,
// in the order given; none when it names none.
func requestedAudiences(resource, audience []string) ([]string, error) {
	if len(resource) > MaxAudiences || len(audience) > MaxAudiences {
		return nil, errTooManyAudiences
	}
	for _, r := range resource {
		if err := checkResource(r); err != nil {
			return nil, refusal.New(ErrInvalidTarget, "resource %.64q: %w", r, err)
		}
	}
	for _, a := range audience {
		if err := checkAudience(a); err != nil {
			return nil, refusal.New(ErrInvalidTarget, "audience %.64q: %w", a, err)
		}
	}
	want := resource
	switch {
	case len(resource) == 0:
		want = audience
	case len(audience) > 0 && !(containsAll(resource, audience) && containsAll(audience, resource)):
		return nil, refusal.New(ErrInvalidTarget, "resource and audience name different audiences; send one of them")
	}
	var out []string
	for _, a := range want {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// errTooManyAudiences is made once: refusing costs no allocation.
var errTooManyAudiences = refusal.New(ErrInvalidTarget, "more than %d audiences", MaxAudiences)

// allowedAudiences returns the audiences c may ask for, the default first.
func (s *Service) allowedAudiences(c *Client) []string {
	if len(c.Audiences) > 0 {
		return c.Audiences
	}
	return s.defaultAud
}

// audiences returns the aud of a token for c asking for req.
func (s *Service) audiences(c *Client, req IssueRequest) ([]string, error) {
	want, err := requestedAudiences(req.Resource, req.Audience)
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
func (s *Service) checkClient(cs *Clients, v *Verified) error {
	c, ok := cs.byID[v.claims.ClientID]
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
// none (a token without aud is then refused). With Clients.Dropped, these
// are the clients whose tokens a reload ends.
func (s *Service) Narrowed(cs, next *Clients) []string {
	var out []string
	for id, c := range cs.byID {
		n, ok := next.byID[id]
		if !ok || c.Disabled || n.Disabled {
			continue
		}
		was, now := s.allowedAudiences(c), s.allowedAudiences(n)
		if len(was) == 0 && len(now) > 0 || slices.ContainsFunc(was, func(a string) bool { return !slices.Contains(now, a) }) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
