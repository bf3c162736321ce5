// Command consumer is the consumer side of the load benchmark: a bare
// net/http handler, the same as cmd/bare, behind the client package's
// middleware, so every request but /healthz is validated through a
// client.Validator, on any path.
//
// With -mode remote (the default; the production-volume round) the
// Validator asks the issuer about every token. With -mode follow (the
// revocation scenario) it verifies JWTs itself (client.Local) and follows
// the issuer's revocation feed (client.Follow), failing closed (503) while
// the feed is not fresh; it authenticates to the feed as -feed-client, a
// client with "revocation_feed": true, whose secret it reads from the
// environment variable CONSUMER_FEED_CLIENT_SECRET (not a flag: the
// command line is visible to every user). It refuses to start in follow
// mode without both, and listens only once the feed is fresh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/snowtoken/snowtoken/client"
)

// secretEnv holds the feed client's secret in follow mode.
const secretEnv = "CONSUMER_FEED_CLIENT_SECRET"

// errUsage: the flags or the environment do not make a consumer.
var errUsage = errors.New("consumer: usage")

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		log.Fatal(err)
	}
}

// run parses args, builds the Validator, waits for its feed in follow mode
// and serves until the listener fails.
func run(args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:18082", "listen address")
	issuer := fs.String("issuer", "http://127.0.0.1:8080", "the issuer's base URL")
	mode := fs.String("mode", "remote", "remote: ask the issuer about every token; follow: verify locally and follow the revocation feed, failing closed")
	cacheTTL := fs.Duration("cache-ttl", time.Minute, "client.Options.CacheTTL in remote mode: how long an answer of the issuer is reused (0: none)")
	feedClient := fs.String("feed-client", "", "follow mode: the client ID to follow the revocation feed as (its secret in $"+secretEnv+")")
	startTimeout := fs.Duration("start-timeout", 15*time.Second, "follow mode: longest wait for the feed to be fresh before listening")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	opts, err := validatorOptions(*mode, *issuer, *cacheTTL, *feedClient, getenv(secretEnv))
	if err != nil {
		return err
	}
	v, err := client.New(opts)
	if err != nil {
		return err
	}
	defer v.Close()
	if opts.RevocationCheck == client.Follow {
		ctx, cancel := context.WithTimeout(context.Background(), *startTimeout)
		err := v.Start(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	body := []byte(`{"active":true,"sub":"bench","client_id":"bench","scope":"read"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux := http.NewServeMux()
	mux.Handle("/", v.Middleware(h))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {}) // for the load tool to wait on
	return http.ListenAndServe(*addr, mux)
}

// validatorOptions are the client.Options of mode "remote" (with cacheTTL)
// or "follow" (Local, Follow, FailClosed, as feedClient with feedSecret,
// both required).
func validatorOptions(mode, issuer string, cacheTTL time.Duration, feedClient, feedSecret string) (client.Options, error) {
	switch mode {
	case "remote":
		return client.Options{IssuerURL: issuer, CacheTTL: cacheTTL}, nil
	case "follow":
		if feedClient == "" || feedSecret == "" {
			return client.Options{}, fmt.Errorf("%w: -mode follow needs -feed-client and $%s, a client with revocation_feed", errUsage, secretEnv)
		}
		return client.Options{IssuerURL: issuer, Mode: client.Local, RevocationCheck: client.Follow, WhenStale: client.FailClosed,
			FeedClientID: feedClient, FeedClientSecret: feedSecret}, nil
	}
	return client.Options{}, fmt.Errorf("%w: -mode %q: want remote or follow", errUsage, mode)
}
