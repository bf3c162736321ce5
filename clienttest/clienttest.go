// Package clienttest runs a real snowtoken issuer in-process, for tests and
// examples of services that accept its tokens: the same token.Service and
// gin handlers as the snowtoken binary, served by an httptest.Server, with
// one client allowed to ask for tokens. It is in the root module, not the
// client module, because it runs the issuer (gin, go-redis): a service's
// tests may import it; the service itself imports only the client module.
package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/txn"
)

// Config configures an Issuer. Zero values mean the documented defaults.
type Config struct {
	// Redis holds the sessions. Nil means an embedded miniredis of its own.
	Redis redis.UniversalClient
	// Prefix starts every Redis key. Empty means redisstore.DefaultKeyPrefix.
	Prefix string
	// ClientID names the client tokens are issued to. Empty means "orders-app".
	ClientID string
	// Scopes are the client's. Nil means orders:read and orders:write.
	Scopes []string
	// Audiences are the client's; its tokens carry the first as aud. Nil
	// means none: tokens without aud.
	Audiences []string
	// TokenFormat is the client's token_format: "jwt" (or empty) or
	// "opaque", which only Remote mode can check.
	TokenFormat string
	// WorkerID goes into every token ID.
	WorkerID int64
	// Now is the issuer's clock for iat, exp and validation. Nil means
	// time.Now. Share it with the code under test to move both in step.
	Now func() time.Time
	// Feed, if set, is the revocation log the issuer serves at
	// /revocations/events (package revfeed), which the client, an admin,
	// may follow (client.Follow). Nil means no feed: those routes are 404.
	Feed revfeed.Source
	// TrustedProxies are the addresses and CIDRs whose X-Forwarded-For
	// names the client's address (SNOWTOKEN_TRUSTED_PROXIES). Nil means
	// none.
	TrustedProxies []string
	// DPoPForwarders are the addresses and CIDRs whose X-Forwarded-Method,
	// -Proto, -Host and -Uri name the original request of a DPoP proof
	// (SNOWTOKEN_DPOP_FORWARDERS): list "127.0.0.1" for a service under
	// test that validates DPoP-bound tokens in Remote mode. Nil means none
	// (not TrustedProxies, as an unset SNOWTOKEN_DPOP_FORWARDERS would).
	DPoPForwarders []string
	// DPoPNonces makes DPoP proofs carry a server nonce
	// (SNOWTOKEN_DPOP_NONCE).
	DPoPNonces bool
	// TxnTrustDomain turns Transaction Tokens on, for this trust domain
	// (SNOWTOKEN_TXN_TRUST_DOMAIN): GET /token/validate?txn_token=1 then
	// answers with a Txn-Token header, which client.TxnVerifier checks.
	// Empty means off.
	TxnTrustDomain string
}

// Issuer is a running issuer.
type Issuer struct {
	// URL is the issuer's base URL, and the iss of its tokens.
	URL string
	// ClientID and ClientSecret authenticate the client (an admin).
	ClientID, ClientSecret string

	srv     *httptest.Server
	cfg     Config
	proofs  dpop.ReplayCache // the store's shared record of DPoP proofs
	mini    *miniredis.Miniredis
	ownRDB  *redis.Client // the client of mini
	handler atomic.Pointer[http.Handler]
	svc     *token.Service // on the current keys; mu guards it after Start
	txn     *txn.Minter    // nil: Transaction Tokens off
	ids     *snowflakealg.SnowFlakeAlg
	clients *clients.Registry
	now     func() time.Time

	mu   sync.Mutex
	keys []keyset.Key
	hits map[string]int
	feed revfeed.Source
}

// New starts an Issuer on the Redis of internal/redistest (a real one when
// SNOWTOKEN_TEST_REDIS_URL is set), stopped when tb ends.
func New(tb testing.TB, cfg Config) *Issuer {
	tb.Helper()
	if cfg.Redis == nil {
		r := redistest.New(tb)
		cfg.Redis, cfg.Prefix = r.Client, r.Prefix
	}
	is, err := Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(is.Close)
	return is
}

// Start starts an Issuer; Close stops it.
func Start(cfg Config) (_ *Issuer, err error) {
	if cfg.ClientID == "" {
		cfg.ClientID = "orders-app"
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"orders:read", "orders:write"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	is := &Issuer{ClientID: cfg.ClientID, now: cfg.Now, hits: make(map[string]int), feed: cfg.Feed, cfg: cfg}
	defer func() {
		if err != nil {
			is.Close()
		}
	}()
	if cfg.Redis == nil {
		m, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		is.mini, is.ownRDB = m, redis.NewClient(&redis.Options{Addr: m.Addr()})
		cfg.Redis = is.ownRDB
	}
	secret, sum, err := clients.NewSecret()
	if err != nil {
		return nil, err
	}
	is.ClientSecret = secret
	if is.clients, err = clients.New([]clients.Client{{
		ID: cfg.ClientID, SecretSHA256: sum, Scopes: cfg.Scopes, Audiences: cfg.Audiences, TokenFormat: cfg.TokenFormat, MaySetSubject: true, Admin: true,
	}}); err != nil {
		return nil, err
	}
	if is.ids, err = snowflakealg.New(snowflakealg.Settings{WorkerID: cfg.WorkerID}); err != nil {
		return nil, err
	}
	key, err := keyset.Generate()
	if err != nil {
		return nil, err
	}
	is.keys = []keyset.Key{key}

	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		is.hits[r.URL.Path]++
		is.mu.Unlock()
		(*is.handler.Load()).ServeHTTP(w, r)
	}))
	is.URL = is.srv.URL
	keys, err := keyset.New(is.keys...)
	if err != nil {
		return nil, err
	}
	opts, err := token.Options{Issuer: is.URL, Now: is.now}.Resolved()
	if err != nil {
		return nil, err
	}
	store, err := redisstore.New(cfg.Redis, redisstore.Options{Prefix: cfg.Prefix,
		LogRetention: token.LogRetention(opts.MaxTTL, opts.Leeway), Leeway: opts.Leeway})
	if err != nil {
		return nil, err
	}
	if is.svc, err = token.NewService(keys, store, is.ids, opts); err != nil {
		store.Close()
		return nil, err
	}
	is.proofs = store.Proofs()
	if cfg.TxnTrustDomain != "" {
		if is.txn, err = txn.New(txn.Options{TrustDomain: cfg.TxnTrustDomain, Now: is.now}, is.ids); err != nil {
			return nil, err
		}
	}
	if err := is.serve(is.svc); err != nil {
		return nil, err
	}
	return is, nil
}

// serveKeys makes the service on the current keys (Service.WithKeys, as
// serve's reload does) and serves it.
func (is *Issuer) serveKeys() error {
	keys, err := keyset.New(is.keys...)
	if err != nil {
		return err
	}
	is.mu.Lock()
	svc, err := is.svc.WithKeys(keys)
	if err == nil {
		is.svc = svc
	}
	is.mu.Unlock()
	if err != nil {
		return err
	}
	return is.serve(svc)
}

// serve builds the handlers on svc and serves them, as serve.go wires them.
func (is *Issuer) serve(svc *token.Service) error {
	h, err := handlers.New(handlers.Options{
		Service: svc, Clients: is.clients, IDs: is.ids, Logger: slog.New(slog.DiscardHandler), Feed: is.feed,
		TrustedProxies: is.cfg.TrustedProxies, DPoPForwarders: is.cfg.DPoPForwarders, DPoP: dpop.Options{Replay: is.proofs}, DPoPNonces: is.cfg.DPoPNonces, Txn: is.txn,
	})
	if err != nil {
		return err
	}
	var hh http.Handler = h
	is.handler.Store(&hh)
	return nil
}

// RotateKey makes a new key sign from now on; the old ones still verify and
// stay in the JWKS. It returns the new kid.
func (is *Issuer) RotateKey() (string, error) {
	key, err := keyset.Generate()
	if err != nil {
		return "", err
	}
	is.mu.Lock()
	old := is.keys
	is.keys = append([]keyset.Key{key}, old...)
	is.mu.Unlock()
	return key.ID, is.serveKeys()
}

// Requests returns how many requests have come for path, such as
// "/token/validate".
func (is *Issuer) Requests(path string) int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.hits[path]
}

// Close stops the issuer: from then on it refuses connections.
func (is *Issuer) Close() {
	if is.srv != nil {
		is.srv.Close()
	}
	if is.mini != nil {
		is.ownRDB.Close()
		is.mini.Close()
	}
}

// Token asks POST /token for a token with scope (space-separated; empty
// means all of the client's).
func (is *Issuer) Token(ctx context.Context, scope string) (string, error) {
	return is.token(ctx, scope, is.srv.Client())
}

// DPoPToken asks POST /token for a token with scope bound to p's key (RFC
// 9449), sending p's proofs through a dpop.Transport, which also follows
// the issuer's nonces (Config.DPoPNonces).
func (is *Issuer) DPoPToken(ctx context.Context, scope string, p *dpop.Prover) (string, error) {
	return is.token(ctx, scope, &http.Client{Transport: &dpop.Transport{Base: is.srv.Client().Transport, Prover: p, Now: is.now}})
}

func (is *Issuer) token(ctx context.Context, scope string, hc *http.Client) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	body, err := is.post(ctx, "/token", form, hc)
	if err != nil {
		return "", err
	}
	var resp struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.AccessToken == "" {
		return "", fmt.Errorf("clienttest: POST /token: no access_token in %.200q", body)
	}
	return resp.AccessToken, nil
}

// Revoke revokes raw with POST /token/revoke.
func (is *Issuer) Revoke(ctx context.Context, raw string) error {
	_, err := is.post(ctx, "/token/revoke", url.Values{"token": {raw}}, is.srv.Client())
	return err
}

func (is *Issuer) post(ctx context.Context, path string, form url.Values, hc *http.Client) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, is.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(is.ClientID), url.QueryEscape(is.ClientSecret))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("clienttest: POST %s: %d %.200s", path, resp.StatusCode, body)
	}
	return body, nil
}
