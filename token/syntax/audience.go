package syntax

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

// CheckAudience checks one audience's syntax, as ?audience= gives it to
// validation; the error wraps ErrInvalidTarget.
func CheckAudience(a string) error {
	if err := checkAudience(a); err != nil {
		return refusal.New(ErrInvalidTarget, "audience %.64q: %w", a, err)
	}
	return nil
}

// checkAudience checks one audience's syntax, with an error that does not
// repeat it.
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

// CheckAudienceList checks a client's audiences: each one's syntax, and none
// listed twice.
func CheckAudienceList(list []string) error {
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

// RequestedAudiences returns the audiences a request names, repeats dropped,
// in the order given; none when it names none.
func RequestedAudiences(resource, audience []string) ([]string, error) {
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
	case len(audience) > 0 && !(ContainsAll(resource, audience) && ContainsAll(audience, resource)):
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
