package clientauth_test

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/clientauth"
)

// newTLSIssuer starts an OpenID issuer on loopback over TLS, whose
// discovery document names jwksURI (given the issuer's URL) and which
// serves keys at /openid/v1/jwks; it returns the issuer's URL and a CA
// file its certificate chains to.
func newTLSIssuer(t *testing.T, jwksURI func(iss string) string, keys []byte) (iss, caFile string, hits *keyServer) {
	t.Helper()
	hits = &keyServer{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.hits.Add(1)
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			w.Write([]byte(`{"issuer":"` + iss + `","jwks_uri":"` + jwksURI(iss) + `"}`))
		case "/openid/v1/jwks":
			w.Write(keys)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	iss = srv.URL
	caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return iss, caFile, hits
}

// TestDiscoveryJWKSURIElsewhere: a discovery document of an issuer the
// operator trusts names, as its jwks_uri, a URL on another host or port
// (an admin route on loopback, the cloud metadata address, a private
// address), or one over plain http: the issuer requests none of them,
// and refuses without trying to connect (the issuer once requested the
// admin route, and tried to connect to the others).
func TestDiscoveryJWKSURIElsewhere(t *testing.T) {
	a := newSigner(t, clientauth.AlgES256, "a")
	for name, uri := range map[string]func(iss string, target *url.URL) string{
		"an admin route on loopback, http": func(_ string, target *url.URL) string {
			return target.String() + "/internal/admin/shutdown?from=discovery"
		},
		"another port of loopback, https":  func(_ string, target *url.URL) string { return "https://" + target.Host + "/jwks" },
		"a name of loopback, another port": func(_ string, target *url.URL) string { return "https://localhost:" + target.Port() + "/jwks" },
		"the issuer's host, plain http": func(iss string, _ *url.URL) string {
			return strings.Replace(iss, "https://", "http://", 1) + "/openid/v1/jwks"
		},
		"the cloud metadata address": func(string, *url.URL) string {
			return "https://169.254.169.254/latest/meta-data/iam/security-credentials/"
		},
		"a private address": func(string, *url.URL) string { return "https://10.0.0.1:8443/jwks" },
	} {
		t.Run(name, func(t *testing.T) {
			target := newKeyServer(t, jwks(t, a)) // an internal service on loopback
			tu, _ := url.Parse(target.URL)
			iss, ca, issuerHits := newTLSIssuer(t, func(iss string) string { return uri(iss, tu) }, jwks(t, a))
			f := newFetcher(t, clientauth.FetchOptions{Timeout: 3 * time.Second})
			start := time.Now()
			_, err := f.Keys(t.Context(), clientauth.Source{Issuer: iss, CAFile: ca})
			if !errors.Is(err, clientauth.ErrFetch) {
				t.Fatalf("Keys: %v, want %v", err, clientauth.ErrFetch)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %v: it tried to connect", d)
			}
			if got := target.conns.Load(); got != 0 {
				t.Errorf("the internal service got %d connections", got)
			}
			if got := issuerHits.hits.Load(); got != 1 {
				t.Errorf("the issuer got %d requests, want the discovery document's alone", got)
			}
		})
	}
}

// TestAddressRules: the addresses a fetch may connect to (address.go).
func TestAddressRules(t *testing.T) {
	private := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	for _, tt := range []struct {
		addr          string
		namedLoopback bool
		allow         []netip.Prefix
		ok            bool
	}{
		{"93.184.215.14", false, nil, true},
		{"2606:4700:4700::1111", false, nil, true},
		{"127.0.0.1", true, nil, true},   // a URL naming loopback: tests, development
		{"127.0.0.1", false, nil, false}, // a name that resolved to loopback, or a learned URL
		{"::1", false, nil, false},       //
		{"127.0.0.1", false, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, true},
		{"::ffff:127.0.0.1", false, nil, false},      // IPv4-mapped
		{"10.0.0.1", false, nil, false},              // private: only where allowed
		{"10.96.0.1", false, private, true},          // a cluster's Service
		{"172.16.0.1", false, nil, false},            //
		{"192.168.1.1", false, private, false},       // not in the allow-list
		{"100.64.0.1", false, nil, false},            // shared address space (CGNAT)
		{"fd12::1", false, nil, false},               // unique local
		{"fd12::1", false, private, true},            //
		{"198.18.0.1", false, nil, false},            // benchmarking: IANA special-purpose
		{"169.254.169.254", false, nil, false},       // the cloud metadata address
		{"169.254.169.254", true, everything, false}, // never, whatever the allow-list
		{"fe80::1", false, everything, false},        // link-local
		{"::ffff:169.254.169.254", false, everything, false},
		{"64:ff9b::a9fe:a9fe", false, everything, false}, // 169.254.169.254 through NAT64
		{"0.0.0.0", true, everything, false},             // unspecified: loopback on Linux
		{"0.1.2.3", false, everything, false},            // "this network"
		{"::", false, everything, false},                 //
		{"224.0.0.1", false, everything, false},          // multicast
		{"ff02::1", false, everything, false},            //
		{"255.255.255.255", false, everything, false},    // broadcast
	} {
		err := clientauth.CheckAddr(netip.MustParseAddr(tt.addr), tt.namedLoopback, tt.allow)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, clientauth.ErrAddress) {
			t.Errorf("%s (named loopback %v, allow %v): %v, want ok %v", tt.addr, tt.namedLoopback, tt.allow, err, tt.ok)
		}
	}
}

// TestFetchRefusesAddresses: a URL the operator wrote is held to the same
// address rules, before connecting (a jwks_uri of
// https://169.254.169.254/ was once accepted where http://169.254.169.254/ was
// not); and a learned URL on the issuer's own host, by a name that
// resolves to loopback, is refused when dialled.
func TestFetchRefusesAddresses(t *testing.T) {
	f := newFetcher(t, clientauth.FetchOptions{Timeout: 3 * time.Second})
	for _, u := range []string{
		"https://169.254.169.254/latest/meta-data/",
		"https://[fe80::1%25eth0]/jwks",
		"https://[::ffff:169.254.169.254]/jwks",
		"https://10.0.0.1:8443/jwks",
		"https://100.64.0.1/jwks",
		"https://0.0.0.0:443/jwks",
	} {
		start := time.Now()
		_, err := f.Keys(t.Context(), clientauth.Source{URL: u})
		if !errors.Is(err, clientauth.ErrFetch) || !errors.Is(err, clientauth.ErrAddress) {
			t.Errorf("%s: %v, want %v and %v", u, err, clientauth.ErrFetch, clientauth.ErrAddress)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: refused after %v: it tried to connect", u, d)
		}
	}

	// The issuer, written as http://localhost:PORT, names its keys on its
	// own host and port over https: a learned URL, whose name resolves to
	// loopback, which no learned URL may reach.
	srv := newKeyServer(t, nil)
	tu, _ := url.Parse(srv.URL)
	iss := "http://localhost:" + tu.Port()
	srv.set([]byte(`{"issuer":"`+iss+`","jwks_uri":"https://localhost:`+tu.Port()+`/jwks"}`), http.StatusOK)
	if _, err := f.Keys(t.Context(), clientauth.Source{Issuer: iss}); !errors.Is(err, clientauth.ErrAddress) {
		t.Errorf("a learned URL naming loopback: %v, want %v", err, clientauth.ErrAddress)
	}
	if got, conns := srv.hits.Load(), srv.conns.Load(); got != 1 || conns != 1 {
		t.Errorf("the issuer got %d requests on %d connections, want the discovery document's alone", got, conns)
	}
}

// TestFetcherForget: a set forgotten is fetched again at its next use,
// within its TTL.
func TestFetcherForget(t *testing.T) {
	a := newSigner(t, clientauth.AlgES256, "a")
	srv := newKeyServer(t, jwks(t, a))
	f := newFetcher(t, clientauth.FetchOptions{})
	src := clientauth.Source{URL: srv.URL}
	for range 2 {
		if _, err := f.Keys(t.Context(), src); err != nil {
			t.Fatal(err)
		}
	}
	f.Forget(src)
	f.Forget(clientauth.Source{URL: srv.URL + "/never-fetched"})
	if _, err := f.Keys(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("%d fetches, want 2: one before Forget, one after", got)
	}
}
