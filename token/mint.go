package token

import (
	"context"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// What every new token goes through, issued (Issue) or exchanged
// (Exchange): its DPoP key (checkKey), its lifetime (lifetime), and its
// minting (mint).

// checkKey checks jkt, the thumbprint of the DPoP key a new token of c is
// to be bound to ("" for none): well-formed, and given if every token of c
// must be bound (ErrDPoPRequired).
func checkKey(c *clients.Client, jkt string) error {
	switch {
	case jkt != "" && !syntax.IsThumbprint(jkt):
		return refusal.New(ErrInvalidRequest, "the DPoP key's thumbprint is malformed")
	case jkt == "" && c.DPoPBoundAccessTokens:
		return fmt.Errorf("%w: client %q", ErrDPoPRequired, c.ID)
	}
	return nil
}

// lifetime is a token of c's for expiresIn (zero: the default), capped by
// the global and the client's maximum, in whole seconds, at least one.
func (s *Service) lifetime(c *clients.Client, expiresIn time.Duration) (time.Duration, error) {
	ttl := expiresIn
	switch {
	case ttl < 0:
		return 0, refusal.New(ErrInvalidRequest, "expires_in must be positive")
	case ttl == 0:
		ttl = s.opts.TTL
	}
	ttl = min(ttl, s.opts.MaxTTL)
	if c.MaxTTL > 0 {
		ttl = min(ttl, time.Duration(c.MaxTTL))
	}
	ttl = ttl.Truncate(time.Second)
	if ttl < time.Second {
		ttl = time.Second
	}
	return ttl, nil
}

// mint makes g's token for client c, living ttl and expiring no later than
// notAfter if set (an exchanged token's subject token's exp): a new ID, a
// signed JWT (or an opaque token, for a client whose TokenFormat is
// FormatOpaque), and its session record in Redis; it fills in g's jti and
// dates. Nothing is returned unless the record is stored.
func (s *Service) mint(ctx context.Context, c *clients.Client, g *grant, ttl time.Duration, notAfter time.Time) (Issued, error) {
	id, err := s.ids.NextID(ctx)
	if err != nil {
		return Issued{}, fmt.Errorf("%w: id generator: %w", ErrUnavailable, err)
	}
	// The ID's time, as Verdict reads it, which the client's revocation
	// time is compared with (Store.Create refuses a token it covers).
	parts, err := s.ids.Decompose(id)
	if err != nil {
		return Issued{}, fmt.Errorf("id generator: %w", err)
	}
	now := s.opts.Now().Truncate(time.Second)
	if !notAfter.IsZero() {
		if ttl = min(ttl, notAfter.Sub(now).Truncate(time.Second)); ttl < time.Second {
			return Issued{}, refusal.New(ErrInvalidRequest, "the subject token expires within a second")
		}
	}
	g.jti, g.iat, g.exp = id.String(), now.Unix(), now.Add(ttl).Unix()
	if c.TokenFormat == FormatOpaque {
		raw, err := s.issueOpaque(ctx, id, parts.Time, g, ttl)
		if err != nil {
			return Issued{}, err
		}
		return Issued{AccessToken: raw, ExpiresIn: ttl, Scope: g.scope, ID: id, JKT: g.jkt}, nil
	}
	signed := s.signer.sign(g)
	if len(signed) > MaxTokenLen { // never issue a token that Validate refuses
		return Issued{}, refusal.New(ErrInvalidRequest, "the token would be longer than %d bytes; ask for fewer scopes or audiences", MaxTokenLen)
	}
	if err := s.store.Create(ctx, SessionRef{JTI: g.jti, Subject: g.sub, Client: c.ID, Issued: parts.Time}, ttl); err != nil {
		return Issued{}, err
	}
	return Issued{AccessToken: signed, ExpiresIn: ttl, Scope: g.scope, ID: id, JKT: g.jkt}, nil
}
