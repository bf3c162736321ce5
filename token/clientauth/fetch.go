package clientauth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// FetchOptions configure a Fetcher. Zero values mean the defaults given.
type FetchOptions struct {
	// Timeout bounds one fetch: connecting, TLS, and reading the whole
	// answer (with discovery, each of its two requests). Zero means 5 s.
	Timeout time.Duration
	// MaxBytes bounds an answer's body. Zero means 256 KiB.
	MaxBytes int64
	// TTL is how long a fetched set is used before it is fetched again.
	// Zero means 5 min.
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

// Fetcher fetches key sets and caches them by Source. Sources come from the
// clients file, never from a request, so the cache holds as many sets as
// the file names (a reload that changes or removes a client drops its set:
// Forget).
type Fetcher struct {
	opts FetchOptions
	mu   sync.Mutex
	sets map[Source]*cached
}

// cached is one source's set. mu guards the fields only, never a fetch: a
// fetch runs in the goroutine that needed it, with inflight set, while the
// others serve the set they have (or wait for it, with nothing to serve or
// an unknown kid).
type cached struct {
	mu       sync.Mutex
	keys     *KeySet       // nil until a fetch succeeds
	fetched  time.Time     // when keys were
	tried    time.Time     // when the last fetch began, successful or not
	err      error         // the last fetch's error, nil if it succeeded
	inflight chan struct{} // closed when the fetch under way ends; nil if none
}

// NewFetcher returns a Fetcher with an empty cache.
func NewFetcher(opts FetchOptions) *Fetcher {
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 256 << 10
	}
	if opts.TTL == 0 {
		opts.TTL = 5 * time.Minute
	}
	if opts.MinRefresh == 0 {
		opts.MinRefresh = 10 * time.Second
	}
	if opts.MaxStale == 0 {
		opts.MaxStale = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Fetcher{opts: opts, sets: make(map[Source]*cached)}
}

// Keys returns src's key set: the cached one within its TTL, or past it
// while another request fetches it again; else it fetches.
func (f *Fetcher) Keys(ctx context.Context, src Source) (*KeySet, error) {
	c := f.entry(src)
	now := f.opts.Now()
	c.mu.Lock()
	age := now.Sub(c.fetched)
	if c.keys != nil && (age < f.opts.TTL || c.inflight != nil && age < f.opts.TTL+f.opts.MaxStale) {
		ks := c.keys
		c.mu.Unlock()
		return ks, nil
	}
	c.mu.Unlock()
	return f.refresh(ctx, c, src, now)
}

// Refresh fetches src's key set again, as for an assertion whose kid the
// cached set does not hold, unless a fetch began less than MinRefresh ago
// (then it returns the cached set) or is under way (then it waits for it).
func (f *Fetcher) Refresh(ctx context.Context, src Source) (*KeySet, error) {
	return f.refresh(ctx, f.entry(src), src, f.opts.Now())
}

// Forget drops src's cached set, if any: the next use fetches it again.
// A fetch under way ends in the dropped entry, and serves only the
// requests that were waiting for it.
func (f *Fetcher) Forget(src Source) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sets, src)
}

// entry returns src's cache entry, made if new.
func (f *Fetcher) entry(src Source) *cached {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.sets[src]
	if !ok {
		c = &cached{}
		f.sets[src] = c
	}
	return c
}

// refresh waits for the fetch of c's set under way, if any; else fetches
// it, unless one began less than MinRefresh ago. It returns what c then
// serves: its set while younger than TTL + MaxStale, else the last fetch's
// error.
func (f *Fetcher) refresh(ctx context.Context, c *cached, src Source, now time.Time) (*KeySet, error) {
	c.mu.Lock()
	switch {
	case c.inflight != nil:
		done := c.inflight
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for the fetch under way: %w", ErrFetch, ctx.Err())
		}
		c.mu.Lock()
	case c.tried.IsZero() || now.Sub(c.tried) >= f.opts.MinRefresh:
		done := make(chan struct{})
		c.tried, c.inflight = now, done
		c.mu.Unlock()
		ks, err := f.fetch(ctx, src)
		c.mu.Lock()
		if err == nil {
			c.keys, c.fetched = ks, now
		}
		c.err, c.inflight = err, nil
		close(done)
	}
	defer c.mu.Unlock()
	if c.keys != nil && now.Sub(c.fetched) < f.opts.TTL+f.opts.MaxStale {
		return c.keys, nil
	}
	if c.err != nil {
		return nil, c.err
	}
	return nil, fmt.Errorf("%w: stale and not fetched again yet", ErrFetch)
}

// fetch reads src's key set, through its discovery document if it has no
// URL. Each URL is held to the address rules (address.go): src's as one the
// operator wrote, the document's jwks_uri as one learned.
func (f *Fetcher) fetch(ctx context.Context, src Source) (*KeySet, error) {
	// The fetch serves every request waiting for it: the one that started
	// it going away must not end it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opts.Timeout)
	defer cancel()
	jwksURL, rules := src.URL, f.learnedRules()
	if jwksURL == "" {
		var err error
		if jwksURL, err = f.discover(ctx, src); err != nil {
			return nil, err
		}
	} else if u, err := url.Parse(jwksURL); err == nil {
		rules = f.writtenRules(u)
	}
	body, err := f.get(ctx, src, jwksURL, rules)
	if err != nil {
		return nil, err
	}
	ks, err := ParseJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, jwksURL, err)
	}
	return ks, nil
}

// discover reads src.Issuer's OpenID discovery document and returns its
// jwks_uri, once checkLearned accepts it.
func (f *Fetcher) discover(ctx context.Context, src Source) (string, error) {
	iss, err := url.Parse(src.Issuer)
	if err != nil {
		return "", fmt.Errorf("%w: issuer %.128q is not a URL", ErrFetch, src.Issuer)
	}
	u := strings.TrimRight(src.Issuer, "/") + "/.well-known/openid-configuration"
	body, err := f.get(ctx, src, u, f.writtenRules(iss))
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
// connecting only to the addresses rules allow.
func (f *Fetcher) get(ctx context.Context, src Source, u string, rules dialRules) ([]byte, error) {
	client, err := f.client(src, rules)
	if err != nil {
		return nil, err
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFetch, err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	if src.BearerTokenFile != "" && tokenGoesTo(src, req.URL) {
		tok, err := readToken(src.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %d", ErrFetch, u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, u, err)
	}
	if int64(len(body)) > f.opts.MaxBytes {
		return nil, fmt.Errorf("%w: %s: answer larger than %d bytes", ErrFetch, u, f.opts.MaxBytes)
	}
	return body, nil
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
