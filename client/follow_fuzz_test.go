package client

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// fuzzNonce is the nonce of the fuzzed stream's connection.
const fuzzNonce = "q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E"

// FuzzFeedStream feeds arbitrary bytes to the stream's parser (readLine,
// sseParser) and what it makes of them to applySET and applyHeartbeat, on
// a feed that knows one key and has applied a snapshot, on a connection
// (applyStream binds it). Nothing may panic;
// an event is applied, or a heartbeat makes the state fresh, only when its
// data verifies with that key as a JWT of its type (checked here with
// golang-jwt on its own); a line over maxFeedLine is refused.
func FuzzFeedStream(f *testing.F) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	sign := func(typ string, k ed25519.PrivateKey, claims jwt.MapClaims) string {
		return jwttest.Sign(f, jwt.SigningMethodEdDSA, k, map[string]any{"kid": "k1", "typ": typ}, claims)
	}
	set := func(k ed25519.PrivateKey, id string) string {
		return sign("secevent+jwt", k, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(), "jti": id,
			"events": map[string]any{revocation.EventTokenRevoked: map[string]any{"id": id, "kind": "t", "key": "42", "at": 5, "exp": now.Unix() + 60}}})
	}
	beat := sign("revocation-heartbeat+jwt", key, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(),
		"iat_ms": now.UnixMilli(), "epoch": "e1", "last": "e1-5-0", "age_ms": 3})
	stream := sign("revocation-stream+jwt", key, jwt.MapClaims{"iss": "https://issuer.test", "iat": now.Unix(),
		"iat_ms": now.UnixMilli(), "nonce": fuzzNonce})
	f.Add("event: stream\ndata: " + stream + "\n\nid: e1-5-0\nevent: revoked\ndata: " + set(key, "e1-5-0") +
		"\n\nevent: heartbeat\ndata: " + beat + "\n\n")
	f.Add("id: e1-5-0\nevent: revoked\ndata: " + set(other, "e1-5-0") + "\n\n")
	f.Add("id: e1-5-0\r\nevent: revoked\r\ndata: " + set(key, "e1-6-0") + "\r\n\r\n: comment\n\nevent: reset\ndata: {}\n\n")
	f.Add("event: heartbeat\ndata: " + strings.Repeat("a", maxFeedLine+10) + "\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		v := &Validator{opts: Options{Issuer: "https://issuer.test", Leeway: DefaultLeeway, FeedThreshold: DefaultFeedThreshold,
			MaxClockSkew: DefaultLeeway, JWKSMaxAge: time.Hour, JWKSMinInterval: time.Hour, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}}
		v.keys = presetKeys(t, v, "k1", pub)
		fd := newFeed(v, "http://issuer.test")
		fd.state, _ = revocation.FromSnapshot(v.stateOptions(), revocation.SnapshotState{Epoch: "e1", Last: "e1-0-0"}, now)
		verifies := func(raw, typ string) bool {
			tok, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"EdDSA"}))
			return err == nil && tok.Header["typ"] == typ
		}
		r := bufio.NewReaderSize(strings.NewReader(stream), 4096)
		var p sseParser
		cn := &conn{nonce: fuzzNonce, sent: now}
		for {
			line, err := readLine(r)
			if err != nil {
				return
			}
			if len(line) > maxFeedLine {
				t.Fatalf("a line of %d bytes read", len(line))
			}
			ev, ok, err := p.line(line)
			if err != nil {
				return
			}
			if !ok {
				continue
			}
			switch ev.name {
			case "stream":
				if err := fd.applyStream(context.Background(), cn, ev.data); err == nil && !verifies(ev.data, revocation.TypeStream) {
					t.Fatalf("bound by a stream JWT that does not verify: %q", ev.data)
				}
			case "revoked":
				before := fd.state.Last()
				if err := fd.applySET(context.Background(), ev.id, ev.data); err == nil && !verifies(ev.data, revocation.TypeSET) {
					t.Fatalf("applied a SET that does not verify: %q", ev.data)
				} else if err != nil && fd.state.Last() != before {
					t.Fatal("a refused SET moved last")
				}
			case "heartbeat":
				wasFresh := fd.decide(&Claims{JTI: "x", IssuedAt: now}) != revocation.Unknown
				if err := fd.applyHeartbeat(context.Background(), cn, ev.data); err == nil && !wasFresh &&
					fd.decide(&Claims{JTI: "x", IssuedAt: now}) != revocation.Unknown && !verifies(ev.data, revocation.TypeHeartbeat) {
					t.Fatalf("fresh from a heartbeat that does not verify: %q", ev.data)
				}
			}
		}
	})
}
