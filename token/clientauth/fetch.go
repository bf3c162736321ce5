package clientauth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snowtoken/snowtoken/client/jwk"
)

// FetchOptions configure a Fetcher. Zero values mean the defaults given; a
// negative one is an error of NewFetcher.
type FetchOptions struct {
	// Timeout bounds one fetch: connecting, TLS, and reading the whole
	// answer (with discovery, each of its two requests). Zero means 5 s.
	Timeout time.Duration
	// MaxBytes bounds an answer's body. Zero means 256 KiB.
	MaxBytes int64
	// TTL is how long a fetched set is used before it is fetched again.
	// Zero means the max-age of the key server's answer (Cache-Control), at
	// least MinRefresh and at most 5 min, or 5 min if it gives none
	// (jwk.CacheOptions.TTL).
	TTL time.Duration
	// MinRefresh is the least time between two fetches of one source,
	// whatever asks for them (an assertion with an unknown kid, a failed
	// fetch): a stranger's made-up kids cost at most one fetch per
	// MinRefresh. Zero means 10 s.
	MinRefresh time.Duration
	// MaxStale is how long past its TTL a set still serves while fetching
	// it again fails; then its assertions are refused (fail closed). Zero
	// means 1 h.
	MaxStale time.Duration
	// AllowNets are the networks beyond the public ones a fetch may
	// connect to: private ones (10.0.0.0/8, the Services of a cluster),
	// and loopback for a URL a discovery document names. Nil means none:
	// see the address rules (address.go). Link-local, unspecified and
	// multicast addresses are refused even within one.
	AllowNets []netip.Prefix
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Source is where a key set is fetched from: URL, or, without one, the
// jwks_uri of Issuer's OpenID discovery document
// (Issuer/.well-known/openid-configuration, whose issuer must be Issuer).
// CAFile, if set, holds the PEM CA certificates the server's certificate
// must chain to, instead of the system's; BearerTokenFile, if set, holds a
// token sent as "Authorization: Bearer" (a Kubernetes API server answers
// only authenticated requests for its keys). Both are read again at each
// fetch, so that a rotated CA or token is used as soon as it is mounted.
// The token goes only to URL's host, or to Issuer's.
type Source struct {
	URL             string
	Issuer          string
	CAFile          string
	BearerTokenFile string
}

// Fetcher fetches key sets and caches them by Source, in a jwk.Cache (the
// one fetch-and-cache type of issuer and consuming services alike: TTL or
// the answer's max-age, MinRefresh between fetches, MaxStale, then fail
// closed). Sources come from the clients file, never from a request, so
// the cache holds as many sets as the file names (a reload that changes or
// removes a client drops its set: Forget). What is ours: the Source
// (discovery, a CA file, a bearer token) and the address rules each
// connection is held to (address.go).
type Fetcher struct {
	opts  FetchOptions
	cache *jwk.Cache[Source]
}

// NewFetcher returns a Fetcher with an empty cache; a negative option is
// an error.
func NewFetcher(opts FetchOptions) (*Fetcher, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("clientauth: FetchOptions.MaxBytes %d is negative: zero means %d", opts.MaxBytes, jwk.DefaultMaxBytes)
	}
	if opts.Timeout == 0 {
		opts.Timeout = jwk.DefaultTimeout
	}
	f := &Fetcher{opts: opts}
	c, err := jwk.NewCache(jwk.CacheOptions{
		Timeout: opts.Timeout, TTL: opts.TTL, MinRefresh: opts.MinRefresh, MaxStale: opts.MaxStale, Now: opts.Now,
	}, f.fetch)
	if err != nil {
		return nil, fmt.Errorf("clientauth: FetchOptions: %w", err)
	}
	f.cache = c
	return f, nil
}

// Keys returns src's key set: the cached one within its TTL, or past it
// while another request fetches it again; else it fetches.
func (f *Fetcher) Keys(ctx context.Context, src Source) (*KeySet, error) {
	return keySet(f.cache.Keys(ctx, src))
}

// Refresh fetches src's key set again, as for an assertion whose kid the
// cached set does not hold, unless a fetch began less than MinRefresh ago
// (then it returns the cached set) or is under way (then it waits for it).
func (f *Fetcher) Refresh(ctx context.Context, src Source) (*KeySet, error) {
	return keySet(f.cache.Refresh(ctx, src))
}

// Forget drops src's cached set, if any: the next use fetches it again.
// A fetch under way ends in the dropped entry, and serves only the
// requests that were waiting for it.
func (f *Fetcher) Forget(src Source) { f.cache.Forget(src) }

// keySet is the cache's answer as this package's: a KeySet, or an error
// that is ErrFetch (the cache's own, such as a wait cut short, are not
// yet).
func keySet(s *jwk.Set, err error) (*KeySet, error) {
	switch {
	case err == nil:
		return &KeySet{keys: s.Keys()}, nil
	case errors.Is(err, ErrFetch):
		return nil, err
	}
	return nil, fmt.Errorf("%w: %w", ErrFetch, err)
}

// fetch reads src's key set, through its discovery document if it has no
// URL. Each URL is held to the address rules (address.go): src's as one the
// operator wrote, the document's jwks_uri as one learned. The cache bounds
// it by Timeout.
func (f *Fetcher) fetch(ctx context.Context, src Source) (*jwk.Set, time.Duration, error) {
	jwksURL, rules := src.URL, f.learnedRules()
	if jwksURL == "" {
		var err error
		if jwksURL, err = f.discover(ctx, src); err != nil {
			return nil, 0, err
		}
	} else if u, err := url.Parse(jwksURL); err == nil {
		rules = f.writtenRules(u)
	}
	body, maxAge, err := f.get(ctx, src, jwksURL, rules)
	if err != nil {
		return nil, 0, err
	}
	s, err := jwk.ParseSet(body, Algorithms...)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrFetch, jwksURL, setError(err))
	}
	return s, maxAge, nil
}

// discover reads src.Issuer's OpenID discovery document and returns its
// jwks_uri, once checkLearned accepts it.
func (f *Fetcher) discover(ctx context.Context, src Source) (string, error) {
	iss, err := url.Parse(src.Issuer)
	if err != nil {
		return "", fmt.Errorf("%w: issuer %.128q is not a URL", ErrFetch, src.Issuer)
	}
	u := strings.TrimRight(src.Issuer, "/") + "/.well-known/openid-configuration"
	body, _, err := f.get(ctx, src, u, f.writtenRules(iss))
	if err != nil {
		return "", err
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := jsonv2.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("%w: %s: not a discovery document: %w", ErrFetch, u, err)
	}
	if doc.Issuer != src.Issuer {
		return "", fmt.Errorf("%w: %s: issuer %.128q, want %q", ErrFetch, u, doc.Issuer, src.Issuer)
	}
	if err := checkLearned(doc.JWKSURI, src.Issuer, f.learnedRules()); err != nil {
		return "", fmt.Errorf("%w: %s: jwks_uri: %w", ErrFetch, u, err)
	}
	return doc.JWKSURI, nil
}

// get reads the body of u, at most MaxBytes, which must answer 200,
// connecting only to the addresses rules allow (jwk.Get), and the max-age
// of its answer.
func (f *Fetcher) get(ctx context.Context, src Source, u string, rules dialRules) ([]byte, time.Duration, error) {
	client, err := f.client(src, rules)
	if err != nil {
		return nil, 0, err
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrFetch, err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	if src.BearerTokenFile != "" && tokenGoesTo(src, req.URL) {
		tok, err := readToken(src.BearerTokenFile)
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	body, maxAge, err := jwk.Get(client, req, f.opts.MaxBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrFetch, err)
	}
	return body, maxAge, nil
}

// tokenGoesTo reports whether src's bearer token may be sent to u: the host
// of src.URL, or of src.Issuer (with discovery).
func tokenGoesTo(src Source, u *url.URL) bool {
	for _, s := range []string{src.URL, src.Issuer} {
		if p, err := url.Parse(s); err == nil && s != "" && p.Host == u.Host {
			return true
		}
	}
	return false
}

// maxTokenFileBytes bounds a bearer token file.
const maxTokenFileBytes = 16 << 10

// readToken reads a bearer token file: one line of at most
// maxTokenFileBytes, without spaces.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: bearer_token_file: %w", ErrFetch, err)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" || len(tok) > maxTokenFileBytes || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%w: bearer_token_file %s: not one token", ErrFetch, path)
	}
	return tok, nil
}

// client returns an HTTP client for src: bounded in time, TLS with src's
// CA file if it has one, following a redirect only to the same host and
// scheme, connecting only to the addresses rules allow (through a proxy of
// HTTPS_PROXY, the proxy's address is the one checked).
func (f *Fetcher) client(src Source, rules dialRules) (*http.Client, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if src.CAFile != "" {
		pool, err := loadCA(src.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFetch, err)
		}
		tlsConf.RootCAs = pool
	}
	t := f.opts.Timeout
	tr := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: t, Control: rules.control}).DialContext,
		TLSClientConfig:        tlsConf,
		TLSHandshakeTimeout:    t,
		ResponseHeaderTimeout:  t,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
	}
	return &http.Client{Transport: tr, Timeout: t, CheckRedirect: checkRedirect}, nil
}

// errRedirect refuses a redirect elsewhere.
var errRedirect = errors.New("redirect to another host or scheme refused")

// checkRedirect follows at most 3 redirects, each to the first request's
// host and scheme.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if len(via) > 3 || req.URL.Host != first.Host || req.URL.Scheme != first.Scheme {
		return errRedirect
	}
	return nil
}

// loadCA reads a PEM file of CA certificates.
func loadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("ca_file %s: no PEM certificate", path)
	}
	return pool, nil
}
