package client_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// feedEvent is one revocation the fake issuer serves.
type feedEvent struct {
	ID, Kind, Key   string
	At, Exp, Cutoff int64
	forged          bool // signed with another key under the issuer's kid
}

// feedIssuer is an issuer as a Validator with Follow sees one: its JWKS,
// the revocation feed (stream and snapshot, as package revfeed serves them,
// for client feeder:s3cret) and GET /token/validate (for FallbackRemote:
// every token valid unless remoteRevoked). Tokens are signed with its key.
type feedIssuer struct {
	t      *testing.T // fails when a message cannot be signed
	URL    string
	key    ed25519.PrivateKey
	forger ed25519.PrivateKey
	clock  *clock

	mu            sync.Mutex
	epoch         string
	events        []feedEvent
	fresh         bool
	ageMs         int64
	changed       chan struct{}
	drop          chan struct{} // closed to end every stream
	conns         int           // streams opened
	hits          map[string]int
	remoteRevoked bool
}

const feedHorizonAgo = time.Hour

func newFeedIssuer(t *testing.T, clk *clock) *feedIssuer {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	f := &feedIssuer{t: t, key: key, forger: forger, clock: clk, epoch: "e1", fresh: true, ageMs: 10,
		changed: make(chan struct{}), drop: make(chan struct{}), hits: map[string]int{}}
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"k1","x":"` +
		base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(jwks)) })
	mux.HandleFunc("/revocations/events", f.serveEvents)
	mux.HandleFunc("/revocations", f.serveSnapshot)
	mux.HandleFunc("/token/validate", f.serveValidate)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(f.dropStreams) // before srv.Close, which waits for them
	f.URL = srv.URL
	return f
}

func (f *feedIssuer) requests(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

func (f *feedIssuer) changeLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// revoke appends an event of kind for key at (Unix ms).
func (f *feedIssuer) revoke(kind, key string, at int64, forged bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := feedEvent{ID: fmt.Sprintf("%s-%d-0", f.epoch, 1000+len(f.events)), Kind: kind, Key: key, At: at, forged: forged}
	switch kind {
	case "t":
		ev.Exp = f.clock.Now().Add(time.Hour).Unix()
	case "c":
		ev.Cutoff = at
	}
	f.events = append(f.events, ev)
	f.changeLocked()
}

func (f *feedIssuer) setFresh(fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fresh = fresh
	f.changeLocked()
}

// dropStreams ends every stream open; the Validator reconnects.
func (f *feedIssuer) dropStreams() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.drop)
	f.drop = make(chan struct{})
}

// newEpoch gives the state a new epoch (a resync at the issuer): the events
// keep their keys under new IDs.
func (f *feedIssuer) newEpoch(epoch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch = epoch
	for i := range f.events {
		f.events[i].ID = fmt.Sprintf("%s-%d-0", epoch, 1000+i)
	}
	f.changeLocked()
}

func (f *feedIssuer) streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

func (f *feedIssuer) signJWT(typ string, claims jwt.Claims, key ed25519.PrivateKey) string {
	return jwttest.Sign(f.t, jwt.SigningMethodEdDSA, key, map[string]any{"kid": "k1", "typ": typ}, claims)
}

func (f *feedIssuer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if id, secret, ok := r.BasicAuth(); !ok || id != "feeder" || secret != "s3cret" {
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	return true
}

func (f *feedIssuer) lastLocked() string {
	if len(f.events) == 0 {
		return f.epoch + "-0-0"
	}
	return f.events[len(f.events)-1].ID
}

func (f *feedIssuer) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	f.conns++
	connected := f.clock.Now() // with conns: a test that sees the stream moves the clock after
	last, next := r.Header.Get("Last-Event-ID"), -1
	if last == f.epoch+"-0-0" {
		next = 0
	}
	for i, ev := range f.events {
		if ev.ID == last {
			next = i + 1
		}
	}
	drop := f.drop
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	if next < 0 {
		fmt.Fprint(w, "event: reset\ndata: {}\n\n")
		return
	}
	fmt.Fprintf(w, "event: stream\ndata: %s\n\n", f.signJWT("revocation-stream+jwt", jwt.MapClaims{"iss": f.URL,
		"iat": connected.Unix(), "iat_ms": connected.UnixMilli(), "nonce": r.URL.Query().Get("nonce")}, f.key))
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		evs := append([]feedEvent(nil), f.events[next:]...)
		next = len(f.events)
		fresh, changed, hbLast := f.fresh, f.changed, f.lastLocked()
		beat := f.clock.Now().UnixMilli()
		epoch, age := f.epoch, f.ageMs
		f.mu.Unlock()
		for _, ev := range evs {
			key := f.key
			if ev.forged {
				key = f.forger
			}
			uri := map[string]string{"t": "token-revoked", "s": "subject-revoked", "c": "client-revoked"}[ev.Kind]
			set := f.signJWT("secevent+jwt", jwt.MapClaims{"iss": f.URL, "iat": f.clock.Now().Unix(), "jti": ev.ID,
				"events": map[string]any{"https://snowtoken.dev/secevent/" + uri: map[string]any{
					"id": ev.ID, "kind": ev.Kind, "key": ev.Key, "at": ev.At, "exp": ev.Exp, "cutoff": ev.Cutoff}}}, key)
			fmt.Fprintf(w, "id: %s\nevent: revoked\ndata: %s\n\n", ev.ID, set)
		}
		if fresh {
			hb := f.signJWT("revocation-heartbeat+jwt", jwt.MapClaims{"iss": f.URL, "iat": f.clock.Now().Unix(),
				"iat_ms": beat, "epoch": epoch, "last": hbLast, "age_ms": age, "horizon": 0}, f.key)
			fmt.Fprintf(w, "event: heartbeat\ndata: %s\n\n", hb)
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-drop:
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func (f *feedIssuer) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tokens, subjects, clients := []any{}, []any{}, []any{}
	for _, ev := range f.events {
		switch ev.Kind {
		case "t":
			tokens = append(tokens, map[string]any{"jti": ev.Key, "exp": ev.Exp, "at": ev.At})
		case "s":
			subjects = append(subjects, map[string]any{"sub": ev.Key, "at": ev.At})
		case "c":
			clients = append(clients, map[string]any{"client_id": ev.Key, "cutoff": ev.Cutoff, "at": ev.At})
		}
	}
	now := f.clock.Now()
	snap := f.signJWT("revocation-snapshot+jwt", jwt.MapClaims{"iss": f.URL, "iat": now.Unix(), "iat_ms": now.UnixMilli(),
		"nonce": r.URL.Query().Get("nonce"), "epoch": f.epoch, "last": f.lastLocked(), "horizon": now.Add(-feedHorizonAgo).UnixMilli(), "fresh": f.fresh,
		"tokens": tokens, "subjects": subjects, "clients": clients}, f.key)
	w.Header().Set("Content-Type", "application/jwt")
	_, _ = w.Write([]byte(snap))
}

func (f *feedIssuer) serveValidate(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	revoked := f.remoteRevoked
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if revoked {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_token","error_description":"revoked"}`))
		return
	}
	now := f.clock.Now()
	_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "client_id": "orders-app",
		"scope": "orders:read", "iss": f.URL, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "4198400", "worker_id": 1})
}

// token is a token of f for subject, issued at the clock's now; an
// exchanged one when it has parents.
func (f *feedIssuer) token(t *testing.T, jti, subject, clientID string, parents ...jwtpolicy.Parent) string {
	t.Helper()
	now := f.clock.Now()
	return f.signJWT("at+jwt", jwtpolicy.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.URL, Subject: subject, ID: jti,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
		ClientID: clientID, Scope: "orders:read", Parents: parents,
	}, f.key)
}
