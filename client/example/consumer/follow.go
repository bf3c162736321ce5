package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/snowtoken/snowtoken/client"
)

// options are the client.Options the environment names: remote mode (every
// token asked of the issuer), or with CONSUMER_FEED_CLIENT_ID local mode
// following the revocation feed (client.Follow): the consumer verifies each
// token against the issuer's JWKS and decides revocation from the feed it
// holds in memory, with no call to the issuer per request, failing closed
// (503) while the feed is not fresh.
//
//	CONSUMER_FEED_CLIENT_ID    the client to follow the feed as, one with
//	                           revocation_feed in the issuer's clients file;
//	                           empty (the default): remote mode
//	CONSUMER_FEED_SECRET_FILE  the file holding its secret (required with it)
//	CONSUMER_ISSUER            the iss the tokens carry, the issuer's
//	                           SNOWTOKEN_ISSUER, where SNOWTOKEN_ISSUER_URL is
//	                           another URL of it; empty: SNOWTOKEN_ISSUER_URL
func options(getenv func(string) string, log *slog.Logger) (client.Options, error) {
	opts := client.Options{
		IssuerURL: getenv("SNOWTOKEN_ISSUER_URL"), Issuer: getenv("CONSUMER_ISSUER"), Timeout: issuerTimeout, Logger: log,
		DPoP: client.DPoP{PublicURL: getenv("CONSUMER_PUBLIC_URL")},
	}
	id, secretFile := getenv("CONSUMER_FEED_CLIENT_ID"), getenv("CONSUMER_FEED_SECRET_FILE")
	switch {
	case id == "" && secretFile == "":
		return opts, nil
	case id == "" || secretFile == "":
		return client.Options{}, errors.New("CONSUMER_FEED_CLIENT_ID and CONSUMER_FEED_SECRET_FILE go together")
	}
	secret, err := readSecret("CONSUMER_FEED_SECRET_FILE", secretFile)
	if err != nil {
		return client.Options{}, err
	}
	opts.Mode, opts.RevocationCheck, opts.WhenStale = client.Local, client.Follow, client.FailClosed
	opts.FeedClientID, opts.FeedClientSecret = id, secret
	return opts, nil
}

// follow starts following the revocation feed, when v does, and logs once
// the followed state is fresh: from then on a token revoked at the issuer is
// refused here within about a heartbeat. Until then every request is 503;
// the consumer serves meanwhile, so that its health check passes and the
// gateway can start (the feed may come through it).
func follow(ctx context.Context, v *client.Validator, opts client.Options, log *slog.Logger) {
	if opts.RevocationCheck != client.Follow {
		return
	}
	log.Info("following the revocation feed", "issuer", opts.IssuerURL, "feed_client_id", opts.FeedClientID)
	go func() {
		if err := v.Start(ctx); err != nil {
			return // ctx ended: shutting down
		}
		log.Info("the revocation feed is fresh: tokens are validated here, with no call to the issuer")
	}()
}
