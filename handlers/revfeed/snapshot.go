package revfeed

import (
	"fmt"
	"net/http"

	"github.com/golang-jwt/jwt/v5"
)

// SnapshotClaims are the snapshot's claims: the whole state.
type SnapshotClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64           `json:"iat_ms"`
	Nonce      string          `json:"nonce,omitempty"` // the request's
	Epoch      string          `json:"epoch"`
	Last       string          `json:"last"`
	Horizon    int64           `json:"horizon"`
	Fresh      bool            `json:"fresh"`
	AgeMs      int64           `json:"age_ms"`
	Tokens     []RevokedToken  `json:"tokens"`
	Subjects   []RevokedName   `json:"subjects"`
	Clients    []RevokedClient `json:"clients"`
}

// RevokedToken is a revoked token in the snapshot: its jti and exp (Unix s,
// 0 when unknown).
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
// (Unix ms) are revoked.
type RevokedClient struct {
	ClientID string `json:"client_id"`
	Cutoff   int64  `json:"cutoff"`
	At       int64  `json:"at"`
}

// Snapshot writes the whole state as one signed JWT (application/jwt),
// with the request's nonce. An error is returned, with nothing written, for
// a request that is refused (a malformed nonce).
func (f *Feed) Snapshot(w http.ResponseWriter, r *http.Request) error {
	nonce, err := CheckNonce(r)
	if err != nil {
		return err
	}
	now := f.opts.Now()
	snap := f.opts.Source.Snapshot(now)
	cl := &SnapshotClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Nonce: nonce, Epoch: snap.Epoch, Last: snap.Last, Horizon: snap.Horizon,
		Fresh: snap.Fresh, AgeMs: max(snap.Age.Milliseconds(), 0),
		Tokens:   make([]RevokedToken, 0, len(snap.Tokens)),
		Subjects: make([]RevokedName, 0, len(snap.Subjects)),
		Clients:  make([]RevokedClient, 0, len(snap.Clients)),
	}
	for _, e := range snap.Tokens {
		cl.Tokens = append(cl.Tokens, RevokedToken{JTI: e.Key, Exp: e.Exp, At: e.At})
	}
	for _, e := range snap.Subjects {
		cl.Subjects = append(cl.Subjects, RevokedName{Subject: e.Key, At: e.At})
	}
	for _, e := range snap.Clients {
		cl.Clients = append(cl.Clients, RevokedClient{ClientID: e.Key, Cutoff: e.Cutoff, At: e.At})
	}
	raw, err := f.opts.Sign(TypeSnapshot, cl)
	if err != nil {
		return fmt.Errorf("revfeed: signing the snapshot: %w", err)
	}
	w.Header().Set("Content-Type", "application/jwt")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(raw))
	}
	return nil
}
