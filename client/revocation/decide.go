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
	// that found the token live, or zero. That check read the parents'
	// records too, so it vouches for them as for the token.
	Checked Mark
	// Parents are the tokens an exchanged token derives from (its parents
	// claim, at most jwtpolicy.MaxChain), each of the token's Subject;
	// none for any other token. The rules read them, never keep them.
	Parents []Parent
}

// Parent is one token a token derives from, as the rules need it: its jti,
// the client it was issued to, and when it was issued (as Query.Issued:
// the issuer reads its ID's time, a consumer its iat).
type Parent struct {
	JTI, Client string
	Issued      int64
}

// The cascade rule: a token is revoked when it, or any of its parents, is
// revoked, each parent judged by the same rule as a token of its own (its
// jti's entry, its client's cutoff and its subject's revocation against
// its own issued time, with the token's subject), the verdicts combined:
//
//	any Revoked        Revoked
//	else any Unknown   Unknown
//	else               Live
//
// Judging a parent on its own issued time, not the child's, closes the race
// of a revocation that lands between an exchange's check of its subject
// token and the minting of the child.

// combine is the cascade's combination of two verdicts.
func combine(a, b Verdict) Verdict {
	switch {
	case a == Revoked || b == Revoked:
		return Revoked
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return Live
}

// DecideLog is the issuer's rule (token.Revocations): what its follower's
// state says of a token at now, before Redis is read. Not fresh, Unknown;
// else the token and each of its parents (the cascade rule) by this table:
//
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
	v := s.logOne(Parent{q.JTI, q.Client, q.Issued}, q.Subject, q.Checked)
	for _, p := range q.Parents {
		if v == Revoked {
			break
		}
		v = combine(v, s.logOne(p, q.Subject, q.Checked))
	}
	return v
}

// logOne is DecideLog's table for one token t of subject.
func (s *State) logOne(t Parent, subject string, checked Mark) Verdict {
	if _, ok := s.tokens[t.JTI]; ok {
		return Revoked
	}
	if c, ok := s.clients[t.Client]; ok && t.Issued <= c.cutoff {
		return Revoked
	}
	e, ok := s.subjects[subject]
	switch {
	case checked >= s.start:
		if ok && e.seq > checked {
			return Unknown
		}
		return Live
	case ok:
		return Unknown
	case t.Issued <= s.horizon+s.leewayMs:
		return Unknown
	}
	return Live
}

// DecideFeed is the consuming service's rule (client.Follow): what the
// state it follows says of a token at now. Not synced, Unknown; else the
// token and each of its parents (the cascade rule) by this table, Issued
// taken to the second (a token's iat: it was issued within [from,
// from+999] ms):
//
//	its jti revoked                                      Revoked
//	its client's cutoff or its subject's revocation at E:
//	  issued (to the second) before E − Leeway           Revoked
//	  issued after E + Leeway                            Live, unless another rule says otherwise
//	  in between                                         Unknown (the clocks may disagree)
//	issued before the horizon + Leeway                   Unknown (its revocation may predate the log)
//	issued before the newest revocation let go + Leeway  Unknown (Forget: it may have been revoked)
//	otherwise                                            Live
//
// and then, what is Live so far: not fresh, Unknown. A revocation, once
// applied, stays true: Revoked is answered from a stale state too. Live
// needs a fresh one.
func (s *State) DecideFeed(now time.Time, q Query) Verdict {
	if !s.synced {
		return Unknown
	}
	v := s.feedOne(Parent{q.JTI, q.Client, q.Issued}, q.Subject)
	for _, p := range q.Parents {
		if v == Revoked {
			break
		}
		v = combine(v, s.feedOne(p, q.Subject))
	}
	if v == Live && !s.Fresh(now) {
		return Unknown
	}
	return v
}

// feedOne is DecideFeed's table for one token t of subject.
func (s *State) feedOne(t Parent, subject string) Verdict {
	if _, ok := s.tokens[t.JTI]; ok {
		return Revoked
	}
	lw := s.leewayMs
	from := t.Issued - t.Issued%1000 // the second of iat
	if t.Issued < 0 && t.Issued%1000 != 0 {
		from -= 1000
	}
	to := from + 999
	v := Live
	if c, ok := s.clients[t.Client]; ok {
		v = window(v, from, to, c.cutoff, lw)
	}
	if e, ok := s.subjects[subject]; ok {
		v = window(v, from, to, e.at, lw)
	}
	if v == Revoked {
		return Revoked
	}
	if from < s.horizon+lw || from < s.forgotten+lw {
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
