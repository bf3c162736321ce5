package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// What the feed brings, verified with the JWKS and applied to the
// followed state: revoked events (SETs), the stream's first JWT that binds
// this clock to the issuer's, and heartbeats that make the state fresh.

// inWindow reports whether iatMs (the issuer's clock) is neither older than
// FeedThreshold + MaxClockSkew nor ahead by more than MaxClockSkew, on this
// clock at now.
func (f *feed) inWindow(iatMs int64, now time.Time) bool {
	at := time.UnixMilli(iatMs)
	skew := f.v.opts.MaxClockSkew
	return !at.Before(now.Add(-f.v.opts.FeedThreshold-skew)) && !at.After(now.Add(skew))
}

// verify checks raw as a JWT of type typ signed by one of the issuer's keys
// (the JWKS Local mode already fetches; EdDSA only), with the Validator's
// issuer, into claims.
func (f *feed) verify(ctx context.Context, raw, typ string, claims jwt.Claims) error {
	_, err := f.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		if got, _ := t.Header["typ"].(string); !strings.EqualFold(got, typ) {
			return nil, fmt.Errorf("typ %.40q, want %s", got, typ)
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid")
		}
		return f.v.keys.key(ctx, kid)
	})
	if err != nil {
		return fmt.Errorf("a %s that does not verify: %w", typ, err)
	}
	return nil
}

// applySET verifies and applies one revoked event whose SSE id is id. An
// event that does not follow the last one applied, in its epoch, is an
// error: the stream is dropped and resumed from the last one applied.
func (f *feed) applySET(ctx context.Context, id, raw string) error {
	var cl revocation.SETClaims
	if err := f.verify(ctx, raw, revocation.TypeSET, &cl); err != nil {
		return err
	}
	if cl.ID != id || len(cl.Events) != 1 {
		return errors.New("a SET whose jti is not its event's id, or with other than one event")
	}
	var uri string
	var ev revocation.EventPayload
	for uri, ev = range cl.Events {
	}
	want, ok := ev.Kind.URI()
	if !ok || uri != want || ev.ID != id || ev.Key == "" {
		return errors.New("a SET whose event is not one of the feed's")
	}
	now := f.v.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.state.Apply(ev.Event(), now); err != nil {
		return fmt.Errorf("an event out of order or of another epoch: %w", err)
	}
	return nil
}

// applyStream verifies a stream's first JWT: it must carry c's nonce, be
// the first, and be signed within the clock window. It binds c: the issuer
// signed it after the request left, so this clock less the issuer's is at
// least c.sent − its iat_ms.
func (f *feed) applyStream(ctx context.Context, c *conn, raw string) error {
	var cl revocation.StreamClaims
	if err := f.verify(ctx, raw, revocation.TypeStream, &cl); err != nil {
		return err
	}
	switch now := f.v.opts.Now(); {
	case c.bound:
		return errors.New("a second stream JWT")
	case cl.Nonce != c.nonce:
		return errors.New("a stream JWT for another request (its nonce is not ours)")
	case !f.inWindow(cl.IssuedAtMs, now):
		return errors.New("a stream JWT signed outside MaxClockSkew of this clock")
	}
	c.bound, c.iatMs = true, cl.IssuedAtMs
	c.offset = c.sent.Sub(time.UnixMilli(cl.IssuedAtMs))
	return nil
}

// applyHeartbeat verifies a heartbeat of the stream c and, when its last is
// applied here and it is newer than the last one accepted, makes the state
// fresh until FeedThreshold less its age after it was signed, read on this
// clock by c's offset (never from when it arrives: a heartbeat held back
// is that much older). A heartbeat before c's stream JWT is an error; one
// signed before it, or outside the clock window, is ignored. A heartbeat
// that vouches for an event not applied here is an error.
func (f *feed) applyHeartbeat(ctx context.Context, c *conn, raw string) error {
	var cl revocation.HeartbeatClaims
	if err := f.verify(ctx, raw, revocation.TypeHeartbeat, &cl); err != nil {
		return err
	}
	if !c.bound {
		return errors.New("a heartbeat before the stream JWT")
	}
	if cl.IssuedAtMs < c.iatMs {
		return nil // signed before this connection: a replay, or the tick before it; no fresher
	}
	hl, err := revocation.ParseEventID(cl.Last)
	if err != nil || cl.AgeMs < 0 || hl.Epoch != cl.Epoch {
		return errors.New("a heartbeat that does not parse")
	}
	now := f.v.opts.Now()
	f.mu.Lock()
	last := f.state.Last()
	switch {
	case !f.state.Synced() || !hl.SameEpoch(last):
		f.mu.Unlock()
		return errors.New("a heartbeat of another epoch")
	case last.Less(hl.StreamID):
		f.mu.Unlock()
		return errors.New("a heartbeat for an event not received")
	case cl.IssuedAtMs <= f.lastBeatMs:
		f.mu.Unlock()
		return nil // an old one again (a reconnection, a replay): no fresher
	case !f.inWindow(cl.IssuedAtMs, now):
		f.mu.Unlock()
		return nil // held back too long, or a clock out of step: staleness runs
	}
	f.lastBeatMs = cl.IssuedAtMs
	f.state.Heard(time.UnixMilli(cl.IssuedAtMs-cl.AgeMs).Add(c.offset), f.v.opts.FeedThreshold)
	if now.Sub(f.pruned) >= feedPruneEvery {
		// Revoked tokens past their exp and the leeway fail on exp anyway;
		// subjects' and clients' revocations past FeedRetention and the
		// leeway are let go, and a token issued before the newest of them
		// is one the state cannot tell of (revocation.State.Forget).
		f.pruned = now
		f.state.Forget(now)
	}
	fresh := f.state.Fresh(now)
	f.mu.Unlock()
	if fresh {
		f.freshOnce.Do(func() { close(f.fresh) })
	}
	return nil
}
