package clients

import (
	"errors"
	"fmt"
	"slices"

	"github.com/snowtoken/snowtoken/token/clientauth"
)

// A client takes part in token exchange (RFC 8693, token.Service.Exchange)
// only when its entry says so:
//
//   - TokenExchange lets it exchange a token that names it (in its aud, or
//     issued to it) for a narrower one, with an actor token (delegation:
//     the new token's act names the actor).
//   - Impersonation, which needs TokenExchange, lets it exchange without
//     an actor token: the new token acts for the subject with no actor of
//     its own (it keeps the subject token's act, never drops it).
//   - SubjectTokenIssuers, which needs TokenExchange, are the issuers
//     whose JWTs it may exchange too (subject_token_type
//     urn:ietf:params:oauth:token-type:jwt), such as a cluster's
//     service-account issuer: a JWT of one of them whose aud names the
//     client (clientauth.Verifier.VerifySubjectToken). At most
//     MaxSubjectTokenIssuers, each issuer once; their keys are fetched as
//     a workload identity's are.
//
// All are off by default: a client that may exchange is a deliberate
// choice of the operator, as one that may set the subject is.

// MaxSubjectTokenIssuers bounds a client's SubjectTokenIssuers.
const MaxSubjectTokenIssuers = 8

// Errors of the exchange fields: impersonation or subject token issuers
// without token exchange mean nothing.
var (
	errImpersonation  = errors.New("impersonation needs token_exchange")
	errSubjectIssuers = errors.New("subject_token_issuers needs token_exchange")
)

// checkExchange checks the exchange fields of the client's entry.
func (c *Client) checkExchange() error {
	switch {
	case c.Impersonation && !c.TokenExchange:
		return errImpersonation
	case len(c.SubjectTokenIssuers) > 0 && !c.TokenExchange:
		return errSubjectIssuers
	case len(c.SubjectTokenIssuers) > MaxSubjectTokenIssuers:
		return fmt.Errorf("subject_token_issuers: %d, want at most %d", len(c.SubjectTokenIssuers), MaxSubjectTokenIssuers)
	}
	for i := range c.SubjectTokenIssuers {
		ti := &c.SubjectTokenIssuers[i]
		if err := ti.Check(); err != nil {
			return fmt.Errorf("subject_token_issuers %d: %w", i, err)
		}
		if slices.ContainsFunc(c.SubjectTokenIssuers[:i], func(o clientauth.TrustedIssuer) bool { return o.Issuer == ti.Issuer }) {
			return fmt.Errorf("subject_token_issuers %d: issuer %q listed twice", i, ti.Issuer)
		}
	}
	return nil
}
