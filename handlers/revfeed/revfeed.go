// Package revfeed serves the revocation log a revlog.Follower keeps in
// memory (Source) to consuming services over HTTP, so that a service
// validating tokens locally (client.Local with Follow) sees every
// revocation within a heartbeat or two, and knows when it cannot.
//
//	GET  /revocations/events   Server-Sent Events: revoked, heartbeat, reset   (Events)
//	GET  /revocations          the whole state, one signed JWT                 (Snapshot)
//	POST /revocations/poll     RFC 8936-shaped poll of the same events          (Poll)
//
// The handlers (package handlers) authenticate the client (HTTP Basic, a
// client with revocation_feed or an admin) before calling any of these.
//
// # The stream
//
//	GET /revocations/events?nonce=<N>  Last-Event-ID: <epoch>-<ms>-<seq>
//	  ──▶ resumable (Source.Since ok) ──▶ first, signed at connect:
//	        event: stream
//	        data: <JWT>                 typ revocation-stream+jwt {iss, iat, iat_ms, nonce}
//	      then every event after it, then live:
//	        id: <epoch>-<ms>-<seq>      one per revocation, in log order
//	        event: revoked
//	        data: <SET>                 RFC 8417, typ secevent+jwt
//
//	        event: heartbeat            every Heartbeat while the Source is Fresh, never while it is not
//	        data: <JWT>                 typ revocation-heartbeat+jwt {iss, iat, iat_ms, epoch, last, age_ms, horizon}
//	  ──▶ not resumable (no Last-Event-ID, another epoch, older than the follower keeps):
//	        event: reset                and the stream ends: GET /revocations, then
//	        data: {}                    reconnect with Last-Event-ID = the snapshot's last
//
// A heartbeat is written only after every event up to its last: a consumer
// that has applied last when the heartbeat arrives holds every revocation
// the issuer's state held age_ms before it was signed. A heartbeat is
// signed once per tick, by one goroutine, for every subscriber (it runs
// while there is one), and a SET once per event (a bounded cache), so
// the signing cost does not grow with the subscribers.
//
// # Binding a stream to its request
//
// The feed may pass through proxies that cannot forge it but can hold it
// back or replay it. The consumer sends a fresh random nonce with each
// request (?nonce=, CheckNonce); the stream's first JWT, signed once per
// connection, carries it with the time it was signed, and so does the
// snapshot. The stream JWT tells the consumer that the issuer's clock read
// iat_ms after it sent its request: it counts each later heartbeat from
// its iat_ms by that reading (never from when it arrives), and refuses
// heartbeats signed before it. A proxy holding heartbeats back only makes
// them arrive older; a recorded stream replayed on another connection
// lacks that connection's nonce. The shared heartbeat stays one signature
// a tick, and a connection costs one more: at 1000 subscribers that is 40
// signatures a second, plus the reconnections, not 40,000.
//
// A subscriber whose
// writes do not complete within WriteTimeout is dropped: nothing is queued
// for it (each subscriber reads the Source from where it is), and it
// resumes with Last-Event-ID. Past MaxSubscribers a new one is refused
// (ErrBusy: 503).
//
// Every JWT is signed by the issuer's current signing key (Options.Sign,
// token.Service.SignEvent) and verifies with its JWKS, so the feed may pass
// through proxies that cannot forge it. A reset is not signed: a forged one
// costs the consumer a snapshot, which is.
package revfeed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/revlog"
)

// Source is what the feed serves: a revlog.Follower.
type Source interface {
	// Since returns up to max events applied after the event whose ID is after, oldest first;
	// ok is false when after cannot be resumed from (another epoch, or older than the follower keeps): reset.
	Since(after string, max int) (evs []revlog.Event, ok bool)
	// Changed returns a channel closed at the next change: an event applied, a heartbeat accepted, a resync.
	Changed() <-chan struct{}
	// Status is the follower's status at now.
	Status(now time.Time) revlog.Status
	// Snapshot is the whole state at now.
	Snapshot(now time.Time) revlog.Snapshot
}

// Defaults of Options.
const (
	DefaultHeartbeat      = 25 * time.Millisecond
	DefaultMaxSubscribers = 1000
	DefaultWriteTimeout   = 2 * time.Second
	DefaultPage           = 500
	// MaxHeartbeat is the longest Heartbeat allowed: consumers count on one
	// at least this often.
	MaxHeartbeat = 50 * time.Millisecond
	// maxIDLen bounds a Last-Event-ID or an ack: an epoch (32 hex digits)
	// and a stream ID (two uint64).
	maxIDLen = 80
	// setCacheSize is how many signed SETs are kept for other subscribers.
	setCacheSize = 4096
	// MinNonceLen and MaxNonceLen bound a nonce: 128 bits base64url
	// (unpadded) at least.
	MinNonceLen = 22
	MaxNonceLen = 128
)

// JWT types (typ) and SET event URIs.
const (
	TypeSET       = "secevent+jwt"
	TypeHeartbeat = "revocation-heartbeat+jwt"
	TypeSnapshot  = "revocation-snapshot+jwt"
	TypeStream    = "revocation-stream+jwt"

	EventTokenRevoked   = "https://snowtoken.dev/secevent/token-revoked"
	EventSubjectRevoked = "https://snowtoken.dev/secevent/subject-revoked"
	EventClientRevoked  = "https://snowtoken.dev/secevent/client-revoked"
)

// Errors of the feed.
var (
	// ErrBusy: MaxSubscribers follow the stream already.
	ErrBusy = errors.New("revfeed: too many subscribers")
	// ErrOptions: an option is missing or out of range.
	ErrOptions = errors.New("revfeed: invalid options")
)

// Options configures a Feed. Source, Sign and Issuer are required; zero
// values of the rest mean the defaults above.
type Options struct {
	Source Source
	// Sign signs claims as a JWT of type typ with the issuer's current
	// signing key (token.Service.SignEvent).
	Sign func(typ string, claims jwt.Claims) (string, error)
	// Issuer is the iss of everything signed.
	Issuer string
	// Heartbeat is how often a heartbeat is sent while the Source is Fresh;
	// at most MaxHeartbeat.
	Heartbeat time.Duration
	// MaxSubscribers bounds the streams served at once.
	MaxSubscribers int
	// WriteTimeout bounds each write of a stream (with its flush): a
	// subscriber that does not read is dropped after it.
	WriteTimeout time.Duration
	// Page is how many events are read from the Source at a time, and the
	// most a poll answers with.
	Page int
	// PollWait is how long a poll without returnImmediately waits for an
	// event, at most.
	PollWait time.Duration
	// Draining, if set and true, ends the streams at their next tick, so
	// that a server shutting down is not held by them (the consumers
	// reconnect to another replica).
	Draining func() bool
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives write failures, at debug. Nil means slog.Default().
	Logger *slog.Logger
}

// Feed serves one Source. It is safe for concurrent use.
type Feed struct {
	opts Options
	subs atomic.Int64

	mu   sync.Mutex
	beat *beat         // the latest tick's
	stop chan struct{} // closed to stop the ticker; nil when it is not running

	sets setCache
}

// beat is one tick: the heartbeat signed then (empty while the Source was
// not Fresh) and a channel closed at the next tick.
type beat struct {
	jwt  string
	last string
	at   time.Time // when it was signed
	ms   int64     // its iat_ms
	next chan struct{}
}

// New returns a Feed.
func New(opts Options) (*Feed, error) {
	switch {
	case opts.Source == nil || opts.Sign == nil || opts.Issuer == "":
		return nil, fmt.Errorf("%w: Source, Sign and Issuer are required", ErrOptions)
	case opts.Heartbeat < 0 || opts.Heartbeat > MaxHeartbeat:
		return nil, fmt.Errorf("%w: Heartbeat %v must be at most %v", ErrOptions, opts.Heartbeat, MaxHeartbeat)
	case opts.MaxSubscribers < 0 || opts.WriteTimeout < 0 || opts.Page < 0 || opts.PollWait < 0:
		return nil, fmt.Errorf("%w: MaxSubscribers, WriteTimeout, Page and PollWait must not be negative", ErrOptions)
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxSubscribers == 0 {
		opts.MaxSubscribers = DefaultMaxSubscribers
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Page == 0 {
		opts.Page = DefaultPage
	}
	if opts.PollWait == 0 {
		opts.PollWait = DefaultPollWait
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Feed{opts: opts, beat: &beat{next: make(chan struct{})}}
	f.sets.byID = make(map[string]string, setCacheSize)
	return f, nil
}

// Subscribers is how many streams are served now.
func (f *Feed) Subscribers() int { return int(f.subs.Load()) }

// subscribe counts a subscriber in, starting the ticker for the first; false
// past MaxSubscribers.
func (f *Feed) subscribe() bool {
	if f.subs.Add(1) > int64(f.opts.MaxSubscribers) {
		f.subs.Add(-1)
		return false
	}
	f.mu.Lock()
	if f.stop == nil {
		f.stop = make(chan struct{})
		go f.tick(f.stop)
	}
	f.mu.Unlock()
	return true
}

// unsubscribe counts a subscriber out, stopping the ticker after the last.
func (f *Feed) unsubscribe() {
	f.mu.Lock()
	if f.subs.Add(-1) == 0 && f.stop != nil {
		close(f.stop)
		f.stop = nil
		// The next subscriber must not get a heartbeat signed before the pause.
		f.beat = &beat{next: make(chan struct{})}
	}
	f.mu.Unlock()
}

// tick signs a heartbeat every Heartbeat while the Source is Fresh, and
// publishes every tick (with or without one) until stop.
func (f *Feed) tick(stop chan struct{}) {
	t := time.NewTicker(f.opts.Heartbeat)
	defer t.Stop()
	var loggedAt time.Time
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b := &beat{next: make(chan struct{})}
		if st := f.opts.Source.Status(f.opts.Now()); st.Fresh {
			raw, ms, err := f.signHeartbeat(st)
			if err != nil {
				// Every tick would say it again: once a minute at most.
				if now := time.Now(); now.Sub(loggedAt) >= time.Minute {
					loggedAt = now
					f.opts.Logger.Error("revocation feed: cannot sign a heartbeat; consumers go stale", "err", err)
				}
			} else {
				b.jwt, b.last, b.at, b.ms = raw, st.Last, time.Now(), ms
			}
		}
		f.mu.Lock()
		old := f.beat
		f.beat = b
		f.mu.Unlock()
		close(old.next)
	}
}

func (f *Feed) current() *beat {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beat
}

// HeartbeatClaims are a heartbeat's claims.
type HeartbeatClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Epoch      string `json:"epoch"`
	Last       string `json:"last"`
	AgeMs      int64  `json:"age_ms"`
	Horizon    int64  `json:"horizon"`
}

// signHeartbeat signs a heartbeat for st now; it returns it and its iat_ms.
func (f *Feed) signHeartbeat(st revlog.Status) (string, int64, error) {
	now := f.opts.Now()
	raw, err := f.opts.Sign(TypeHeartbeat, &HeartbeatClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Epoch: st.Epoch, Last: st.Last,
		AgeMs: max(st.Age.Milliseconds(), 0), Horizon: st.Horizon,
	})
	return raw, now.UnixMilli(), err
}

// EventPayload is a SET's event (its one member of events): the log entry.
type EventPayload struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	At     int64  `json:"at"`
	Exp    int64  `json:"exp,omitempty"`
	Cutoff int64  `json:"cutoff,omitempty"`
}

// SETClaims are a Security Event Token's claims (RFC 8417 §2.2): jti is the
// event's ID, events holds one URI of ours.
type SETClaims struct {
	jwt.RegisteredClaims
	Events map[string]EventPayload `json:"events"`
}

// eventURI is the SET event URI of a kind.
func eventURI(kind string) (string, bool) {
	switch kind {
	case revlog.KindToken:
		return EventTokenRevoked, true
	case revlog.KindSubject:
		return EventSubjectRevoked, true
	case revlog.KindClient:
		return EventClientRevoked, true
	}
	return "", false
}

// set returns ev's SET, signed once for every subscriber.
func (f *Feed) set(ev revlog.Event) (string, error) {
	if raw, ok := f.sets.get(ev.ID); ok {
		return raw, nil
	}
	uri, ok := eventURI(ev.Kind)
	if !ok {
		return "", fmt.Errorf("revfeed: event %s of unknown kind %q", ev.ID, ev.Kind)
	}
	raw, err := f.opts.Sign(TypeSET, &SETClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(f.opts.Now()), ID: ev.ID},
		Events: map[string]EventPayload{uri: {
			ID: ev.ID, Kind: ev.Kind, Key: ev.Key, At: ev.At, Exp: ev.Exp, Cutoff: ev.Cutoff,
		}},
	})
	if err != nil {
		return "", err
	}
	f.sets.put(ev.ID, raw)
	return raw, nil
}

// setCache keeps the last setCacheSize SETs signed, by event ID.
type setCache struct {
	mu   sync.Mutex
	byID map[string]string
	ring [setCacheSize]string
	next int
}

func (c *setCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, ok := c.byID[id]
	return raw, ok
}

func (c *setCache) put(id, raw string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; ok {
		return
	}
	delete(c.byID, c.ring[c.next])
	c.ring[c.next] = id
	c.byID[id] = raw
	c.next = (c.next + 1) % setCacheSize
}

// CheckID reports whether id has an event ID's shape: an epoch of hex
// digits, a "-", and a stream ID (ms-seq). Which epoch, and whether it can
// be resumed from, is the Source's to say.
func CheckID(id string) error {
	epoch, sid, ok := strings.Cut(id, "-")
	ms, seq, ok2 := strings.Cut(sid, "-")
	// An epoch is revlog's: 32 hex digits, a ".", the Unix ms it began.
	if !ok || !ok2 || len(id) > maxIDLen || epoch == "" || strings.Trim(epoch, "0123456789abcdef.") != "" {
		return fmt.Errorf("%w: an event ID is <epoch>-<ms>-<seq>", token.ErrInvalidRequest)
	}
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return fmt.Errorf("%w: an event ID is <epoch>-<ms>-<seq>", token.ErrInvalidRequest)
	}
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		return fmt.Errorf("%w: an event ID is <epoch>-<ms>-<seq>", token.ErrInvalidRequest)
	}
	return nil
}

// CheckNonce returns the request's nonce query parameter: "" without one;
// an error wrapping token.ErrInvalidRequest when it is given more than once
// or is not MinNonceLen to MaxNonceLen characters of base64url (RFC 4648 §5,
// unpadded).
func CheckNonce(r *http.Request) (string, error) {
	vals := r.URL.Query()["nonce"]
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", fmt.Errorf("%w: nonce given more than once", token.ErrInvalidRequest)
	}
	n := vals[0]
	if len(n) < MinNonceLen || len(n) > MaxNonceLen || strings.Trim(n, base64URL) != "" {
		return "", token.Describe(fmt.Errorf("%w: nonce", token.ErrInvalidRequest),
			fmt.Sprintf("nonce must be %d to %d characters of base64url (A-Z a-z 0-9 - _)", MinNonceLen, MaxNonceLen))
	}
	return n, nil
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// StreamClaims are the claims of a stream's first JWT: the nonce of the
// request it answers and when it was signed.
type StreamClaims struct {
	jwt.RegisteredClaims
	IssuedAtMs int64  `json:"iat_ms"`
	Nonce      string `json:"nonce,omitempty"`
}

// Events serves the stream to an authenticated subscriber. It returns an
// error, and writes nothing, when the request is refused (a malformed
// Last-Event-ID or nonce, ErrBusy): the caller writes it in its own shape. Once the
// stream has begun it returns nil, whatever ends it. A HEAD request gets
// the headers only.
func (f *Feed) Events(w http.ResponseWriter, r *http.Request) error {
	last := r.Header.Get("Last-Event-ID")
	if last != "" {
		if err := CheckID(last); err != nil {
			return fmt.Errorf("Last-Event-ID: %w", err)
		}
	}
	nonce, err := CheckNonce(r)
	if err != nil {
		return err
	}
	if !f.subscribe() {
		return fmt.Errorf("%w: %d", ErrBusy, f.opts.MaxSubscribers)
	}
	defer f.unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer this response
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	s := &stream{f: f, w: w, rc: http.NewResponseController(w), last: last, nonce: nonce}
	w.WriteHeader(http.StatusOK)
	if err := s.run(r); err != nil {
		f.opts.Logger.Debug("revocation feed: subscriber dropped", "err", err)
	}
	return nil
}

// stream is one subscriber's.
type stream struct {
	f       *Feed
	w       http.ResponseWriter
	rc      *http.ResponseController
	last    string // the last event ID written
	nonce   string // the request's
	bound   bool   // the stream JWT is written
	boundMs int64  // its iat_ms
	beat    string // the last heartbeat written
	buf     []byte
}

func (s *stream) run(r *http.Request) error {
	// retry: how soon a browser's EventSource reconnects.
	s.buf = append(s.buf[:0], "retry: 100\n\n"...)
	if err := s.flush(); err != nil {
		return err
	}
	if s.last == "" {
		return s.reset()
	}
	ctx := r.Context()
	for {
		b := s.f.current() // before the events: its last is among them or before
		changed := s.f.opts.Source.Changed()
		for {
			evs, ok := s.f.opts.Source.Since(s.last, s.f.opts.Page)
			if !ok {
				return s.reset()
			}
			if !s.bound {
				if err := s.bind(); err != nil {
					return err
				}
			}
			for _, ev := range evs {
				raw, err := s.f.set(ev)
				if err != nil {
					return err
				}
				s.buf = append(s.buf, "id: "...)
				s.buf = append(s.buf, ev.ID...)
				s.buf = append(s.buf, "\nevent: revoked\ndata: "...)
				s.buf = append(s.buf, raw...)
				s.buf = append(s.buf, "\n\n"...)
				s.last = ev.ID
			}
			if len(evs) < s.f.opts.Page {
				break
			}
			if err := s.flush(); err != nil {
				return err
			}
		}
		// A heartbeat older than two ticks (the ticker was held up) is not
		// sent: it would cost the consumer its freshness, which counts from
		// the heartbeat's iat_ms. Nor is one signed before the stream JWT:
		// the consumer ignores it.
		if b.jwt != "" && b.jwt != s.beat && b.ms >= s.boundMs && sameEpoch(b.last, s.last) &&
			time.Since(b.at) <= 2*s.f.opts.Heartbeat {
			s.buf = append(s.buf, "event: heartbeat\ndata: "...)
			s.buf = append(s.buf, b.jwt...)
			s.buf = append(s.buf, "\n\n"...)
			s.beat = b.jwt
		}
		if len(s.buf) > 0 {
			if err := s.flush(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-b.next:
			if s.f.opts.Draining != nil && s.f.opts.Draining() {
				return nil
			}
		}
	}
}

// bind writes the stream's first JWT, signed now, after the request
// arrived, with its nonce: the consumer measures the heartbeats' age by it.
func (s *stream) bind() error {
	now := s.f.opts.Now()
	raw, err := s.f.opts.Sign(TypeStream, &StreamClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: s.f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Nonce: s.nonce,
	})
	if err != nil {
		return fmt.Errorf("revfeed: signing the stream: %w", err)
	}
	s.buf = append(s.buf, "event: stream\ndata: "...)
	s.buf = append(s.buf, raw...)
	s.buf = append(s.buf, "\n\n"...)
	s.bound, s.boundMs = true, now.UnixMilli()
	return nil
}

// sameEpoch reports whether two event IDs are of one epoch.
func sameEpoch(a, b string) bool {
	ea, _, _ := strings.Cut(a, "-")
	eb, _, _ := strings.Cut(b, "-")
	return ea == eb
}

// reset tells the subscriber to fetch the snapshot; the stream ends.
func (s *stream) reset() error {
	s.buf = append(s.buf, "event: reset\ndata: {}\n\n"...)
	return s.flush()
}

// flush writes the buffer within WriteTimeout.
func (s *stream) flush() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.f.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return s.rc.Flush()
}

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

// DefaultPollWait is how long a poll without returnImmediately waits for an
// event, at most.
const DefaultPollWait = 25 * time.Second

// maxPollBody bounds a poll request's body: acks of Page IDs and room.
const maxPollBody = 64 << 10

// PollRequest is a poll (RFC 8936 §2.4). The issuer keeps no state per
// receiver: the receiver's position is the latest event ID it acks (an
// event's jti, or a snapshot's last), and setErrs are read and dropped.
type PollRequest struct {
	Ack               []string                   `json:"ack"`
	SetErrs           map[string]json.RawMessage `json:"setErrs"`
	MaxEvents         *int                       `json:"maxEvents"`
	ReturnImmediately bool                       `json:"returnImmediately"`
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

// parsePoll reads a poll request strictly: one JSON object of RFC 8936's
// members (no others), every ack an event ID, maxEvents not negative.
func parsePoll(body io.Reader) (*PollRequest, string, error) {
	dec := json.NewDecoder(io.LimitReader(body, maxPollBody+1))
	dec.DisallowUnknownFields()
	var req PollRequest
	if err := dec.Decode(&req); err != nil {
		return nil, "", token.Describe(fmt.Errorf("%w: poll: %w", token.ErrInvalidRequest, err),
			"the body is not a poll request: a JSON object of ack, setErrs, maxEvents and returnImmediately (RFC 8936 §2.4), at most 64 KiB")
	}
	if dec.More() {
		return nil, "", fmt.Errorf("%w: one JSON object only", token.ErrInvalidRequest)
	}
	if req.MaxEvents != nil && *req.MaxEvents < 0 {
		return nil, "", fmt.Errorf("%w: maxEvents must not be negative", token.ErrInvalidRequest)
	}
	var pos string
	var posID streamPos
	for _, id := range req.Ack {
		if err := CheckID(id); err != nil {
			return nil, "", fmt.Errorf("ack: %w", err)
		}
		p := parsePos(id)
		if pos == "" || p.epoch != posID.epoch || posID.before(p) {
			pos, posID = id, p
		}
	}
	return &req, pos, nil
}

// streamPos is an event ID parsed (CheckID has passed).
type streamPos struct {
	epoch   string
	ms, seq uint64
}

func parsePos(id string) streamPos {
	epoch, sid, _ := strings.Cut(id, "-")
	ms, seq, _ := strings.Cut(sid, "-")
	a, _ := strconv.ParseUint(ms, 10, 64)
	b, _ := strconv.ParseUint(seq, 10, 64)
	return streamPos{epoch, a, b}
}

func (a streamPos) before(b streamPos) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }

// Poll answers a poll request read from body (application/json). The
// position is the latest ID acked; without one, or one that cannot be
// resumed, the answer is reset. Without returnImmediately it waits, up to
// PollWait, for an event; such a wait counts against MaxSubscribers. An
// error is returned, with nothing written, for a request that is refused.
func (f *Feed) Poll(w http.ResponseWriter, r *http.Request, body io.Reader) error {
	req, pos, err := parsePoll(body)
	if err != nil {
		return err
	}
	limit := f.opts.Page
	if req.MaxEvents != nil {
		limit = min(*req.MaxEvents, f.opts.Page)
	}
	resp := PollResponse{Sets: map[string]string{}}
	if pos == "" {
		resp.Reset = true
		return f.writePoll(w, &resp)
	}
	if !req.ReturnImmediately && limit > 0 {
		if f.subs.Add(1) > int64(f.opts.MaxSubscribers) {
			f.subs.Add(-1)
			return fmt.Errorf("%w: %d", ErrBusy, f.opts.MaxSubscribers)
		}
		defer f.subs.Add(-1)
	}
	deadline := time.NewTimer(f.opts.PollWait)
	defer deadline.Stop()
	for {
		changed := f.opts.Source.Changed()
		st := f.opts.Source.Status(f.opts.Now())
		evs, ok := f.opts.Source.Since(pos, limit+1)
		if !ok {
			resp.Reset = true
			return f.writePoll(w, &resp)
		}
		if len(evs) > 0 && limit > 0 || req.ReturnImmediately || limit == 0 {
			if len(evs) > limit {
				evs, resp.MoreAvailable = evs[:limit], true
			}
			for _, ev := range evs {
				raw, err := f.set(ev)
				if err != nil {
					return err
				}
				resp.Sets[ev.ID] = raw
			}
			// The heartbeat vouches for events up to its last only if the
			// answer holds them all.
			if st.Fresh && !resp.MoreAvailable && sameEpoch(st.Last, pos) {
				if resp.Heartbeat, _, err = f.signHeartbeat(st); err != nil {
					return err
				}
			}
			return f.writePoll(w, &resp)
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-deadline.C:
			req.ReturnImmediately = true // answer with what there is: nothing
		case <-changed:
			if f.opts.Draining != nil && f.opts.Draining() {
				req.ReturnImmediately = true
			}
		}
	}
}

func (f *Feed) writePoll(w http.ResponseWriter, resp *PollResponse) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
