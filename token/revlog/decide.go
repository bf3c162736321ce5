package revlog

import (
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// What validation asks of a Follower (token.Revocations) and what this
// replica notes of its own revocations before their entries come
// (token.LocalRevocations), all under f.mu.

// TokenRevokedHere records that this replica revoked the token jti,
// whose exp is exp (Unix s; 0 unknown: remembered for the retention), as
// its log entry will (token.LocalRevocations).
func (f *Follower) TokenRevokedHere(jti string, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Now()
	until := now.Add(f.opts.Retention).Unix()
	if exp > 0 {
		until = exp + int64(f.opts.Leeway/time.Second) + 1
	}
	if until > now.Unix() {
		f.st.tokens[jti] = max(f.st.tokens[jti], until)
		f.version++
	}
}

// SubjectRevokedHere records, until the log's entry comes, that this
// replica revoked subject: every check marked before now is void for its
// tokens (token.LocalRevocations).
func (f *Follower) SubjectRevokedHere(subject string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.seq++
	at := f.opts.Now().UnixMilli()
	if cur, ok := st.subjects[subject]; ok {
		at = max(at, cur.at)
	}
	st.subjects[subject] = subjectEntry{at: at, seq: st.seq, local: true}
	f.version++
}

// ClientRevokedHere records, until the log's entry comes, that this
// replica revoked client's tokens up to cutoff, Unix ms
// (token.LocalRevocations).
func (f *Follower) ClientRevokedHere(client string, cutoff int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.st.clients[client]; !ok || cutoff > cur.cutoff {
		f.st.clients[client] = clientEntry{cutoff: cutoff, at: f.opts.Now().UnixMilli()}
		f.version++
	}
}

// Mark returns the follower's position (token.Revocations).
func (f *Follower) Mark() token.LogMark {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.seq
}

// Decide tells what the log says of a token at now (token.Revocations,
// whose doc gives the rule).
func (f *Follower) Decide(now time.Time, q token.LogQuery) token.LogVerdict {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.isFresh(now) {
		return token.LogUnknown
	}
	st := f.st
	if _, ok := st.tokens[q.JTI]; ok {
		return token.LogRevoked
	}
	if c, ok := st.clients[q.Client]; ok && q.Issued <= c.cutoff {
		return token.LogRevoked
	}
	s, ok := st.subjects[q.Subject]
	switch {
	case q.Checked >= st.start:
		if ok && s.seq > q.Checked {
			return token.LogUnknown // the subject was revoked since Redis said live
		}
		return token.LogLive
	case ok:
		return token.LogUnknown // only Redis's markers tell which of its tokens are before the entry
	case q.Issued <= st.horizon+f.opts.Leeway.Milliseconds():
		return token.LogUnknown // a revocation of it may predate the log
	}
	return token.LogLive
}

// TokenRevoked reports whether the log revoked the token jti.
func (f *Follower) TokenRevoked(jti string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.st.tokens[jti]
	return ok
}

// SubjectMarker is the latest marker the log gave sub.
func (f *Follower) SubjectMarker(sub string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.subjects[sub]
	return s.marker, ok
}

// ClientCutoff is the latest time (Unix ms) up to which the log revoked
// client's tokens; math.MaxInt64 when an entry's time did not parse (all
// of them: fail closed).
func (f *Follower) ClientCutoff(client string) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.st.clients[client]
	return c.cutoff, ok
}
