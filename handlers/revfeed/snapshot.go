package revfeed

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// DefaultMaxSnapshots is Options.MaxSnapshots's default: the snapshots
// served at once, each holding a buffer of its answer's size while it is
// signed and written.
const DefaultMaxSnapshots = 4

// DefaultMaxSnapshotsPerClient is Options.MaxSnapshotsPerClient's default:
// a consumer fetches one snapshot at a time, so one client's requests (of
// every replica of a service sharing its credential, after an epoch
// rotation) take one place and leave the others to the other clients.
const DefaultMaxSnapshotsPerClient = 1

// The write deadline of a snapshot's answer, set when its writing starts
// (the server's own, set when the request was read, has run while it
// waited and was built): snapshotWriteFloor, plus snapshotWritePerMiB for
// each MiB of the body, a consumer reading at 1 MiB/s (8 Mbit/s).
const (
	snapshotWriteFloor  = 10 * time.Second
	snapshotWritePerMiB = time.Second
)

// Snapshot writes the whole state as one signed JWT (application/jwt),
// with the request's nonce, to client (the authenticated client's ID). An
// error is returned, with nothing written, for a request that is refused
// (a malformed nonce; ErrSnapshotsBusy past MaxSnapshots, ErrClientBusy
// past MaxSnapshotsPerClient of client's). A HEAD request gets the headers
// only, and builds nothing.
//
// The state's part of the payload is built and base64url-encoded once per
// state version; each request adds its own members in front of it, padded
// with JSON whitespace (RFC 7519 §7.1 allows it) to a multiple of 3 bytes
// so that the encodings join, and signs the whole (Options.SignPayload):
// one buffer of the answer's size a request.
func (f *Feed) Snapshot(w http.ResponseWriter, r *http.Request, client string) error {
	nonce, err := CheckNonce(r)
	if err != nil {
		return err
	}
	if err := f.snapshots.enter(client, f.opts.MaxSnapshots, f.opts.MaxSnapshotsPerClient); err != nil {
		return err
	}
	defer f.snapshots.leave(client)
	h := w.Header()
	h.Set("Content-Type", "application/jwt")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	state, err := f.snapshots.get(f.opts.Source, f.opts.Source.Status(f.opts.Now()), f.opts.Now)
	if err != nil {
		return err
	}
	now := f.opts.Now()
	stamp := revocation.SnapshotStamp{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(now)},
		IssuedAtMs:       now.UnixMilli(), Nonce: nonce,
	}
	if st := f.opts.Source.Status(now); state.of(st) {
		stamp.Fresh, stamp.AgeMs = st.Fresh, max(st.Age.Milliseconds(), 0)
	}
	head, err := json.Marshal(&stamp)
	if err != nil {
		return err
	}
	// The closing brace becomes a comma, and spaces pad the head to a
	// multiple of 3 bytes: the state's members follow, their encoding
	// starting where a base64 group of the payload does.
	head[len(head)-1] = ','
	for len(head)%3 != 0 {
		head = append(head, ' ')
	}
	raw, err := f.opts.SignPayload(revocation.TypeSnapshot, b64.AppendEncode(nil, head), state.tail)
	if err != nil {
		return fmt.Errorf("revfeed: signing the snapshot: %w", err)
	}
	// Time to write the answer, from now, whatever the server's
	// WriteTimeout left of it.
	d := snapshotWriteFloor + time.Duration(len(raw))*snapshotWritePerMiB/(1<<20)
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(raw); err != nil {
		f.opts.Logger.Debug("revocation feed: snapshot not written", "bytes", len(raw), "err", err)
	}
	return nil
}

var b64 = base64.RawURLEncoding

// snapshots are the snapshots served now, and the state's part of the last
// built.
type snapshots struct {
	servedMu  sync.Mutex
	served    int            // in all
	perClient map[string]int // of served, by client; no entry for none

	mu   sync.Mutex // held while building: the requests that need the same wait
	last *builtState
}

// enter takes a place for a snapshot of client's: ErrSnapshotsBusy past max
// in all, ErrClientBusy past perClient of client's.
func (s *snapshots) enter(client string, max, perClient int) error {
	s.servedMu.Lock()
	defer s.servedMu.Unlock()
	switch {
	case s.served >= max:
		return fmt.Errorf("%w: %d", ErrSnapshotsBusy, max)
	case s.perClient[client] >= perClient:
		return fmt.Errorf("%w: %d snapshot(s) at once", ErrClientBusy, perClient)
	}
	if s.perClient == nil {
		s.perClient = map[string]int{}
	}
	s.served++
	s.perClient[client]++
	return nil
}

// leave gives back the place enter took.
func (s *snapshots) leave(client string) {
	s.servedMu.Lock()
	defer s.servedMu.Unlock()
	s.served--
	if s.perClient[client]--; s.perClient[client] <= 0 {
		delete(s.perClient, client)
	}
}

// builtState is the state's part of a snapshot payload (SnapshotState's
// JSON without its opening brace), base64url-encoded, for a state version
// (and its epoch and last, in case a Source's version stays put).
type builtState struct {
	version     uint64
	epoch, last string
	tail        []byte
}

// of reports whether b was built of the state st describes.
func (b *builtState) of(st revocation.Status) bool {
	return b.version == st.Version && b.epoch == st.Epoch && b.last == st.Last
}

// get returns the state's part of the snapshot for a state no older than
// arrived (the Source's when the request arrived): the last built, else one
// built now from src. Requests that arrive while it is built wait for it,
// holding nothing, and are served it.
func (s *snapshots) get(src Source, arrived revocation.Status, now func() time.Time) (*builtState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.last; b != nil && (b.version > arrived.Version || b.of(arrived)) {
		return b, nil
	}
	s.last = nil // for the collector, unless a request still writes it
	b, err := buildState(src.Snapshot(now()))
	if err != nil {
		return nil, err
	}
	s.last = b
	return b, nil
}

// buildState encodes snap's state.
func buildState(snap revocation.Snapshot) (*builtState, error) {
	st := revocation.SnapshotState{Epoch: snap.Epoch, Last: snap.Last, Horizon: snap.Horizon,
		Tokens:   make([]revocation.RevokedToken, 0, len(snap.Tokens)),
		Subjects: make([]revocation.RevokedName, 0, len(snap.Subjects)),
		Clients:  make([]revocation.RevokedClient, 0, len(snap.Clients)),
	}
	for _, e := range snap.Tokens {
		st.Tokens = append(st.Tokens, revocation.RevokedToken{JTI: e.Key, Exp: e.Exp, At: e.At})
	}
	for _, e := range snap.Subjects {
		st.Subjects = append(st.Subjects, revocation.RevokedName{Subject: e.Key, At: e.At})
	}
	for _, e := range snap.Clients {
		st.Clients = append(st.Clients, revocation.RevokedClient{ClientID: e.Key, Cutoff: e.Cutoff, At: e.At})
	}
	js, err := json.Marshal(&st)
	if err != nil {
		return nil, fmt.Errorf("revfeed: encoding the snapshot: %w", err)
	}
	js = js[1:] // {"epoch":…}: what follows the brace
	return &builtState{version: snap.Version, epoch: snap.Epoch, last: snap.Last,
		tail: b64.AppendEncode(make([]byte, 0, b64.EncodedLen(len(js))), js)}, nil
}
