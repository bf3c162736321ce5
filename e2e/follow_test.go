package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/clienttest"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// TestFollowRealIssuer runs a Validator with RevocationCheck Follow against
// the real issuer's handlers serving the revocation feed (package revfeed)
// of a stand-in follower: a token revoked in the log is refused, a
// subject's revocation ends the subject's earlier tokens, and a log whose
// state goes stale makes the Validator fail closed until it is fresh again.
func TestFollowRealIssuer(t *testing.T) {
	src := revfeedtest.New(true)
	is := clienttest.New(t, clienttest.Config{Feed: src})
	v, err := client.New(client.Options{IssuerURL: is.URL, Mode: client.Local, RevocationCheck: client.Follow,
		FeedClientID: is.ClientID, FeedClientSecret: is.ClientSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tok := issue(t, is, "")
	c, err := v.Validate(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	other := issue(t, is, "")
	validated := is.Requests("/token/validate")

	src.Add(revocation.KindToken, c.JTI, time.Now().UnixMilli(), c.ExpiresAt.Unix())
	waitFor(t, v, tok, client.ErrInvalidToken)
	if _, err := v.Validate(t.Context(), other); err != nil {
		t.Fatalf("a token not revoked: %v", err)
	}

	// Stale: what is known revoked stays refused (401), the rest cannot
	// be told (503); fresh again, it passes again.
	src.SetFresh(false, 0)
	waitFor(t, v, other, client.ErrUnavailable)
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, client.ErrInvalidToken) {
		t.Errorf("a revoked token with the feed stale: %v, want ErrInvalidToken", err)
	}
	src.SetFresh(true, 0)
	waitFor(t, v, other, nil)

	src.Add(revocation.KindSubject, c.Subject, time.Now().Add(time.Minute).UnixMilli(), 0)
	waitFor(t, v, other, client.ErrInvalidToken)
	if n := is.Requests("/token/validate"); n != validated {
		t.Errorf("%d calls to /token/validate while following, want none", n-validated)
	}
}

// waitFor validates tok until the error is want (a revocation reaches the
// Validator through the stream), within a guard against hanging.
func waitFor(t *testing.T, v *client.Validator, tok string, want error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := v.Validate(t.Context(), tok)
		if errors.Is(err, want) || want == nil && err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("Validate: %v, want %v", err, want))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
