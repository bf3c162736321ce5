package client

// decide says whether the token c is revoked, by the state:
//
//	its jti revoked                                      revoked
//	its client's cutoff or its subject's revocation at E:
//	  issued (iat, to the second) before E − Leeway      revoked
//	  issued after E + Leeway                            live, unless another rule says revoked
//	  in between                                         unknown (the clocks may disagree)
//	issued before Horizon + Leeway                       unknown (its revocation may predate the log)
//	issued before the newest revocation let go + Leeway  unknown (FeedRetention: it may have been revoked)
//	otherwise                                            live
//
// A revocation, once verified, stays true: revoked is answered from a
// stale state too. Live needs a fresh one.
func (f *feed) decide(c *Claims) verdict {
	now := f.v.opts.Now()
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.synced {
		return unknown
	}
	if _, ok := f.tokens[c.JTI]; ok {
		return revoked
	}
	lw := f.v.opts.Leeway.Milliseconds()
	from := c.IssuedAt.Unix() * 1000 // the token was issued in [from, to]
	to := from + 999
	v := live
	for _, e := range [...]struct {
		m   map[string]int64
		key string
	}{{f.clients, c.ClientID}, {f.subjects, c.Subject}} {
		at, ok := e.m[e.key]
		switch {
		case !ok:
		case to < at-lw:
			return revoked
		case from <= at+lw:
			v = unknown
		}
	}
	if from < f.horizon+lw || from < f.forgotten+lw || !now.Before(f.freshUntil) {
		return unknown
	}
	return v
}
