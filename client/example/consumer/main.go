// Command consumer is the demo service of the Compose stack: a service that
// accepts snowtoken tokens through package client. By default it is in
// remote mode: the issuer is asked about every token, so revocation takes
// effect at once. With CONSUMER_FEED_CLIENT_ID it verifies tokens itself
// and follows the issuer's revocation feed (follow.go): no call to the
// issuer per request, and a revoked token refused within about a
// heartbeat (25 ms) of the revocation.
//
//	GET /orders   the orders, for a token with scope orders:read: a bearer
//	              token, or with CONSUMER_PUBLIC_URL a DPoP-bound one too
//	GET /healthz  {"status":"ok"}
//
// With CONSUMER_RESOURCE=invoices it serves GET /invoices for scope
// invoices:read instead; with CONSUMER_TXN_TRUST_DOMAIN the route also
// requires a Transaction Token; with CONSUMER_NEXT_URL each request calls
// another service with it and an access token of the consumer's own
// (chain.go). The Compose stack chains two this way, its billing service
// behind its consumer:
//
//	gateway  GET /orders, auth_request mints a Txn-Token
//	  -> consumer GET /orders   Authorization: the user's token; Txn-Token
//	     -> billing GET /invoices   Authorization: orders-service's own token;
//	        the same Txn-Token, verified there: the same txn and sub
//
// With CONSUMER_PUBLIC_URL, a DPoP-bound token (RFC 9449) counts when sent
// as Authorization: DPoP with a proof of the request as its client made it:
// htu is that URL and the path the consumer receives, so the prefix a proxy
// strips belongs in the URL. The proof is checked here, then by the issuer:
//
//	client   GET http://localhost:8080/dpop/orders   DPoP: proof (htu: that URL)
//	  -> proxy, no auth_request: strips /dpop
//	consumer GET /orders   checks the proof: htu = CONSUMER_PUBLIC_URL + /orders
//	  -> issuer GET /token/validate   Authorization: DPoP, the proof, and the
//	     original request in X-Forwarded-Method, -Proto, -Host and -Uri
//
// The issuer believes X-Forwarded-* only from its SNOWTOKEN_DPOP_FORWARDERS,
// so the consumer's address must be one of them (and none of its
// SNOWTOKEN_TRUSTED_PROXIES, which name clients' addresses); and it accepts
// a proof once, so nothing in front of the consumer may have had it checked
// before (a gateway's auth_request to the issuer).
//
// `consumer healthcheck` asks the running consumer's /healthz on loopback
// and exits 1 unless it answers 200: the image's HEALTHCHECK (distroless
// has no shell, curl or wget). `consumer call` is the other side, a service
// that calls one with DPoP-bound tokens it gets with no shared secret
// (call.go).
//
//	SNOWTOKEN_ISSUER_URL  the issuer's base URL, such as http://issuer:8080 (required)
//	CONSUMER_ADDR         the address to listen on; default :8081
//	CONSUMER_PUBLIC_URL   the consumer's base URL as its clients reach it, such
//	                      as http://localhost:8080/dpop; empty (the default)
//	                      refuses DPoP-bound tokens (client.Options.DPoP)
//
// and, to follow the revocation feed, CONSUMER_FEED_CLIENT_ID,
// CONSUMER_FEED_SECRET_FILE and CONSUMER_ISSUER (follow.go); for the route
// and the call chain, CONSUMER_RESOURCE, CONSUMER_TXN_TRUST_DOMAIN,
// CONSUMER_NEXT_URL, CONSUMER_NEXT_CLIENT_ID, CONSUMER_NEXT_SECRET_FILE and
// CONSUMER_NEXT_SCOPE (chain.go). A combination that makes no sense is a
// start-up error.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/probe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then finishes in-flight requests; with the
// argument "healthcheck" it checks the consumer CONSUMER_ADDR names instead.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 1 && args[0] == "healthcheck" {
		return healthcheck(ctx, cmp.Or(getenv("CONSUMER_ADDR"), defaultAddr))
	}
	if len(args) == 1 && args[0] == "call" {
		return call(ctx, getenv, stdout)
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: configure with the environment (see the package doc)", args)
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil))
	opts, err := options(getenv, log)
	if err != nil {
		return err
	}
	v, err := client.New(opts)
	if err != nil {
		return fmt.Errorf("SNOWTOKEN_ISSUER_URL, CONSUMER_ISSUER or CONSUMER_PUBLIC_URL: %w", err)
	}
	defer v.Close()
	svc, err := newService(getenv, log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /"+svc.resource, svc.handler(v))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	ln, err := net.Listen("tcp", cmp.Or(getenv("CONSUMER_ADDR"), defaultAddr))
	if err != nil {
		return fmt.Errorf("CONSUMER_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "issuer", getenv("SNOWTOKEN_ISSUER_URL"), "public_url", getenv("CONSUMER_PUBLIC_URL"),
		"route", "/"+svc.resource, "txn_trust_domain", getenv("CONSUMER_TXN_TRUST_DOMAIN"), "next_url", getenv("CONSUMER_NEXT_URL"))
	follow(ctx, v, opts, log)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// defaultAddr is where the consumer listens without CONSUMER_ADDR.
const defaultAddr = ":8081"

// issuerTimeout bounds each call to the issuer: more than the client's
// default 2 s, which is also the issuer's own Redis timeout, so that a
// gateway in front of the replicas has time to hear one cut off from Redis
// answer 503 (after that timeout) and ask another.
const issuerTimeout = 5 * time.Second

// healthcheck GETs /healthz of the consumer listening on addr, on loopback
// when addr names no host.
func healthcheck(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("CONSUMER_ADDR: %w", err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return probe.Get(ctx, "http://"+net.JoinHostPort(host, port)+"/healthz")
}

// errorAnswer is an OAuth 2.0 error's JSON (RFC 6749 §5.2).
type errorAnswer struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readSecret reads the secret in the file path that the variable name
// names: one line, no spaces.
func readSecret(name, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" || strings.ContainsAny(secret, " \t\r\n") {
		return "", fmt.Errorf("%s: %s holds no secret on one line", name, path)
	}
	return secret, nil
}
