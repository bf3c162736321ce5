package revfeed_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

const (
	testIssuer = "https://issuer.test"
	epoch      = revfeedtest.Epoch
)

// add applies an event to src, a ms after the last.
func add(src *revfeedtest.Source, kind revocation.Kind, key string) revocation.Event {
	at := int64(revfeedtest.Horizon + 1 + len(src.Events()))
	return src.Add(kind, key, at, 2_000_000_000)
}

// issuer is the real handlers' gin engine with the feed, behind an
// httptest.Server.
type issuer struct {
	URL      string
	pub      ed25519.PublicKey
	kid      string
	creds    map[string]string // client ID -> secret
	registry *prometheus.Registry
	server   *handlers.Server
	svc      *token.Service
	clients  *clients.Registry
	key      keyset.Key
	log      *logtest.Buffer // the handlers' log, JSON
}

// newIssuer serves src (nil: no feed) with opts.
func newIssuer(t testing.TB, src revfeed.Source, opts revfeed.Options) *issuer {
	t.Helper()
	key := keysettest.MustKey(t)
	keys, err := keyset.New(key)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{pub: key.Private.Public().(ed25519.PublicKey), kid: key.ID, creds: map[string]string{}, registry: prometheus.NewRegistry(),
		log: new(logtest.Buffer)}
	var list []clients.Client
	for _, c := range []clients.Client{
		{ID: "api", Scopes: []string{}, RevocationFeed: true},
		{ID: "ops", Scopes: []string{}, Admin: true},
		{ID: "svc", Scopes: []string{"read"}},
	} {
		secret, sum, err := clients.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		c.SecretSHA256, is.creds[c.ID] = sum, secret
		list = append(list, c)
	}
	clients, err := clients.New(list)
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
	t.Cleanup(store.Close)
	svc, err := token.NewService(keys, store, ids, token.Options{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	is.svc, is.clients, is.key = svc, clients, key
	is.server, err = handlers.NewServer(handlers.Options{Service: svc, Clients: clients, IDs: ids,
		Logger: slog.New(slog.NewJSONHandler(is.log, nil)), Registry: is.registry, Feed: src, FeedOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(is.server.Engine())
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// get sends GET path as client id (empty: no credentials).
func (is *issuer) get(t *testing.T, ctx context.Context, path, id string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, is.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		req.SetBasicAuth(id, is.creds[id])
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// event is one SSE event.
type event struct{ id, name, data string }

// readEvents reads the events of body onto the returned channel, closed at
// the end of the stream.
func readEvents(body io.Reader) <-chan event {
	out := make(chan event, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// hangGuard bounds how long a test waits for something that must come;
// it is no timing assertion.
const hangGuard = 20 * time.Second

func next(t *testing.T, evs <-chan event) event {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(hangGuard):
		t.Fatal("no event")
	}
	return event{}
}

// nextNamed skips heartbeats until an event named name.
func nextNamed(t *testing.T, evs <-chan event, name string) event {
	t.Helper()
	for {
		if ev := next(t, evs); ev.name == name {
			return ev
		}
	}
}

// verify checks raw's signature with the issuer's key and its typ, into claims.
func (is *issuer) verify(t *testing.T, raw, typ string, claims jwt.Claims) {
	t.Helper()
	tok, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Header["kid"] != is.kid {
			return nil, fmt.Errorf("kid %v", tok.Header["kid"])
		}
		return is.pub, nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(testIssuer), jwt.WithIssuedAt())
	if err != nil {
		t.Fatalf("%s does not verify: %v", typ, err)
	}
	if tok.Header["typ"] != typ {
		t.Fatalf("typ %v, want %s", tok.Header["typ"], typ)
	}
}

// TestFeedAuth checks who may follow the feed: 401 without credentials or
// with a wrong secret, 403 for a client without revocation_feed, 200 for
// one with it and for an admin; and 404 where no feed is served.
func TestFeedAuth(t *testing.T) {
	src := revfeedtest.New(true)
	is := newIssuer(t, src, revfeed.Options{})
	for _, path := range []string{"/revocations/events", "/revocations"} {
		for id, want := range map[string]int{"": 401, "svc": 403, "api": 200, "ops": 200} {
			resp := is.get(t, t.Context(), path, id, nil)
			_, _ = io.Copy(io.Discard, resp.Body) // a stream without Last-Event-ID resets and ends
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s as %q: %d, want %d", path, id, resp.StatusCode, want)
			}
			if want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("%s: 401 without a Basic challenge", path)
			}
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, is.URL+path, nil)
		req.SetBasicAuth("api", "wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s with a wrong secret: %d, want 401", path, resp.StatusCode)
		}
	}
	none := newIssuer(t, nil, revfeed.Options{})
	resp := none.get(t, t.Context(), "/revocations/events", "ops", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("without a feed: %d, want 404", resp.StatusCode)
	}
}

// TestSignedWithCurrentKeys checks that after a key rotation (Server.Swap)
// the feed signs with the new signing key, which the JWKS then holds.
func TestSignedWithCurrentKeys(t *testing.T) {
	src := revfeedtest.New(true)
	is := newIssuer(t, src, revfeed.Options{})
	next := keysettest.MustKey(t)
	keys, err := keyset.New(next, is.key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := is.svc.WithKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	is.server.Swap(svc, is.clients, handlers.Version{})
	is.pub, is.kid = next.Private.Public().(ed25519.PublicKey), next.ID
	resp := is.get(t, t.Context(), "/revocations", "api", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var cl revocation.SnapshotClaims
	is.verify(t, string(body), revocation.TypeSnapshot, &cl) // checks the kid
}

// testNonce is a nonce as the client module makes one: 32 bytes, base64url.
const testNonce = "q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E"
