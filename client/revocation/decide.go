package revocation

import "time"

// Verdict is what a state says of a token.
type Verdict int8

// Verdicts of DecideLog and DecideFeed.
const (
	Unknown Verdict = iota // not fresh, or the state alone cannot tell: ask a slower source
	Live                   // nothing in the state covers the token
	Revoked                // an entry covers the token
)

// Mark is a position in a state: it grows with every entry applied and
// jumps past every earlier mark at every full read (Adopt), so a mark taken
// before a full read never vouches for the state after it. Zero is no mark.
type Mark uint64

// Query is one token, as the rules need it.
type Query struct {
	JTI, Subject, Client string
	// Issued is when the token was issued, Unix ms: the issuer reads its
	// ID's time (to the ms); a consumer its iat (DecideFeed takes it to
	// the second).
	Issued int64
	// Checked (the issuer's) is the mark taken before the last Redis check
	// that found the token live, or zero.
	Checked Mark
}

// DecideLog is the issuer's rule (token.Revocations): what its follower's
// state says of a token at now, before Redis is read.
//
//	not fresh                                                  Unknown
//	its jti has an entry                                       Revoked
//	issued at or before its client's cutoff                    Revoked
//	Checked is a mark of this state (a Redis check said live):
//	  an entry of its subject applied after Checked            Unknown (Redis's markers tell)
//	  otherwise                                                Live
//	its subject has an entry                                   Unknown (only Redis's markers tell which tokens are before it)
//	issued at or before the horizon + Leeway                   Unknown (a revocation of it may predate the log)
//	otherwise                                                  Live
func (s *State) DecideLog(now time.Time, q Query) Verdict {
	if !s.Fresh(now) {
		return Unknown
	}
	if _, ok := s.tokens[q.JTI]; ok {
		return Revoked
	}
	if c, ok := s.clients[q.Client]; ok && q.Issued <= c.cutoff {
		return Revoked
	}
	e, ok := s.subjects[q.Subject]
	switch {
	case q.Checked >= s.start:
		if ok && e.seq > q.Checked {
			return Unknown
		}
		return Live
	case ok:
		return Unknown
	case q.Issued <= s.horizon+s.leewayMs:
		return Unknown
	}
	return Live
}

// DecideFeed is the consuming service's rule (client.Follow): what the
// state it follows says of a token at now. Issued is taken to the second
// (a token's iat): the token was issued within [from, from+999] ms.
//
//	not synced                                           Unknown
//	its jti revoked                                      Revoked
//	its client's cutoff or its subject's revocation at E:
//	  issued (to the second) before E − Leeway           Revoked
//	  issued after E + Leeway                            Live, unless another rule says otherwise
//	  in between                                         Unknown (the clocks may disagree)
//	issued before the horizon + Leeway                   Unknown (its revocation may predate the log)
//	issued before the newest revocation let go + Leeway  Unknown (Forget: it may have been revoked)
//	not fresh                                            Unknown
//	otherwise                                            Live
//
// A revocation, once applied, stays true: Revoked is answered from a stale
// state too. Live needs a fresh one.
func (s *State) DecideFeed(now time.Time, q Query) Verdict {
	if !s.synced {
		return Unknown
	}
	if _, ok := s.tokens[q.JTI]; ok {
		return Revoked
	}
	lw := s.leewayMs
	from := q.Issued - q.Issued%1000 // the second of iat
	if q.Issued < 0 && q.Issued%1000 != 0 {
		from -= 1000
	}
	to := from + 999
	v := Live
	if c, ok := s.clients[q.Client]; ok {
		v = window(v, from, to, c.cutoff, lw)
	}
	if e, ok := s.subjects[q.Subject]; ok {
		v = window(v, from, to, e.at, lw)
	}
	if v == Revoked {
		return Revoked
	}
	if from < s.horizon+lw || from < s.forgotten+lw || !s.Fresh(now) {
		return Unknown
	}
	return v
}

// window is DecideFeed's rule for a revocation at (Unix ms) of a token
// issued within [from, to], given the verdict v so far.
func window(v Verdict, from, to, at, lw int64) Verdict {
	switch {
	case v == Revoked || to < at-lw:
		return Revoked
	case from <= at+lw:
		return Unknown
	}
	return v
}

// String is the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Live:
		return "live"
	case Revoked:
		return "revoked"
	}
	return "unknown"
}
