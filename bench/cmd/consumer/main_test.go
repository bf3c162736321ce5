package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
)

// TestFollowNeedsCredentials: in follow mode the consumer refuses to start
// without the feed client's ID and secret, before it listens.
func TestFollowNeedsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		secret string
	}{
		{"neither", []string{"-mode", "follow"}, ""},
		{"no secret", []string{"-mode", "follow", "-feed-client", "feed"}, ""},
		{"no client", []string{"-mode", "follow"}, "s3cret"},
		{"unknown mode", []string{"-mode", "local", "-feed-client", "feed"}, "s3cret"},
		{"stray argument", []string{"-mode", "follow", "-feed-client", "feed", "extra"}, "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-addr", "127.0.0.1:0"}, tc.args...)
			getenv := func(k string) string {
				if k == secretEnv {
					return tc.secret
				}
				return ""
			}
			if err := run(args, getenv); !errors.Is(err, errUsage) {
				t.Errorf("run(%q) = %v, want %v", args, err, errUsage)
			}
		})
	}
}

// TestValidatorOptions: remote mode asks the issuer with the cache; follow
// mode verifies locally, follows the feed as the client given and fails
// closed.
func TestValidatorOptions(t *testing.T) {
	remote, err := validatorOptions("remote", "http://issuer", time.Minute, "", "")
	if err != nil || remote.Mode != client.Remote || remote.CacheTTL != time.Minute || remote.IssuerURL != "http://issuer" {
		t.Errorf("remote: %+v, %v", remote, err)
	}
	follow, err := validatorOptions("follow", "http://issuer", time.Minute, "feed", "s3cret")
	if err != nil || follow.Mode != client.Local || follow.RevocationCheck != client.Follow || follow.WhenStale != client.FailClosed ||
		follow.FeedClientID != "feed" || follow.FeedClientSecret != "s3cret" || follow.IssuerURL != "http://issuer" {
		t.Errorf("follow: %+v, %v", follow, err)
	}
}

// TestFollowWaitsForTheFeed: in follow mode the consumer does not listen
// while the feed cannot be followed; it gives up after -start-timeout.
func TestFollowWaitsForTheFeed(t *testing.T) {
	issuer := httptest.NewServer(http.NotFoundHandler()) // no feed here
	defer issuer.Close()
	getenv := func(k string) string {
		if k == secretEnv {
			return "s3cret"
		}
		return ""
	}
	err := run([]string{"-addr", "127.0.0.1:0", "-mode", "follow", "-feed-client", "feed", "-issuer", issuer.URL, "-start-timeout", "100ms"}, getenv)
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("run with no feed = %v, want %v", err, client.ErrUnavailable)
	}
}
