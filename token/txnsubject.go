package token

import (
	"context"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
)

// TxnSubject is the subject token of a Transaction Token request at
// POST /token (token exchange with requested_token_type txn_token, the
// draft's Txn-Token Service): raw, an access token of this issuer, for
// client c, with the clients cs in force. The rules are Exchange's for
// its subject token: c opted in to exchange (ErrUnauthorizedClient); the
// token live now through the one verdict (Verdict: not revoked, not
// expired, its client in good standing), naming c in its aud or issued
// to it; refused as ErrInvalidRequest (RFC 8693 §2.2.2) otherwise. A
// DPoP-bound token is refused too: the request binds nothing to a key, and
// the gateway, which checks the proof, mints one for it instead
// (GET /token/validate?txn_token=1).
func (s *Service) TxnSubject(ctx context.Context, cs *clients.Registry, c *clients.Client, raw string) (*Verified, error) {
	if !c.TokenExchange {
		return nil, refusal.New(ErrUnauthorizedClient, "client %q may not exchange tokens (token_exchange)", c.ID)
	}
	v, err := s.subjectToken(ctx, cs, c, raw)
	if err != nil {
		return nil, err
	}
	if v.JKT() != "" {
		return nil, refusal.New(ErrInvalidRequest, "subject_token refused: it is DPoP-bound; a gateway that checks its proof mints its Transaction Token (GET /token/validate?txn_token=1)")
	}
	return v, nil
}

// subjectToken is the subject token raw of an exchange by client c, with
// the clients cs in force: live now through the one verdict (Verdict), and
// naming c in its aud or issued to it; a refusal is ErrInvalidRequest
// (exchangeTokenError), a Redis failure ErrUnavailable.
func (s *Service) subjectToken(ctx context.Context, cs *clients.Registry, c *clients.Client, raw string) (*Verified, error) {
	v, err := s.Verdict(ctx, cs, Request{Token: raw})
	switch {
	case err != nil:
		return nil, exchangeTokenError("subject_token", err)
	case v.ClientID() != c.ID && !v.ForAudience(c.ID):
		return nil, refusal.New(ErrInvalidRequest, "subject_token refused: it neither names client %q in its aud nor was issued to it", c.ID)
	}
	return v, nil
}
