package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
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

// feedEvent is a SET's event payload.
type feedEvent struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	At     int64  `json:"at"`
	Exp    int64  `json:"exp"`
	Cutoff int64  `json:"cutoff"`
}

type setClaims struct {
	jwt.RegisteredClaims
	Events map[string]feedEvent `json:"events"`
}

// eventID is an event ID parsed: epoch, then the stream ID.
type eventID struct {
	epoch   string
	ms, seq uint64
}

func parseEventID(s string) (eventID, bool) {
	epoch, sid, ok := strings.Cut(s, "-")
	ms, seq, ok2 := strings.Cut(sid, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	return eventID{epoch, a, b}, ok && ok2 && epoch != "" && err1 == nil && err2 == nil
}

// after reports whether a comes after b.
func (a eventID) after(b eventID) bool { return a.ms > b.ms || a.ms == b.ms && a.seq > b.seq }

// applySET verifies and applies one revoked event whose SSE id is id. An
// event that does not follow the last one applied, in its epoch, is an
// error: the stream is dropped and resumed from the last one applied.
func (f *feed) applySET(ctx context.Context, id, raw string) error {
	var cl setClaims
	if err := f.verify(ctx, raw, typeSET, &cl); err != nil {
		return err
	}
	if cl.ID != id || len(cl.Events) != 1 {
		return errors.New("a SET whose jti is not its event's id, or with other than one event")
	}
	var uri string
	var ev feedEvent
	for uri, ev = range cl.Events {
	}
	want := map[string]string{"t": eventTokenRevoked, "s": eventSubjectRevoked, "c": eventClientRevoked}[ev.Kind]
	if want == "" || uri != want || ev.ID != id || ev.Key == "" {
		return errors.New("a SET whose event is not one of the feed's")
	}
	eid, ok := parseEventID(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	last, _ := parseEventID(f.last)
	if !ok || !f.synced || eid.epoch != last.epoch || !eid.after(last) {
		return errors.New("an event out of order or of another epoch")
	}
	switch ev.Kind {
	case "t":
		f.tokens[ev.Key] = ev.Exp
	case "s":
		f.subjects[ev.Key] = max(f.subjects[ev.Key], ev.At)
	case "c":
		f.clients[ev.Key] = max(f.clients[ev.Key], ev.Cutoff)
	}
	f.last = id
	return nil
}

type streamClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Nonce      string `json:"nonce"`
}

// applyStream verifies a stream's first JWT: it must carry c's nonce, be
// the first, and be signed within the clock window. It binds c: the issuer
// signed it after the request left, so this clock less the issuer's is at
// least c.sent − its iat_ms.
func (f *feed) applyStream(ctx context.Context, c *conn, raw string) error {
	var cl streamClaims
	if err := f.verify(ctx, raw, typeStream, &cl); err != nil {
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

type heartbeatClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Epoch      string `json:"epoch"`
	Last       string `json:"last"`
	AgeMs      int64  `json:"age_ms"`
}

// applyHeartbeat verifies a heartbeat of the stream c and, when its last is
// applied here and it is newer than the last one accepted, makes the state
// fresh until FeedThreshold less its age after it was signed, read on this
// clock by c's offset (never from when it arrives: a heartbeat held back
// is that much older). A heartbeat before c's stream JWT is an error; one
// signed before it, or outside the clock window, is ignored. A heartbeat
// that vouches for an event not applied here is an error.
func (f *feed) applyHeartbeat(ctx context.Context, c *conn, raw string) error {
	var cl heartbeatClaims
	if err := f.verify(ctx, raw, typeHeartbeat, &cl); err != nil {
		return err
	}
	if !c.bound {
		return errors.New("a heartbeat before the stream JWT")
	}
	if cl.IssuedAtMs < c.iatMs {
		return nil // signed before this connection: a replay, or the tick before it; no fresher
	}
	hl, ok := parseEventID(cl.Last)
	if !ok || cl.AgeMs < 0 || hl.epoch != cl.Epoch {
		return errors.New("a heartbeat that does not parse")
	}
	now := f.v.opts.Now()
	f.mu.Lock()
	last, _ := parseEventID(f.last)
	switch {
	case !f.synced || hl.epoch != last.epoch:
		f.mu.Unlock()
		return errors.New("a heartbeat of another epoch")
	case hl.after(last):
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
	f.freshUntil = time.UnixMilli(cl.IssuedAtMs - cl.AgeMs).Add(f.v.opts.FeedThreshold + c.offset)
	if now.Sub(f.pruned) >= feedPruneEvery {
		f.pruneLocked(now)
	}
	fresh := now.Before(f.freshUntil)
	f.mu.Unlock()
	if fresh {
		f.freshOnce.Do(func() { close(f.fresh) })
	}
	return nil
}

// pruneLocked forgets revoked tokens past their exp and the leeway: they
// fail on exp anyway. It lets go of the revocations of subjects and
// clients older than FeedRetention and the leeway, noting the newest of them
// (forgotten): decide cannot tell about a token issued before it.
func (f *feed) pruneLocked(now time.Time) {
	f.pruned = now
	cut := now.Add(-f.v.opts.Leeway).Unix()
	for jti, exp := range f.tokens {
		if exp != 0 && exp < cut {
			delete(f.tokens, jti)
		}
	}
	cutMs := now.Add(-f.v.opts.FeedRetention - f.v.opts.Leeway).UnixMilli()
	for _, m := range [...]map[string]int64{f.subjects, f.clients} {
		for key, at := range m {
			if at < cutMs {
				delete(m, key)
				f.forgotten = max(f.forgotten, at)
			}
		}
	}
}
