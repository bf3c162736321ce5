// Command peer is the load benchmark's peer: an OAuth2 server written as a user
// of a well-known Go OAuth2 library would write it, so that the load tool can
// put "snowtoken vs a library a user would pick instead" as ratios from one
// run. It follows the library's own example server and README, with
// no tuning a user would not do:
//
//   - github.com/go-oauth2/oauth2/v4 (v4.5.4): manage.NewDefaultManager and
//     server.NewServer; the client credentials grant only; one client in the
//     library's memory client store (store.NewClientStore);
//   - token store github.com/go-oauth2/redis/v4 (v4.1.1), the library's Redis
//     store, on go-redis v8 (v8.11.5: the v8.0.0-beta.5 the store asks for
//     imports OpenTelemetry packages that no longer exist in the otel v1 this
//     module already needs); go-redis's defaults (pool of 10 connections per
//     CPU);
//   - JWT access tokens from the library's generates.NewJWTAccessGenerate,
//     signed with EdDSA (Ed25519) like snowtoken's, with a key made at start
//     (golang-jwt/jwt/v5, the version go-oauth2 v4.5.4 uses, has EdDSA). The
//     claims are the library's: aud (the client ID) and exp;
//   - access tokens live 1 hour, like snowtoken's default (go-oauth2's
//     default for client credentials is 2 hours).
//
// Each token is two Redis keys, both with the token's TTL: the access token
// itself (the whole JWT) → a random UUID, and that UUID → the token's record
// as JSON. Validation is the library's ValidationBearerToken: two GETs, and no
// check of the JWT's signature (the library trusts its store). The library's
// JWT has no jti nor iat, and Ed25519 signatures are deterministic, so the
// tokens issued to one client within one second are the same string: each
// issue still signs and writes a new record, the access key pointing to the
// newest, and the records it replaced stay in Redis until their TTL.
//
// # Interface
//
// POST /token takes a form with grant_type=client_credentials and an optional
// scope, the client authenticated by HTTP Basic. It answers the library's
// JSON: 200 {"access_token":"<JWT>","expires_in":3600,"scope":"...",
// "token_type":"Bearer"}, or the library's RFC 6749 error, such as 401
// {"error":"invalid_client",...} for a wrong secret. Without a scope the token
// gets every allowed scope; a scope beyond -scope is 400 invalid_scope (as
// snowtoken does).
//
// GET /validate takes Authorization: Bearer <token> and answers 200
// {"active":true,"sub":"...","client_id":"...","scope":"..."}, where sub is the
// client ID for client credentials (RFC 9068 §2.2), or 401
// {"error":"invalid_token","error_description":"..."} with a WWW-Authenticate
// header (RFC 6750 §3) for a token that is missing, unknown, deleted from
// Redis or expired. A Redis failure is 500 {"error":"server_error"}.
//
// Readiness: POST /token answers 200 (or GET /validate, 401) once it listens.
//
// Flags:
//
//	-addr           listen address (default 127.0.0.1:18082)
//	-redis          the token store, a redis:// URL with its db number (default redis://127.0.0.1:6379/0)
//	-client-id      the one client's ID (default "bench")
//	-client-secret  its secret (default "bench-secret")
//	-scope          the scopes the client may ask for, space-separated (default "read write")
//
// It logs only errors (Redis failures), as JSON on stderr; no line per request.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-oauth2/oauth2/v4"
	oerrors "github.com/go-oauth2/oauth2/v4/errors"
	"github.com/go-oauth2/oauth2/v4/generates"
	"github.com/go-oauth2/oauth2/v4/manage"
	"github.com/go-oauth2/oauth2/v4/models"
	"github.com/go-oauth2/oauth2/v4/server"
	"github.com/go-oauth2/oauth2/v4/store"
	oredis "github.com/go-oauth2/redis/v4"
	"github.com/go-redis/redis/v8"
	"github.com/golang-jwt/jwt/v5"
)

// accessTTL is how long an access token lives: snowtoken's default.
const accessTTL = time.Hour

// config is what the flags set.
type config struct {
	Addr         string
	RedisURL     string
	ClientID     string
	ClientSecret string
	Scope        string // space-separated
	// KeyPrefix is the token store's key namespace. No flag sets it (none:
	// the library's default); the tests keep apart by it on a shared Redis.
	KeyPrefix string
}

// parseFlags reads the command line into a config.
func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:18082", "listen address")
	fs.StringVar(&c.RedisURL, "redis", "redis://127.0.0.1:6379/0", "the token store: a redis:// URL with its db number")
	fs.StringVar(&c.ClientID, "client-id", "bench", "the one client's ID")
	fs.StringVar(&c.ClientSecret, "client-secret", "bench-secret", "the client's secret")
	fs.StringVar(&c.Scope, "scope", "read write", "the scopes the client may ask for, space-separated")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.ClientID == "" || c.ClientSecret == "" {
		// The library checks no secret for a client whose secret is empty.
		return config{}, errors.New("-client-id and -client-secret must not be empty")
	}
	return c, nil
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("flags", "err", err)
		os.Exit(2)
	}
	h, closeStore, err := newHandler(context.Background(), cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	defer closeStore()
	if err := http.ListenAndServe(cfg.Addr, h); err != nil {
		log.Error("listen", "err", err)
		os.Exit(1)
	}
}

// newHandler builds the server of cfg: the handler of /token and /validate,
// and a function that closes its Redis client. It fails when Redis does not
// answer a PING.
func newHandler(ctx context.Context, cfg config, log *slog.Logger) (http.Handler, func() error, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("redis %s: %w", opts.Addr, err)
	}
	signingKey, err := newEd25519PEM()
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}

	manager := manage.NewDefaultManager()
	manager.SetClientTokenCfg(&manage.Config{AccessTokenExp: accessTTL})
	manager.MapTokenStorage(oredis.NewRedisStoreWithCli(rdb, cfg.KeyPrefix))
	manager.MapAccessGenerate(generates.NewJWTAccessGenerate("", signingKey, jwt.SigningMethodEdDSA))
	clients := store.NewClientStore()
	clients.Set(cfg.ClientID, &models.Client{ID: cfg.ClientID, Secret: cfg.ClientSecret})
	manager.MapClientStorage(clients)

	srvCfg := server.NewConfig()
	srvCfg.AllowedGrantTypes = []oauth2.GrantType{oauth2.ClientCredentials}
	srv := server.NewServer(srvCfg, manager) // client auth: HTTP Basic, the library's default
	allowed := strings.Fields(cfg.Scope)
	srv.SetClientScopeHandler(func(tgr *oauth2.TokenGenerateRequest) (bool, error) {
		if tgr.Scope == "" {
			tgr.Scope = strings.Join(allowed, " ")
			return true, nil
		}
		for _, s := range strings.Fields(tgr.Scope) {
			if !slices.Contains(allowed, s) {
				return false, nil
			}
		}
		return true, nil
	})
	srv.SetInternalErrorHandler(func(err error) *oerrors.Response {
		log.Error("token endpoint", "err", err)
		return nil
	})

	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		srv.HandleTokenRequest(w, r) // it writes its own errors, and refuses a method but POST
	})
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		validate(w, r, srv, log)
	})
	return mux, rdb.Close, nil
}

// newEd25519PEM makes an Ed25519 private key in the PKCS #8 PEM that the
// library's JWT generator parses.
func newEd25519PEM() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// validation is the body of a 200 from /validate.
type validation struct {
	Active   bool   `json:"active"`
	Subject  string `json:"sub"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
}

// validate answers GET /validate with the library's ValidationBearerToken.
func validate(w http.ResponseWriter, r *http.Request, srv *server.Server, log *slog.Logger) {
	ti, err := srv.ValidationBearerToken(r)
	switch {
	case errors.Is(err, oerrors.ErrInvalidAccessToken), errors.Is(err, oerrors.ErrExpiredAccessToken):
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{
			"error": "invalid_token", "error_description": err.Error()})
		return
	case err != nil:
		log.Error("validate", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	sub := ti.GetUserID()
	if sub == "" { // client credentials: the client is the subject
		sub = ti.GetClientID()
	}
	writeJSON(w, http.StatusOK, validation{Active: true, Subject: sub, ClientID: ti.GetClientID(), Scope: ti.GetScope()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
