package revocation

import (
	"encoding/json"

	"github.com/golang-jwt/jwt/v5"
)

// The feed's messages: the JWT type (typ) of each and its claims, as the
// issuer signs them (package revfeed) and a consumer verifies them
// (client.Follow).
const (
	// TypeSET is a revoked event: one Security Event Token (RFC 8417).
	TypeSET = "secevent+jwt"
	// TypeStream is a stream's first JWT, bound to its request.
	TypeStream = "revocation-stream+jwt"
	// TypeHeartbeat vouches that the issuer's state is fresh.
	TypeHeartbeat = "revocation-heartbeat+jwt"
	// TypeSnapshot is the whole state (GET /revocations).
	TypeSnapshot = "revocation-snapshot+jwt"
)

// EventPayload is a SET's event (its one member of events): the log entry.
type EventPayload struct {
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Key    string `json:"key"`
	At     int64  `json:"at"`
	Exp    int64  `json:"exp,omitempty"`
	Cutoff int64  `json:"cutoff,omitempty"`
}

// Payload is ev as a SET carries it.
func (ev Event) Payload() EventPayload {
	return EventPayload{ID: ev.ID, Kind: ev.Kind, Key: ev.Key, At: ev.At, Exp: ev.Exp, Cutoff: ev.Cutoff}
}

// Event is the event p carries.
func (p EventPayload) Event() Event {
	return Event{ID: p.ID, Kind: p.Kind, Key: p.Key, At: p.At, Exp: p.Exp, Cutoff: p.Cutoff}
}

// SETClaims are a Security Event Token's claims (RFC 8417 §2.2): jti is the
// event's ID, events holds one URI of ours (Kind.URI).
type SETClaims struct {
	jwt.RegisteredClaims
	Events map[string]EventPayload `json:"events"`
}

// StreamClaims are the claims of a stream's first JWT: the nonce of the
// request it answers and when it was signed.
type StreamClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Nonce      string `json:"nonce,omitempty"`
}

// HeartbeatClaims are a heartbeat's claims: the issuer's state held every
// event up to Last, AgeMs before IssuedAtMs.
type HeartbeatClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Epoch      string `json:"epoch"`
	Last       string `json:"last"`
	AgeMs      int64  `json:"age_ms"`
	Horizon    int64  `json:"horizon"`
	// Nonce is the poll's nonce on a heartbeat signed for a poll's answer
	// (PollRequest.Nonce); a stream's heartbeats have none (its first JWT
	// carries the stream's).
	Nonce string `json:"nonce,omitempty"`
}

// SnapshotClaims are the snapshot's claims: the request's own members
// (SnapshotStamp) and the whole state (SnapshotState).
type SnapshotClaims struct {
	SnapshotStamp
	SnapshotState
}

// SnapshotStamp are the members of a snapshot that are its request's own:
// when it was signed, the request's nonce, and whether the state was fresh
// then (the issuer's Status, for the state version it holds; false when the
// state moved on while it was built).
type SnapshotStamp struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Nonce      string `json:"nonce,omitempty"` // the request's
	Fresh      bool   `json:"fresh"`
	AgeMs      int64  `json:"age_ms"`
}

// SnapshotState is the state a snapshot holds: the same in every snapshot
// of one state version (Status.Version), which the issuer encodes once for
// all of them.
type SnapshotState struct {
	Epoch    string          `json:"epoch"`
	Last     string          `json:"last"`
	Horizon  int64           `json:"horizon"`
	Tokens   []RevokedToken  `json:"tokens"`
	Subjects []RevokedName   `json:"subjects"`
	Clients  []RevokedClient `json:"clients"`
}

// RevokedToken is a revoked token in the snapshot: its jti and exp (Unix s,
// 0 when unknown), and its entry's time (Unix ms, 0 when unknown).
type RevokedToken struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp,omitempty"`
	At  int64  `json:"at"`
}

// RevokedName is a subject whose tokens were revoked at At (Unix ms).
type RevokedName struct {
	Subject string `json:"sub"`
	At      int64  `json:"at"`
}

// RevokedClient is a client whose tokens with an ID time at or before Cutoff
// (Unix ms) are revoked, by an entry of At (Unix ms).
type RevokedClient struct {
	ClientID string `json:"client_id"`
	Cutoff   int64  `json:"cutoff"`
	At       int64  `json:"at"`
}

// PollRequest is a poll (RFC 8936 §2.4). The issuer keeps no state per
// receiver: the receiver's position is the latest event ID it acks (an
// event's jti, or a snapshot's last), and setErrs are read and dropped.
// Nonce is ours: if given, the answer's heartbeat carries it, so that a
// receiver that sends a new one with every poll can tell a heartbeat signed
// for this poll from a recorded answer replayed to it.
type PollRequest struct {
	Ack               []string                   `json:"ack"`
	SetErrs           map[string]json.RawMessage `json:"setErrs"`
	MaxEvents         *int                       `json:"maxEvents"`
	ReturnImmediately bool                       `json:"returnImmediately"`
	Nonce             string                     `json:"nonce"`
}

// PollResponse is a poll's answer (RFC 8936 §2.5), with two members of
// ours: reset (the position cannot be resumed: fetch the snapshot and poll
// with its last acked) and heartbeat (the stream's heartbeat, signed for
// this answer, present only while the issuer's state is fresh; it vouches
// for every event up to its last).
type PollResponse struct {
	Sets          map[string]string `json:"sets"`
	MoreAvailable bool              `json:"moreAvailable"`
	Reset         bool              `json:"reset,omitempty"`
	Heartbeat     string            `json:"heartbeat,omitempty"`
}
