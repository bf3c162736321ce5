package handlers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// TestDescription checks what a client is told of errors as the packages
// make them: the description they carry, else their row's fallback.
func TestDescription(t *testing.T) {
	t.Parallel()
	_, idErr := snowflakealg.ParseID("0x1f")
	tests := []struct {
		err  error
		want string
	}{
		{token.ErrInvalidClient, "client authentication failed"},
		{refusal.New(token.ErrInvalidRequest, "grant_type is required"), "grant_type is required"},
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, refusal.New(token.ErrRevoked, "all tokens of the client were revoked")), "all tokens of the client were revoked"},
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, refusal.Describe(fmt.Errorf("%w: %w", token.ErrRevoked, token.ErrMarkerLost), "no session")), "no session"},
		{refusal.New(token.ErrInvalidToken, "jti: %w", idErr), `jti: "0x1f"`},
		{refusal.New(ErrNotFound, "no route %s", "/x"), "no route /x"},
		{refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidToken, errors.New("a library's words")), "in ours"), "in ours"},
		{&authlimit.LimitedError{Key: authlimit.Key{Kind: authlimit.Client}}, "too many failed authentications: this client is refused for 1s; retry later"},
		// A sentinel in a sentinel, with no description: the outer row's
		// fallback, never a text cut out of the chain.
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, token.ErrRevoked), "invalid token"},
	}
	for _, tt := range tests {
		if got := answerFor(tt.err).told(tt.err); got != tt.want {
			t.Errorf("told(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestDescriptionNoLeak wraps the error of every row of answers, and one
// of none, with details that carry no description (a secret-looking value,
// a library's words, another package's sentinel): each is told as its
// row's fixed text, never as any part of the error's Go text.
func TestDescriptionNoLeak(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-10.0.0.7:6379"
	rows := append(answers[:], answer{err: errors.New("elsewhere: not ours")})
	for _, row := range rows {
		want := answerFor(row.err)
		fixed := want.description
		if fixed == "" {
			fixed = want.fallback
		}
		if fixed == "" {
			t.Errorf("row %q has neither a description nor a fallback", row.err)
			continue
		}
		for _, err := range []error{
			row.err,
			fmt.Errorf("%w: %s", row.err, secret),
			fmt.Errorf("%w: %w", row.err, fmt.Errorf("redis: dial %s: %w", secret, token.ErrMarkerLost)),
			refusal.New(row.err, "store: %w", errors.New(secret)),
		} {
			got := answerFor(err).told(err)
			if got != fixed || strings.Contains(got, "s3cr3t") {
				t.Errorf("told(%q) = %q, want %q", err, got, fixed)
			}
		}
	}
}
