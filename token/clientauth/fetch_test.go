package clientauth_test

import (
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// keyServer serves a key set that a test changes, and counts requests.
type keyServer struct {
	mu     sync.Mutex
	body   []byte
	status int
	delay  time.Duration
	hits   atomic.Int32
	conns  atomic.Int32 // connections accepted, whether or not a request came
	auth   atomic.Value // the last Authorization header
	*httptest.Server
}

func newKeyServer(t *testing.T, body []byte) *keyServer {
	ks := &keyServer{body: body, status: http.StatusOK}
	ks.Server = httptest.NewUnstartedServer(ks)
	ks.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ks.conns.Add(1)
		}
	}
	ks.Start()
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ks.hits.Add(1)
	ks.auth.Store(r.Header.Get("Authorization"))
	ks.mu.Lock()
	body, status, delay := ks.body, ks.status, ks.delay
	ks.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.WriteHeader(status)
	w.Write(body)
}

func (ks *keyServer) set(body []byte, status int) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.body, ks.status = body, status
}

// TestFetcherCache: a set is fetched once within its TTL, again after it;
// an unknown kid refreshes it at most once per MinRefresh; a failed fetch
// serves the cached set until MaxStale, then fails closed.
func TestFetcherCache(t *testing.T) {
	a := newSigner(t, clientauth.AlgES256, "a")
	b := newSigner(t, clientauth.AlgRS256, "b")
	srv := newKeyServer(t, jwks(t, a))
	clock := clocktest.New(t0)
	v := newVerifier(t, clock, clientauth.FetchOptions{TTL: time.Minute, MinRefresh: 10 * time.Second, MaxStale: time.Hour})
	reg := clientauth.Registration{ClientID: "gw", JWKSURI: srv.URL}
	verify := func(s signer) error {
		c := claimsFor("gw")
		c["exp"] = clock.Now().Add(time.Minute).Unix()
		c["iat"] = clock.Now().Unix()
		return v.Verify(t.Context(), reg, s.sign(t, c))
	}
	hits := func(want int32) {
		t.Helper()
		if got := srv.hits.Load(); got != want {
			t.Fatalf("%d fetches, want %d", got, want)
		}
	}
	if err := verify(a); err != nil {
		t.Fatal(err)
	}
	if err := verify(a); err != nil {
		t.Fatal(err)
	}
	hits(1)

	// b is published; its first assertion refreshes the set.
	srv.set(jwks(t, a, b), http.StatusOK)
	clock.Add(11 * time.Second)
	if err := verify(b); err != nil {
		t.Fatalf("a new kid: %v", err)
	}
	hits(2)
	// Made-up kids: at most one fetch per MinRefresh.
	stranger := newSigner(t, clientauth.AlgEdDSA, "made-up")
	for range 5 {
		if err := verify(stranger); !errors.Is(err, clientauth.ErrUnknownKey) {
			t.Fatalf("unknown kid: %v, want %v", err, clientauth.ErrUnknownKey)
		}
	}
	hits(2) // the last fetch was less than 10 s ago
	clock.Add(10 * time.Second)
	verify(stranger)
	verify(stranger)
	hits(3)

	// The server fails: the cached set serves past its TTL, until MaxStale.
	srv.set([]byte("oops"), http.StatusInternalServerError)
	clock.Add(2 * time.Minute)
	if err := verify(a); err != nil {
		t.Fatalf("server failing, set stale within MaxStale: %v", err)
	}
	hits(4)
	clock.Add(time.Hour)
	if err := verify(a); !errors.Is(err, clientauth.ErrFetch) {
		t.Fatalf("past MaxStale: %v, want %v", err, clientauth.ErrFetch)
	}
	// It comes back.
	srv.set(jwks(t, a), http.StatusOK)
	clock.Add(10 * time.Second)
	if err := verify(a); err != nil {
		t.Fatalf("server back: %v", err)
	}
}

// TestFetcherBounds: a slow server, a huge body, an error status, a body
// that is not a key set, a redirect to another host: each is a failed
// fetch, and the first within the timeout.
func TestFetcherBounds(t *testing.T) {
	a := newSigner(t, clientauth.AlgES256, "a")
	good := jwks(t, a)
	elsewhere := newKeyServer(t, good)
	tests := []struct {
		name  string
		setup func(*keyServer)
	}{
		{"slow", func(s *keyServer) { s.delay = 2 * time.Second }},
		{"huge", func(s *keyServer) { s.body = append(good, strings.Repeat(" ", 300<<10)...) }},
		{"500", func(s *keyServer) { s.status = http.StatusInternalServerError }},
		{"not a key set", func(s *keyServer) { s.body = []byte(`<html>`) }},
		{"private key", func(s *keyServer) { s.body = []byte(`{"keys":[{"kty":"oct","k":"AA"}]}`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newKeyServer(t, good)
			tt.setup(srv)
			f := newFetcher(t, clientauth.FetchOptions{Timeout: 300 * time.Millisecond})
			start := time.Now()
			_, err := f.Keys(t.Context(), clientauth.Source{URL: srv.URL})
			if !errors.Is(err, clientauth.ErrFetch) {
				t.Fatalf("Keys: %v, want %v", err, clientauth.ErrFetch)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v, want the timeout (300ms)", d)
			}
		})
	}
	t.Run("redirect to another host", func(t *testing.T) {
		redirect := httptest.NewServer(http.RedirectHandler(strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1), http.StatusFound))
		t.Cleanup(redirect.Close)
		f := newFetcher(t, clientauth.FetchOptions{})
		if _, err := f.Keys(t.Context(), clientauth.Source{URL: redirect.URL}); !errors.Is(err, clientauth.ErrFetch) {
			t.Fatalf("Keys: %v, want %v", err, clientauth.ErrFetch)
		}
		if elsewhere.hits.Load() != 0 {
			t.Errorf("the other host was asked")
		}
	})
}

// TestFetcherDiscovery: without a URL, the keys are the issuer's discovery
// document's jwks_uri, over TLS with the source's CA file, and the bearer
// token file (read at each fetch) goes with both requests. The jwks_uri is
// on loopback, which a learned URL reaches only by the allow-list.
func TestFetcherDiscovery(t *testing.T) {
	a := newSigner(t, clientauth.AlgRS256, "a")
	var iss string
	var auths []string
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			w.Write([]byte(`{"issuer":"` + iss + `","jwks_uri":"` + iss + `/openid/v1/jwks"}`))
		case "/openid/v1/jwks":
			w.Write(jwks(t, a))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	iss = srv.URL
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	tok := filepath.Join(dir, "token")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	os.WriteFile(tok, []byte("first\n"), 0o600)
	src := clientauth.Source{Issuer: iss, CAFile: ca, BearerTokenFile: tok}
	opts := clientauth.FetchOptions{AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

	f := newFetcher(t, opts)
	ks, err := f.Keys(t.Context(), src)
	if err != nil || ks.Len() != 1 {
		t.Fatalf("Keys: %v", err)
	}
	os.WriteFile(tok, []byte("second"), 0o600)
	if _, err := newFetcher(t, opts).Keys(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	// Without the allow-list, the learned URL's loopback address is refused.
	if _, err := newFetcher(t, clientauth.FetchOptions{}).Keys(t.Context(), src); !errors.Is(err, clientauth.ErrAddress) {
		t.Errorf("without the allow-list: %v, want %v", err, clientauth.ErrAddress)
	}
	want := []string{"Bearer first", "Bearer first", "Bearer second", "Bearer second", "Bearer second"}
	if strings.Join(auths, ",") != strings.Join(want, ",") {
		t.Errorf("Authorization headers %q, want %q", auths, want)
	}
	// Without the CA file, the server's certificate is unknown.
	if _, err := newFetcher(t, clientauth.FetchOptions{}).Keys(t.Context(), clientauth.Source{Issuer: iss}); !errors.Is(err, clientauth.ErrFetch) {
		t.Errorf("without the CA: %v, want %v", err, clientauth.ErrFetch)
	}
	// A document naming another issuer.
	if _, err := newFetcher(t, opts).Keys(t.Context(), clientauth.Source{Issuer: iss + "/x", CAFile: ca}); !errors.Is(err, clientauth.ErrFetch) {
		t.Errorf("another issuer: %v, want %v", err, clientauth.ErrFetch)
	}
}

// TestCheckURL: https, or http to localhost only; an address as the host
// not one no fetch connects to (a private one is checked when fetched,
// against the allow-list).
func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://kubernetes.default.svc/openid/v1/jwks": true,
		"https://10.96.0.1/openid/v1/jwks":              true,
		"https://[fd00::1]/jwks":                        true,
		"https://127.0.0.1:8443/jwks":                   true,
		"https://169.254.169.254/latest/meta-data/":     false,
		"http://169.254.169.254/latest/meta-data/":      false,
		"https://[fe80::1%25eth0]/jwks":                 false,
		"https://[::ffff:169.254.169.254]/jwks":         false,
		"https://0.0.0.0/jwks":                          false,
		"https://224.0.0.1/jwks":                        false,
		"http://10.0.0.1/jwks":                          false,
		"http://localhost:8080/jwks":                    true,
		"http://127.0.0.1/jwks":                         true,
		"http://[::1]/jwks":                             true,
		"http://keys.example/jwks":                      false,
		"ftp://keys.example/jwks":                       false,
		"https://user:pw@keys.example/jwks":             false,
		"https://keys.example/jwks#x":                   false,
		"/jwks":                                         false,
		"":                                              false,
	} {
		if err := clientauth.CheckURL(raw); (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}

// TestFetcherServesWhileFetching: while a fetch hangs (an unknown kid sent
// it to a slow key server), assertions under a cached kid are checked from
// the cache, within the TTL and past it, without waiting for it.
func TestFetcherServesWhileFetching(t *testing.T) {
	a := newSigner(t, clientauth.AlgES256, "a")
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 2 {
			arrived <- struct{}{}
			<-release
		}
		w.Write(jwks(t, a))
	}))
	t.Cleanup(srv.Close)
	clock := clocktest.New(t0)
	v := newVerifier(t, clock, clientauth.FetchOptions{TTL: time.Minute, Timeout: time.Minute})
	reg := clientauth.Registration{ClientID: "gw", JWKSURI: srv.URL}
	verify := func(s signer) error {
		c := claimsFor("gw")
		c["exp"], c["iat"] = clock.Now().Add(time.Minute).Unix(), clock.Now().Unix()
		return v.Verify(t.Context(), reg, s.sign(t, c))
	}
	if err := verify(a); err != nil {
		t.Fatal(err)
	}
	clock.Add(11 * time.Second)
	stranger := newSigner(t, clientauth.AlgEdDSA, "made-up")
	result := make(chan error, 1)
	go func() { result <- verify(stranger) }()
	<-arrived // the refresh hangs at the server
	if err := verify(a); err != nil {
		t.Fatalf("a cached kid during the fetch: %v", err)
	}
	clock.Add(time.Minute) // past the TTL: still served, a fetch under way
	if err := verify(a); err != nil {
		t.Fatalf("a cached kid past the TTL during the fetch: %v", err)
	}
	close(release)
	if err := <-result; !errors.Is(err, clientauth.ErrUnknownKey) {
		t.Errorf("unknown kid: %v, want %v", err, clientauth.ErrUnknownKey)
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}
}

// TestFetchOptionsNegative: zero is each option's default, a negative one
// an error of NewFetcher and New.
func TestFetchOptionsNegative(t *testing.T) {
	for _, o := range []clientauth.FetchOptions{{Timeout: -1}, {MaxBytes: -1}, {TTL: -time.Second}, {MinRefresh: -1}, {MaxStale: -1}} {
		if _, err := clientauth.NewFetcher(o); err == nil {
			t.Errorf("NewFetcher(%+v): no error", o)
		}
	}
	if _, err := clientauth.NewFetcher(clientauth.FetchOptions{}); err != nil {
		t.Errorf("NewFetcher(zero): %v", err)
	}
}
