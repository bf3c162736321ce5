package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/snowtoken/snowtoken/client"
)

// TestOptionsFollow: with CONSUMER_FEED_CLIENT_ID and the file of its
// secret, the consumer verifies tokens itself and follows the revocation
// feed, failing closed, as that client, with the tokens' iss from
// CONSUMER_ISSUER; without them it asks the issuer about every token.
func TestOptionsFollow(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "orders-feed.secret")
	if err := os.WriteFile(secretFile, []byte("s3cret-of-the-feed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	base := map[string]string{"SNOWTOKEN_ISSUER_URL": "http://nginx:8080", "CONSUMER_ISSUER": "http://localhost:8080"}
	with := func(kv ...string) func(string) string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return func(k string) string { return env[k] }
	}

	opts, err := options(with("CONSUMER_FEED_CLIENT_ID", "orders-feed", "CONSUMER_FEED_SECRET_FILE", secretFile), log)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Mode != client.Local || opts.RevocationCheck != client.Follow || opts.WhenStale != client.FailClosed ||
		opts.FeedClientID != "orders-feed" || opts.FeedClientSecret != "s3cret-of-the-feed" || opts.Issuer != "http://localhost:8080" {
		t.Errorf("options with a feed client: mode %v, revocation check %v, when stale %v, feed client %q secret %q, issuer %q; "+
			"want Local, Follow, FailClosed, orders-feed with the file's secret, http://localhost:8080",
			opts.Mode, opts.RevocationCheck, opts.WhenStale, opts.FeedClientID, opts.FeedClientSecret, opts.Issuer)
	}
	if _, err := client.New(opts); err != nil {
		t.Errorf("client.New with the feed options: %v", err)
	}

	opts, err = options(with(), log)
	if err != nil || opts.Mode != client.Remote || opts.FeedClientID != "" {
		t.Errorf("options without a feed client: mode %v feed client %q, %v; want Remote, none", opts.Mode, opts.FeedClientID, err)
	}

	empty := filepath.Join(dir, "empty.secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, getenv := range map[string]func(string) string{
		"client without a secret file": with("CONSUMER_FEED_CLIENT_ID", "orders-feed"),
		"secret file without a client": with("CONSUMER_FEED_SECRET_FILE", secretFile),
		"missing secret file":          with("CONSUMER_FEED_CLIENT_ID", "orders-feed", "CONSUMER_FEED_SECRET_FILE", filepath.Join(dir, "none")),
		"empty secret file":            with("CONSUMER_FEED_CLIENT_ID", "orders-feed", "CONSUMER_FEED_SECRET_FILE", empty),
	} {
		if _, err := options(getenv, log); err == nil {
			t.Errorf("%s: options returned no error", name)
		}
	}
}
