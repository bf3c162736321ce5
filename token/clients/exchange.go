package clients

import "errors"

// A client takes part in token exchange (RFC 8693, token.Service.Exchange)
// only when its entry says so:
//
//   - TokenExchange lets it exchange a token that names it (in its aud, or
//     issued to it) for a narrower one, with an actor token (delegation:
//     the new token's act names the actor).
//   - Impersonation, which needs TokenExchange, lets it exchange without
//     an actor token: the new token acts for the subject with no actor of
//     its own (it keeps the subject token's act, never drops it).
//
// Both are off by default: a client that may exchange is a deliberate
// choice of the operator, as one that may set the subject is.

// errImpersonation: impersonation without token exchange means nothing.
var errImpersonation = errors.New("impersonation needs token_exchange")

// checkExchange checks the exchange fields of the client's entry.
func (c *Client) checkExchange() error {
	if c.Impersonation && !c.TokenExchange {
		return errImpersonation
	}
	return nil
}
