package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// testFeed is a feed that knows one key (kid k1, no fetch) and has applied
// a snapshot of epoch e1 with horizon, on the clock *now.
func testFeed(t *testing.T, now *time.Time, horizon int64) (*feed, ed25519.PrivateKey) {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	clock := func() time.Time { return *now }
	v := &Validator{opts: Options{Issuer: "https://issuer.test", Leeway: DefaultLeeway, FeedThreshold: DefaultFeedThreshold, FeedRetention: DefaultFeedRetention,
		MaxClockSkew: DefaultLeeway, JWKSMaxAge: 100 * time.Hour, JWKSMinInterval: 100 * time.Hour, Now: clock, Logger: slog.New(slog.DiscardHandler)}}
	v.keys = presetKeys(t, v, "k1", pub)
	fd := newFeed(v, "http://issuer.test")
	setSnapshot(t, fd, revocation.SnapshotState{Horizon: horizon})
	return fd, key
}

// setSnapshot makes fd's state the snapshot sn, of epoch e1 at e1-0-0
// unless sn says otherwise, on fd's clock.
func setSnapshot(t *testing.T, fd *feed, sn revocation.SnapshotState) {
	t.Helper()
	if sn.Epoch == "" {
		sn.Epoch, sn.Last = "e1", "e1-0-0"
	}
	st, err := revocation.FromSnapshot(fd.v.stateOptions(), sn, fd.v.opts.Now())
	if err != nil {
		t.Fatal(err)
	}
	fd.state = st
}

func signTest(t *testing.T, key ed25519.PrivateKey, typ string, claims jwt.MapClaims) string {
	t.Helper()
	return jwttest.Sign(t, jwt.SigningMethodEdDSA, key, map[string]any{"kid": "k1", "typ": typ}, claims)
}

// TestHeartbeatReplayRefused checks that a heartbeat seen before (a proxy
// replaying it, or the same one after a reconnection) does not make the
// state fresh again, and that one newer does, for FeedThreshold less its
// age.
func TestHeartbeatReplayRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	beat := func(ms int64) string {
		return signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(),
			"iat_ms": ms, "epoch": "e1", "last": "e1-0-0", "age_ms": 50})
	}
	c := &Claims{JTI: "1", IssuedAt: now}
	cn := bind(t, fd, key, now)
	hb := beat(now.UnixMilli())
	if err := fd.applyHeartbeat(t.Context(), cn, hb); err != nil || fd.decide(c) != revocation.Live {
		t.Fatalf("first heartbeat: %v, %v", err, fd.decide(c))
	}
	now = now.Add(DefaultFeedThreshold - 50*time.Millisecond) // its age counts against it
	if fd.decide(c) != revocation.Unknown {
		t.Fatal("fresh past FeedThreshold less the heartbeat's age")
	}
	if err := fd.applyHeartbeat(t.Context(), cn, hb); err != nil || fd.decide(c) != revocation.Unknown {
		t.Fatalf("the same heartbeat again made the state fresh (%v)", err)
	}
	if err := fd.applyHeartbeat(t.Context(), cn, beat(now.UnixMilli())); err != nil || fd.decide(c) != revocation.Live {
		t.Fatalf("a newer heartbeat: %v, %v", err, fd.decide(c))
	}
}

// bind opens a connection at now and applies its stream JWT, signed at now
// with its nonce.
func bind(t *testing.T, fd *feed, key ed25519.PrivateKey, now time.Time) *conn {
	t.Helper()
	cn := &conn{nonce: newNonce(), sent: now}
	if err := fd.applyStream(t.Context(), cn, streamJWT(t, key, cn.nonce, now.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	return cn
}

func streamJWT(t *testing.T, key ed25519.PrivateKey, nonce string, ms int64) string {
	return signTest(t, key, revocation.TypeStream, jwt.MapClaims{"iss": "https://issuer.test", "iat": ms / 1000, "iat_ms": ms, "nonce": nonce})
}

// TestReplayOnNewConnection checks that a recorded stream (its stream JWT
// and heartbeats) replayed on another connection, after a restart
// (lastBeatMs 0), does not make the state fresh: its stream JWT carries
// another nonce, a heartbeat before this connection's stream JWT is
// refused, and one signed before it is ignored.
func TestReplayOnNewConnection(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	recorded := streamJWT(t, key, newNonce(), now.UnixMilli())
	beat := signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(),
		"iat_ms": now.UnixMilli() + 1, "epoch": "e1", "last": "e1-0-0", "age_ms": 0})
	now = now.Add(10 * time.Millisecond) // replayed soon: within every clock window
	cn := &conn{nonce: newNonce(), sent: now}
	if err := fd.applyStream(t.Context(), cn, recorded); err == nil {
		t.Fatal("a stream JWT of another nonce accepted")
	}
	if err := fd.applyHeartbeat(t.Context(), cn, beat); err == nil {
		t.Fatal("a heartbeat accepted on a connection its stream JWT did not bind")
	}
	if fd.decide(&Claims{JTI: "1", IssuedAt: now}) != revocation.Unknown {
		t.Fatal("fresh from a replayed stream")
	}
	if err := fd.applyStream(t.Context(), cn, streamJWT(t, key, cn.nonce, now.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if err := fd.applyHeartbeat(t.Context(), cn, beat); err != nil || fd.lastBeatMs != 0 || fd.decide(&Claims{JTI: "1", IssuedAt: now}) != revocation.Unknown {
		t.Fatalf("a heartbeat signed before this connection's stream JWT taken (%v)", err)
	}
}

// TestHeldHeartbeat checks that a heartbeat held back (a proxy delaying
// the stream) is fresh until FeedThreshold less its age after it was
// signed, not after it arrives; that one held past FeedThreshold +
// MaxClockSkew is ignored; and that one from beyond MaxClockSkew ahead is
// ignored.
func TestHeldHeartbeat(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	cn := bind(t, fd, key, now)
	beat := func(ms int64) string {
		return signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test", "iat": ms / 1000,
			"iat_ms": ms, "epoch": "e1", "last": "e1-0-0", "age_ms": 10})
	}
	c := &Claims{JTI: "1", IssuedAt: now}
	signed := now.UnixMilli() + 100
	now = now.Add(100*time.Millisecond + 130*time.Millisecond) // held back 130 ms
	if err := fd.applyHeartbeat(t.Context(), cn, beat(signed)); err != nil || fd.decide(c) != revocation.Live {
		t.Fatalf("held 130 ms: %v, %v", err, fd.decide(c))
	}
	now = now.Add(10 * time.Millisecond) // 140 ms after signing: FeedThreshold − age
	if fd.decide(c) != revocation.Unknown {
		t.Fatal("fresh past FeedThreshold less age after the heartbeat was signed")
	}
	last := fd.lastBeatMs
	ahead := now.Add(DefaultLeeway + time.Millisecond).UnixMilli()
	if err := fd.applyHeartbeat(t.Context(), cn, beat(ahead)); err != nil || fd.lastBeatMs != last || fd.decide(c) != revocation.Unknown {
		t.Fatalf("a heartbeat from beyond MaxClockSkew ahead taken: %v", err)
	}

	// Another feed, on a connection bound long ago: a heartbeat signed
	// then, held until past FeedThreshold + MaxClockSkew.
	now2 := now
	fd2, key2 := testFeed(t, &now2, 0)
	cn2 := bind(t, fd2, key2, now2)
	hb := signTest(t, key2, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test", "iat": now2.Unix(),
		"iat_ms": now2.UnixMilli() + 1, "epoch": "e1", "last": "e1-0-0", "age_ms": 0})
	now2 = now2.Add(DefaultFeedThreshold + DefaultLeeway + 2*time.Millisecond)
	if err := fd2.applyHeartbeat(t.Context(), cn2, hb); err != nil || fd2.lastBeatMs != 0 {
		t.Fatalf("a heartbeat older than FeedThreshold + MaxClockSkew taken: %v", err)
	}
}

// TestSnapshotNonce checks that a snapshot is applied only when it carries
// the nonce of the request that fetched it and was signed within the clock
// window: a recorded one (another nonce, none, or old) is refused and
// leaves the state as it was.
func TestSnapshotNonce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	fd.v.opts.Timeout = time.Minute // a guard against a hang
	setSnapshot(t, fd, revocation.SnapshotState{Tokens: []revocation.RevokedToken{{JTI: "kept"}}})
	recorded := newNonce()
	for _, tc := range []struct {
		name, want string // want: in the error, "" for none
		claims     func(nonce string) jwt.MapClaims
	}{
		{"another nonce", "nonce", func(string) jwt.MapClaims { return jwt.MapClaims{"nonce": recorded, "iat_ms": now.UnixMilli()} }},
		{"no nonce", "nonce", func(string) jwt.MapClaims { return jwt.MapClaims{"iat_ms": now.UnixMilli()} }},
		{"old", "MaxClockSkew", func(n string) jwt.MapClaims {
			return jwt.MapClaims{"nonce": n, "iat_ms": now.Add(-DefaultFeedThreshold - DefaultLeeway - time.Millisecond).UnixMilli()}
		}},
		{"ahead", "MaxClockSkew", func(n string) jwt.MapClaims {
			return jwt.MapClaims{"nonce": n, "iat_ms": now.Add(DefaultLeeway + time.Millisecond).UnixMilli()}
		}},
		{"ours", "", func(n string) jwt.MapClaims { return jwt.MapClaims{"nonce": n, "iat_ms": now.UnixMilli()} }},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cl := tc.claims(r.URL.Query().Get("nonce"))
			cl["iss"], cl["iat"], cl["epoch"], cl["last"], cl["horizon"] = "https://issuer.test", now.Unix(), "e2", "e2-0-0", 0
			cl["tokens"] = []any{map[string]any{"jti": "new"}}
			w.Header().Set("Content-Type", "application/jwt")
			_, _ = w.Write([]byte(signTest(t, key, revocation.TypeSnapshot, cl)))
		}))
		fd.v.http, fd.snapURL = srv.Client(), srv.URL+"/revocations"
		err := fd.snapshot(t.Context())
		srv.Close()
		kept := fd.state.TokenRevoked("kept")
		if tc.want == "" {
			if err != nil || kept || fd.state.Epoch() != "e2" {
				t.Errorf("%s: %v, epoch %s", tc.name, err, fd.state.Epoch())
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) || !kept || fd.state.Epoch() != "e1" {
			t.Errorf("%s: %v, want refused (%s) and the state kept", tc.name, err, tc.want)
		}
	}
}

// TestDecide checks the rules of decide on a fresh state: revoked jti,
// a subject's and a client's revocation before, after and within the
// leeway of a token's iat, and the horizon.
func TestDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	iat := now.Add(-time.Minute)
	horizon := iat.Add(-time.Hour).UnixMilli()
	fd, key := testFeed(t, &now, horizon)
	ms := func(d time.Duration) int64 { return iat.Add(d).UnixMilli() }
	setSnapshot(t, fd, revocation.SnapshotState{Horizon: horizon,
		Tokens: []revocation.RevokedToken{{JTI: "revoked"}},
		Subjects: []revocation.RevokedName{
			{Subject: "before", At: ms(-10 * time.Second)}, // revoked before the token: it is live
			{Subject: "after", At: ms(10 * time.Second)},   // revoked after the token was issued
			{Subject: "near", At: ms(2 * time.Second)},     // within the leeway
		},
		Clients: []revocation.RevokedClient{{ClientID: "cut", Cutoff: ms(10 * time.Second)}, {ClientID: "old", Cutoff: ms(-10 * time.Second)}},
	})
	if err := fd.applyHeartbeat(t.Context(), bind(t, fd, key, now), signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test",
		"iat": now.Unix(), "iat_ms": now.UnixMilli(), "epoch": "e1", "last": "e1-0-0", "age_ms": 0})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, jti, sub, client string
		iat                    time.Time
		want                   revocation.Verdict
	}{
		{"untouched", "1", "x", "y", iat, revocation.Live},
		{"jti revoked", "revoked", "x", "y", iat, revocation.Revoked},
		{"subject revoked before it", "1", "before", "y", iat, revocation.Live},
		{"subject revoked after it", "1", "after", "y", iat, revocation.Revoked},
		{"subject within the leeway", "1", "near", "y", iat, revocation.Unknown},
		{"client cut after it", "1", "x", "cut", iat, revocation.Revoked},
		{"client cut before it", "1", "x", "old", iat, revocation.Live},
		{"client cut, subject near", "1", "near", "cut", iat, revocation.Revoked},
		{"before the horizon", "1", "x", "y", time.UnixMilli(horizon).Add(-time.Second), revocation.Unknown},
		{"within the leeway of the horizon", "1", "x", "y", time.UnixMilli(horizon).Add(time.Second), revocation.Unknown},
	} {
		if got := fd.decide(&Claims{JTI: tc.jti, Subject: tc.sub, ClientID: tc.client, IssuedAt: tc.iat}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	now = now.Add(time.Second) // stale: a revoked token stays revoked, the rest cannot be told
	if got := fd.decide(&Claims{JTI: "revoked", IssuedAt: iat}); got != revocation.Revoked {
		t.Errorf("stale, jti revoked: %v", got)
	}
	if got := fd.decide(&Claims{JTI: "1", Subject: "x", ClientID: "y", IssuedAt: iat}); got != revocation.Unknown {
		t.Errorf("stale, untouched: %v", got)
	}
}

// TestForgetOldRevocations checks that the followed state lets go of a
// subject's or a client's revocation once FeedRetention (and the leeway)
// has passed, so that its memory stays bounded, and that a token the
// forgotten revocation could have ended is then one the state cannot
// decide, never live; a token issued after it still is.
func TestForgetOldRevocations(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, key := testFeed(t, &now, 0)
	fd.v.opts.FeedRetention = time.Hour
	revokedAt := now.Add(-time.Minute)
	cut := revokedAt.Add(-time.Second).UnixMilli()
	setSnapshot(t, fd, revocation.SnapshotState{
		Subjects: []revocation.RevokedName{{Subject: "gone", At: revokedAt.UnixMilli()}},
		Clients:  []revocation.RevokedClient{{ClientID: "cut", Cutoff: cut, At: cut}}})
	now = now.Add(time.Hour + DefaultLeeway) // past the retention: forgotten at the next heartbeat
	if err := fd.applyHeartbeat(t.Context(), bind(t, fd, key, now), signTest(t, key, revocation.TypeHeartbeat, jwt.MapClaims{"iss": "https://issuer.test",
		"iat": now.Unix(), "iat_ms": now.UnixMilli(), "epoch": "e1", "last": "e1-0-0", "age_ms": 0})); err != nil {
		t.Fatal(err)
	}
	if _, ok := fd.state.SubjectMarker("gone"); ok {
		t.Fatal("past the retention the state still holds the subject")
	}
	if _, ok := fd.state.ClientCutoff("cut"); ok {
		t.Fatal("past the retention the state still holds the client")
	}
	for _, tc := range []struct {
		name string
		iat  time.Time
		want revocation.Verdict
	}{
		{"issued before the forgotten revocation", revokedAt.Add(-time.Minute), revocation.Unknown},
		{"issued within the leeway of it", revokedAt.Add(time.Second), revocation.Unknown},
		{"issued after it", revokedAt.Add(DefaultLeeway + time.Second), revocation.Live},
	} {
		if got := fd.decide(&Claims{JTI: "1", Subject: "gone", ClientID: "cut", IssuedAt: tc.iat}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// streamServer serves write as the event stream and reports, on done,
// how many bytes it wrote before the client went away or write returned.
func streamServer(t *testing.T, write func(w io.Writer, fl http.Flusher) error) (*httptest.Server, <-chan int64) {
	t.Helper()
	done := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		cw := &countingWriter{w: w}
		_ = write(cw, w.(http.Flusher))
		done <- cw.n
	}))
	t.Cleanup(srv.Close)
	return srv, done
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// TestFeedEventBounded checks that an event made of many short data lines
// (each under maxFeedLine) is refused once it passes maxFeedEvent, in
// memory linear in what was read: joining its lines with += made an 8 MiB
// event of 16 KB lines allocate about 4 GB.
func TestFeedEventBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fd, _ := testFeed(t, &now, 0)
	fd.v.opts.Timeout = time.Minute // a guard against a hang
	line := "data: " + strings.Repeat("a", 16_000) + "\n"
	srv, _ := streamServer(t, func(w io.Writer, fl http.Flusher) error {
		if _, err := io.WriteString(w, "id: e1-5-0\nevent: revoked\n"); err != nil {
			return err
		}
		for range (8 << 20) / len(line) {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, "\n")
		fl.Flush()
		return err
	})
	fd.v.http, fd.eventsURL = srv.Client(), srv.URL+"/revocations/events"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := fd.follow(t.Context())
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "event of the stream is over") {
		t.Fatalf("follow: %v, want the event refused for its size", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("reading the event allocated %d MiB, want it linear in the bytes read", alloc>>20)
	}
}

// TestFeedIdleCountsEvents checks that a stream that sends only comment
// lines (or lines that never end an event) is dropped after Timeout, as a
// stream that sends nothing is: the idle timer was reset by every line. The
// stream trickles such lines for ever, in a synctest bubble, so the drop
// comes from the idle timer alone and exactly at Timeout.
func TestFeedIdleCountsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		fd, _ := testFeed(t, &now, 0)
		fd.v.opts.Timeout = 200 * time.Millisecond
		fd.v.http = &http.Client{Transport: pipeStream(func(ctx context.Context, w io.Writer) error {
			for {
				if _, err := io.WriteString(w, ": still here\nevent: revoked\n"); err != nil {
					return err
				}
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		})}
		fd.eventsURL = "http://issuer.test/revocations/events"
		// A guard against the bug: in the bubble it costs no real time.
		ctx, cancel := context.WithTimeout(t.Context(), 100*fd.v.opts.Timeout)
		defer cancel()
		start := time.Now()
		_, err := fd.follow(ctx)
		if err == nil {
			t.Fatal("follow returned no error from a stream it dropped")
		}
		if took := time.Since(start); took != fd.v.opts.Timeout {
			t.Errorf("follow returned after %v (%v), want the stream dropped at Timeout %v", took, err, fd.v.opts.Timeout)
		}
	})
}

// pipeStream is a RoundTripper that answers every request with an event
// stream that write writes into a pipe, in memory, so that a synctest
// bubble sees every wait; the stream breaks when the request's context
// (which write is given) ends, as a connection's does.
type pipeStream func(ctx context.Context, w io.Writer) error

func (write pipeStream) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(req.Context(), pw)) }()
	go func() {
		<-req.Context().Done()
		pw.CloseWithError(req.Context().Err())
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: pr, Request: req,
	}, nil
}
