package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The snapshot (GET /revocations): the whole state, fetched when the
// issuer cannot resume the stream.

type snapshotClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Nonce      string `json:"nonce"`
	Epoch      string `json:"epoch"`
	Last       string `json:"last"`
	Horizon    int64  `json:"horizon"`
	Tokens     []struct {
		JTI string `json:"jti"`
		Exp int64  `json:"exp"`
	} `json:"tokens"`
	Subjects []struct {
		Subject string `json:"sub"`
		At      int64  `json:"at"`
	} `json:"subjects"`
	Clients []struct {
		ClientID string `json:"client_id"`
		Cutoff   int64  `json:"cutoff"`
	} `json:"clients"`
}

// snapshot fetches GET /revocations and makes it the state, stale until a
// heartbeat of the stream that resumes after it.
func (f *feed) snapshot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, f.v.opts.Timeout)
	defer cancel()
	nonce := f.newNonce()
	resp, err := f.request(ctx, f.snapURL+"?nonce="+nonce, map[string]string{"Accept": "application/jwt"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSnapshotBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxSnapshotBytes {
		return fmt.Errorf("the snapshot is over %d bytes", maxSnapshotBytes)
	}
	var cl snapshotClaims
	if err := f.verify(ctx, string(body), typeSnapshot, &cl); err != nil {
		return err
	}
	if cl.Nonce != nonce {
		return errors.New("a snapshot for another request (its nonce is not ours)")
	}
	if !f.inWindow(cl.IssuedAtMs, f.v.opts.Now()) {
		return errors.New("a snapshot signed outside MaxClockSkew of this clock")
	}
	last, ok := parseEventID(cl.Last)
	if !ok || last.epoch != cl.Epoch {
		return errors.New("a snapshot whose last does not parse")
	}
	tokens := make(map[string]int64, len(cl.Tokens))
	for _, t := range cl.Tokens {
		tokens[t.JTI] = t.Exp
	}
	subjects := make(map[string]int64, len(cl.Subjects))
	for _, s := range cl.Subjects {
		subjects[s.Subject] = max(subjects[s.Subject], s.At)
	}
	clients := make(map[string]int64, len(cl.Clients))
	for _, c := range cl.Clients {
		clients[c.ClientID] = max(clients[c.ClientID], c.Cutoff)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced, f.epoch, f.last, f.horizon = true, cl.Epoch, cl.Last, cl.Horizon
	f.tokens, f.subjects, f.clients, f.forgotten = tokens, subjects, clients, 0
	f.freshUntil = time.Time{}
	return nil
}
