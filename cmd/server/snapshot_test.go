package server

import (
	"bufio"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// TestLargeSnapshotServed: a snapshot of 200,000 subject revocations
// (17.6 MB) is answered in full through the http.Server serve builds
// (newHTTPServer: WriteTimeout 10 s, from when the request was read) to a
// consumer that starts reading it 11 s after it asked, as a slow link or
// snapshots built one after another make it: the feed sets the answer's
// write deadline when it starts writing, sized to the body.
func TestLargeSnapshotServed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 11 s, past the server's WriteTimeout")
	}
	const n = 200_000
	src := revfeedtest.NewLarge(revocation.KindSubject, n)
	key := keysettest.MustKey(t)
	keys, err := keyset.New(key)
	if err != nil {
		t.Fatal(err)
	}
	secret, sum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	clients, err := clients.New([]clients.Client{{ID: "consumer", SecretSHA256: sum, Scopes: []string{}, RevocationFeed: true}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.New(t)
	store, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := token.NewService(keys, store, ids, token.Options{Issuer: "https://issuer.test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.DiscardHandler)
	h, err := handlers.NewServer(handlers.Options{Service: svc, Clients: clients, IDs: ids, Logger: log, Feed: src})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(h.Engine(), log)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Little room in the socket buffers: the answer waits for the reader.
	if err := conn.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	const nonce = "q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E"
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/revocations?nonce="+nonce, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("consumer", secret)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second) // the server's own clock: no time to inject
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the snapshot cut off after %d bytes: %v", len(body), err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("status %d, Content-Length %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Length"), len(body))
	}
	var cl revocation.SnapshotClaims
	if _, err := jwt.ParseWithClaims(string(body), &cl, func(*jwt.Token) (any, error) { return key.Private.Public().(ed25519.PublicKey), nil },
		jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		t.Fatal(err)
	}
	if cl.Nonce != nonce || len(cl.Subjects) != n {
		t.Fatalf("nonce %q, %d subjects; want %q, %d", cl.Nonce, len(cl.Subjects), nonce, n)
	}
}
