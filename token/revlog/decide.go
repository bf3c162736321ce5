package revlog

import (
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// What validation asks of a Follower (token.Revocations) and what this
// replica notes of its own revocations before their entries come
// (token.LocalRevocations), all under f.mu: the core's State answers
// (revocation.State.DecideLog and its notes).

// TokenRevokedHere records that this replica revoked the token jti,
// whose exp is exp (Unix s; 0 unknown: remembered for the retention), as
// its log entry will (token.LocalRevocations).
func (f *Follower) TokenRevokedHere(jti string, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.core.NoteToken(jti, exp, f.opts.Now()) {
		f.version++
	}
}

// SubjectRevokedHere records, until the log's entry comes, that this
// replica revoked subject: every check marked before now is void for its
// tokens (token.LocalRevocations).
func (f *Follower) SubjectRevokedHere(subject string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.core.NoteSubject(subject, f.opts.Now())
	f.version++
}

// ClientRevokedHere records, until the log's entry comes, that this
// replica revoked client's tokens up to cutoff, Unix ms
// (token.LocalRevocations).
func (f *Follower) ClientRevokedHere(client string, cutoff int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.core.NoteClient(client, cutoff, f.opts.Now()) {
		f.version++
	}
}

// Mark returns the follower's position (token.Revocations).
func (m *memory) Mark() token.LogMark {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.Mark()
}

// Decide tells what the log says of a token at now (token.Revocations):
// the issuer's rule, revocation.State.DecideLog.
func (m *memory) Decide(now time.Time, q token.LogQuery) token.LogVerdict {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.DecideLog(now, q)
}

// TokenRevoked reports whether the log revoked the token jti.
func (m *memory) TokenRevoked(jti string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.TokenRevoked(jti)
}

// SubjectMarker is the latest marker the log gave sub.
func (m *memory) SubjectMarker(sub string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.SubjectMarker(sub)
}

// ClientCutoff is the latest time (Unix ms) up to which the log revoked
// client's tokens; math.MaxInt64 when an entry's time did not parse (all
// of them: fail closed).
func (m *memory) ClientCutoff(client string) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.ClientCutoff(client)
}
