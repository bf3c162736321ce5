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
//	revfeed.go      Source, Options, Feed, New
//	events.go       the stream (Events)
//	snapshot.go     the snapshot (Snapshot)
//	poll.go         the poll (Poll)
//	subscribers.go  who holds a stream or a waiting poll: their bounds, Recheck
//	heartbeat.go    the ticker that signs the shared heartbeat while anyone follows
//	set.go          an event as a signed SET, and the cache that signs it once
//	nonce.go        binding a stream or snapshot to its request (CheckNonce)
//	eventid.go      event IDs checked (CheckID) and their epochs compared, by the core's parser
//
// The messages' JWT types and claims, event IDs and the Event, Status and
// Snapshot a Source gives are the revocation core's (package
// client/revocation), which consumers verify with too.
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
// resumes with Last-Event-ID.
//
// # Who holds the feed
//
// Each stream and each waiting poll holds a connection, so they are
// bounded: MaxPerClient of one client (Subscriber.Client, the
// authenticated client ID; past it ErrClientBusy: 429), MaxSubscribers in
// all (ErrBusy: 503), which the server keeps below its connection cap. A
// subscriber's client is asked again whether it may still follow the feed
// (Subscriber.Standing) at every reload of the clients (Recheck) and when
// its credential expires: one that may not is cut off at once, its stream
// ended and its poll answered with the error a new request would get.
//
// # The snapshot
//
// GET /revocations answers the whole state: tens of MB for a few hundred
// thousand revocations, asked for by every consumer at once after an epoch
// rotation. Its state's part is built and encoded once per state version
// (Status.Version) and shared; each answer adds its request's nonce and
// times and is signed on its own. At most MaxSnapshots are served at once,
// each holding one buffer of its size (past it ErrSnapshotsBusy: 503), at
// most MaxSnapshotsPerClient of one client (ErrClientBusy: 429), and
// each is written within 10 s plus 1 s a MiB from when its writing starts.
//
// Every JWT is signed by the issuer's current signing key (Options.Sign,
// token.Service.SignEvent) and verifies with its JWKS, so the feed may pass
// through proxies that cannot forge it. A reset is not signed: a forged one
// costs the consumer a snapshot, which is.
package revfeed

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// Source is what the feed serves: a revlog.Follower (a revlog.Local in
// dev mode).
type Source interface {
	// Since returns up to max events applied after the event whose ID is after, oldest first;
	// ok is false when after cannot be resumed from (another epoch, or older than the follower keeps): reset.
	Since(after string, max int) (evs []revocation.Event, ok bool)
	// Changed returns a channel closed at the next change: an event applied, a heartbeat accepted, a resync.
	Changed() <-chan struct{}
	// Status is the follower's status at now.
	Status(now time.Time) revocation.Status
	// Snapshot is the whole state at now. The feed builds it once per
	// Status.Version, which must grow at every change of what it holds.
	Snapshot(now time.Time) revocation.Snapshot
}

// Defaults of Options.
const (
	DefaultHeartbeat      = 25 * time.Millisecond
	DefaultMaxSubscribers = 1000
	// DefaultMaxPerClient is how many streams and waiting polls one client
	// may hold at once: a Follow consumer holds one stream (two for a moment
	// when it reconnects before the issuer has seen the old one go), so 8
	// serves a service of four replicas sharing one feed credential through
	// a reconnection, all on one issuer replica.
	DefaultMaxPerClient = 8
	DefaultWriteTimeout = 2 * time.Second
	DefaultPage         = 500
	// DefaultPollWait is how long a poll without returnImmediately waits for an
	// event, at most.
	DefaultPollWait = 25 * time.Second
	// MaxHeartbeat is the longest Heartbeat allowed: consumers count on one
	// at least this often.
	MaxHeartbeat = 50 * time.Millisecond
)

// Errors of the feed.
var (
	// ErrBusy: MaxSubscribers streams and waiting polls are served already.
	ErrBusy = errors.New("revfeed: too many subscribers")
	// ErrSnapshotsBusy: MaxSnapshots snapshots are served already.
	ErrSnapshotsBusy = errors.New("revfeed: too many snapshots at once")
	// ErrClientBusy: the client holds as many of the feed's places as one
	// may: MaxPerClient streams and waiting polls, or MaxSnapshotsPerClient
	// snapshots.
	ErrClientBusy = errors.New("revfeed: this client holds as many of the feed's places as one may")
	// ErrOptions: an option is missing or out of range.
	ErrOptions = errors.New("revfeed: invalid options")
)

// Options configures a Feed. Source, Sign, SignPayload and Issuer are
// required; zero values of the rest mean the defaults above (and
// DefaultMaxSnapshots).
type Options struct {
	Source Source
	// Sign signs claims as a JWT of type typ with the issuer's current
	// signing key (token.Service.SignEvent).
	Sign func(typ string, claims jwt.Claims) (string, error)
	// SignPayload signs as Sign does a payload already base64url-encoded,
	// in parts that it joins, into one buffer of the JWT's size
	// (token.Service.SignEventPayload): the snapshot's.
	SignPayload func(typ string, payload ...[]byte) ([]byte, error)
	// Issuer is the iss of everything signed.
	Issuer string
	// Heartbeat is how often a heartbeat is sent while the Source is Fresh;
	// at most MaxHeartbeat.
	Heartbeat time.Duration
	// MaxSubscribers bounds the streams and waiting polls served at once.
	MaxSubscribers int
	// MaxSnapshots bounds the snapshots served at once; past it a snapshot
	// is refused (ErrSnapshotsBusy: 503).
	MaxSnapshots int
	// MaxSnapshotsPerClient bounds those of one client; past it a snapshot
	// is refused (ErrClientBusy: 429). Zero means
	// DefaultMaxSnapshotsPerClient; at most MaxSnapshots.
	MaxSnapshotsPerClient int
	// MaxPerClient bounds those of one client (Subscriber.Client), so that
	// one credential cannot take every place. Zero means
	// DefaultMaxPerClient, or MaxSubscribers if that is less.
	MaxPerClient int
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
	opts  Options
	count atomic.Int64 // len(subs), for Subscribers

	mu        sync.Mutex
	subs      map[*subscriber]struct{} // streams and waiting polls
	perClient map[string]int           // of subs, by Subscriber.Client
	streams   int                      // of subs: the ticker runs while there is one
	beat      *beat                    // the latest tick's
	stop      chan struct{}            // closed to stop the ticker; nil when it is not running

	sets setCache

	snapshots snapshots
}

// New returns a Feed.
func New(opts Options) (*Feed, error) {
	switch {
	case opts.Source == nil || opts.Sign == nil || opts.SignPayload == nil || opts.Issuer == "":
		return nil, fmt.Errorf("%w: Source, Sign, SignPayload and Issuer are required", ErrOptions)
	case opts.Heartbeat < 0 || opts.Heartbeat > MaxHeartbeat:
		return nil, fmt.Errorf("%w: Heartbeat %v must be at most %v", ErrOptions, opts.Heartbeat, MaxHeartbeat)
	case opts.MaxSubscribers < 0 || opts.MaxPerClient < 0 || opts.MaxSnapshots < 0 || opts.MaxSnapshotsPerClient < 0 || opts.WriteTimeout < 0 || opts.Page < 0 || opts.PollWait < 0:
		return nil, fmt.Errorf("%w: MaxSubscribers, MaxPerClient, MaxSnapshots, MaxSnapshotsPerClient, WriteTimeout, Page and PollWait must not be negative", ErrOptions)
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxSubscribers == 0 {
		opts.MaxSubscribers = DefaultMaxSubscribers
	}
	if opts.MaxSnapshots == 0 {
		opts.MaxSnapshots = DefaultMaxSnapshots
	}
	switch {
	case opts.MaxSnapshotsPerClient == 0:
		opts.MaxSnapshotsPerClient = min(DefaultMaxSnapshotsPerClient, opts.MaxSnapshots)
	case opts.MaxSnapshotsPerClient > opts.MaxSnapshots:
		return nil, fmt.Errorf("%w: MaxSnapshotsPerClient %d is more than MaxSnapshots %d", ErrOptions, opts.MaxSnapshotsPerClient, opts.MaxSnapshots)
	}
	switch {
	case opts.MaxPerClient == 0:
		opts.MaxPerClient = min(DefaultMaxPerClient, opts.MaxSubscribers)
	case opts.MaxPerClient > opts.MaxSubscribers:
		return nil, fmt.Errorf("%w: MaxPerClient %d is more than MaxSubscribers %d", ErrOptions, opts.MaxPerClient, opts.MaxSubscribers)
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
	f := &Feed{opts: opts, beat: &beat{next: make(chan struct{})},
		subs: map[*subscriber]struct{}{}, perClient: map[string]int{}}
	f.sets.byID = make(map[string]string, setCacheSize)
	return f, nil
}

// Subscribers is how many streams and waiting polls are served now.
func (f *Feed) Subscribers() int { return int(f.count.Load()) }
