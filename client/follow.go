package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The revocation feed as the issuer serves it (its package revfeed): JWT
// types and SET event URIs.
const (
	typeSET       = "secevent+jwt"
	typeHeartbeat = "revocation-heartbeat+jwt"
	typeSnapshot  = "revocation-snapshot+jwt"
	typeStream    = "revocation-stream+jwt"

	eventTokenRevoked   = "https://snowtoken.dev/secevent/token-revoked"
	eventSubjectRevoked = "https://snowtoken.dev/secevent/subject-revoked"
	eventClientRevoked  = "https://snowtoken.dev/secevent/client-revoked"
)

// Bounds of what is read from the feed.
const (
	// maxFeedLine bounds one line of the stream (a SET is well under 1 KiB).
	maxFeedLine = 16 << 10
	// maxSnapshotBytes bounds the snapshot: about 60 bytes a revoked token.
	maxSnapshotBytes = 64 << 20
	// Reconnection backoff, doubled after each failure.
	feedBackoffMin = 50 * time.Millisecond
	feedBackoffMax = 5 * time.Second
	// feedPruneEvery is how often revoked tokens past their exp are forgotten.
	feedPruneEvery = 10 * time.Second
)

// errFeedReset: the issuer cannot resume the stream; fetch the snapshot.
var errFeedReset = errors.New("the issuer reset the stream")

// verdict is what the followed state says of a token.
type verdict int

const (
	unknown verdict = iota // stale, or not decidable locally
	live
	revoked
)

// feed follows {IssuerURL}/revocations/events (RevocationCheck Follow) and
// keeps the revocations in memory. Its lifecycle:
//
//	start (first Validate, or Start) ──▶ GET /revocations/events?nonce=N (no Last-Event-ID)
//	  ──▶ reset ──▶ GET /revocations?nonce=N' (snapshot: state, last, N') ──▶ GET /revocations/events?nonce=N'', Last-Event-ID: last
//	  ──▶ stream JWT (N'', signed at iat S after the request left at C): this clock reads issuer time x as ≥ x + (C − S)
//	  ──▶ revoked SETs applied, heartbeats signed at or after S make the state fresh until
//	      their iat_ms − age_ms + FeedThreshold + (C − S), read on this clock
//	  ──▶ stream ends, fails or brings a JWT that does not verify ──▶ backoff ──▶ reconnect from last
//	Close ──▶ the goroutine ends; the state goes stale
type feed struct {
	v                    *Validator
	eventsURL, snapURL   string
	parser               *jwt.Parser
	startOnce, closeOnce sync.Once
	cancel               context.CancelFunc
	done                 chan struct{} // closed when the goroutine ends
	fresh                chan struct{} // closed at the first fresh heartbeat
	freshOnce            sync.Once
	mu                   sync.RWMutex
	synced               bool   // a snapshot is applied
	epoch, last          string // of the state
	horizon              int64  // Unix ms: no revocation before it is in the state
	tokens               map[string]int64
	subjects, clients    map[string]int64
	freshUntil           time.Time // by Options.Now
	lastBeatMs           int64     // the iat_ms of the last heartbeat accepted: replays are refused
	newNonce             func() string
	pruned               time.Time
}

func newFeed(v *Validator, base string) *feed {
	return &feed{
		v: v, eventsURL: base + "/revocations/events", snapURL: base + "/revocations",
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(v.opts.Issuer), jwt.WithIssuedAt(), jwt.WithLeeway(v.opts.Leeway), jwt.WithTimeFunc(v.opts.Now)),
		fresh: make(chan struct{}), done: make(chan struct{}), newNonce: newNonce,
	}
}

// newNonce returns 256 random bits, base64url: a request's nonce.
func newNonce() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// conn is what one stream's first JWT told: the nonce sent, when the
// request left (this clock), and, once bound, when the issuer signed it
// (its clock) and the least offset of this clock from the issuer's.
type conn struct {
	nonce  string
	sent   time.Time
	bound  bool
	iatMs  int64
	offset time.Duration // this clock − the issuer's is at least this
}

// inWindow reports whether iatMs (the issuer's clock) is neither older than
// FeedThreshold + MaxClockSkew nor ahead by more than MaxClockSkew, on this
// clock at now.
func (f *feed) inWindow(iatMs int64, now time.Time) bool {
	at := time.UnixMilli(iatMs)
	skew := f.v.opts.MaxClockSkew
	return !at.Before(now.Add(-f.v.opts.FeedThreshold-skew)) && !at.After(now.Add(skew))
}

// start starts following, once.
func (f *feed) start() {
	f.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		go f.run(ctx)
	})
}

// close stops following and waits for the goroutine.
func (f *feed) close() {
	f.start() // so that done is closed
	f.closeOnce.Do(f.cancel)
	<-f.done
}

// Start begins following the revocation feed (RevocationCheck Follow) and
// waits until the state is fresh or ctx ends (an error wrapping
// ErrUnavailable). Validate starts following by itself at the first token;
// Start lets a service wait for the feed before it reports ready. Close
// stops it. Start is an error in any other mode.
func (v *Validator) Start(ctx context.Context) error {
	if v.feed == nil {
		return fmt.Errorf("%w: Start is for RevocationCheck Follow", ErrOptions)
	}
	v.feed.start()
	select {
	case <-v.feed.fresh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: the revocation feed is not fresh yet: %w", ErrUnavailable, ctx.Err())
	}
}

// Close stops following the revocation feed, if the Validator follows it,
// and waits until its goroutine has ended; from then on every token that
// needs the feed gets the WhenStale answer. It is safe to call more than
// once, and without Follow it does nothing.
func (v *Validator) Close() error {
	if v.feed != nil {
		v.feed.close()
	}
	return nil
}

// run follows the feed until ctx ends, reconnecting with backoff.
func (f *feed) run(ctx context.Context) {
	defer close(f.done)
	backoff := feedBackoffMin
	var lastLog time.Time
	resetBefore := false // the last stream ended in a reset too
	for ctx.Err() == nil {
		progressed, err := f.follow(ctx)
		if errors.Is(err, errFeedReset) {
			reset := resetBefore && !progressed
			resetBefore = true
			if err = f.snapshot(ctx); err == nil && !reset {
				continue // straight on to the stream after the snapshot
			}
			if err == nil {
				err = errors.New("the stream reset again right after a snapshot")
			}
		} else {
			resetBefore = false
		}
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff = feedBackoffMin
		}
		// One line a minute at most: a feed down for long does not flood.
		if now := time.Now(); now.Sub(lastLog) >= time.Minute {
			lastLog = now
			f.v.opts.Logger.Warn("snowtoken client: the revocation feed is interrupted; reconnecting", "url", f.eventsURL, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, feedBackoffMax)
	}
}

// request sends an authenticated GET.
func (f *feed) request(ctx context.Context, u string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	// RFC 6749 §2.3.1: form-urlencoded, then Basic.
	req.SetBasicAuth(url.QueryEscape(f.v.opts.FeedClientID), url.QueryEscape(f.v.opts.FeedClientSecret))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.v.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s answered %d", req.URL.Path, resp.StatusCode)
	}
	return resp, nil
}

// follow reads one stream until it ends. progressed reports whether a
// heartbeat was accepted on it.
func (f *feed) follow(ctx context.Context) (progressed bool, err error) {
	f.mu.RLock()
	hdr := map[string]string{"Accept": "text/event-stream"}
	if f.synced {
		hdr["Last-Event-ID"] = f.last
	}
	f.mu.RUnlock()
	c := &conn{nonce: f.newNonce(), sent: f.v.opts.Now()}
	// A stream that brings nothing for Timeout (a connection dead without a
	// word, or an issuer whose state is stale) is dropped and reconnected.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(f.v.opts.Timeout, cancel)
	defer idle.Stop()
	resp, err := f.request(ctx, f.eventsURL+"?nonce="+c.nonce, hdr)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, fmt.Errorf("content type %.40q, want text/event-stream", ct)
	}
	r := bufio.NewReaderSize(resp.Body, 4096)
	var p sseParser
	for {
		line, err := readLine(r)
		if err != nil {
			return progressed, err
		}
		idle.Reset(f.v.opts.Timeout)
		ev, ok := p.line(line)
		if !ok {
			continue
		}
		switch ev.name {
		case "stream":
			err = f.applyStream(ctx, c, ev.data)
		case "revoked":
			err = f.applySET(ctx, ev.id, ev.data)
		case "heartbeat":
			err = f.applyHeartbeat(ctx, c, ev.data)
			progressed = progressed || err == nil
		case "reset":
			return progressed, errFeedReset
		}
		if err != nil {
			return progressed, err
		}
	}
}

// readLine reads one line, without its end (LF, CRLF or CR is not split
// here: CR is dropped from the end), at most maxFeedLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxFeedLine {
			return "", fmt.Errorf("a line of the stream is over %d bytes", maxFeedLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, name, data string }

// sseParser assembles events from lines (the WHATWG event stream format,
// as much as the feed uses: id, event, data; comments and other fields are
// ignored; data lines are joined with "\n").
type sseParser struct {
	cur     sseEvent
	hasData bool
}

// line takes one line; it returns an event at the blank line that ends it.
func (p *sseParser) line(l string) (sseEvent, bool) {
	if l == "" {
		ev, ok := p.cur, p.cur.name != "" || p.hasData
		p.cur, p.hasData = sseEvent{}, false
		return ev, ok
	}
	if strings.HasPrefix(l, ":") {
		return sseEvent{}, false
	}
	field, value, _ := strings.Cut(l, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "id":
		p.cur.id = value
	case "event":
		p.cur.name = value
	case "data":
		if p.hasData {
			p.cur.data += "\n"
		}
		p.cur.data += value
		p.hasData = true
	}
	return sseEvent{}, false
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
// fail on exp anyway.
func (f *feed) pruneLocked(now time.Time) {
	f.pruned = now
	cut := now.Add(-f.v.opts.Leeway).Unix()
	for jti, exp := range f.tokens {
		if exp != 0 && exp < cut {
			delete(f.tokens, jti)
		}
	}
}

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
	f.tokens, f.subjects, f.clients = tokens, subjects, clients
	f.freshUntil = time.Time{}
	return nil
}

// decide says whether the token c is revoked, by the state:
//
//	its jti revoked                                      revoked
//	its client's cutoff or its subject's revocation at E:
//	  issued (iat, to the second) before E − Leeway      revoked
//	  issued after E + Leeway                            live, unless another rule says revoked
//	  in between                                         unknown (the clocks may disagree)
//	issued before Horizon + Leeway                       unknown (its revocation may predate the log)
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
	if from < f.horizon+lw || !now.Before(f.freshUntil) {
		return unknown
	}
	return v
}
