package client

import "github.com/snowtoken/snowtoken/client/revocation"

// decide says whether the token c is revoked, by the followed state: the
// consuming service's rule, revocation.State.DecideFeed (which its doc
// draws), on the token's iat to the second, and on each parent's of an
// exchanged token (the cascade: revoked when any of them is).
func (f *feed) decide(c *Claims) revocation.Verdict {
	now := f.v.opts.Now()
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.DecideFeed(now, revocation.Query{JTI: c.JTI, Subject: c.Subject, Client: c.ClientID,
		Issued: c.IssuedAt.Unix() * 1000, Parents: c.parents})
}
