package handlers

import (
	"errors"
	"fmt"
	"testing"

	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// TestDescription checks what a client is told of errors as the packages
// wrap them: the details, without the sentinels' texts.
func TestDescription(t *testing.T) {
	t.Parallel()
	_, idErr := snowflakealg.ParseID("0x1f")
	tests := []struct {
		err  error
		want string
	}{
		{token.ErrInvalidClient, "client authentication failed"},
		{fmt.Errorf("%w: grant_type is required", token.ErrInvalidRequest), "grant_type is required"},
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, token.ErrRevoked), "revoked"},
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, refusal.Describe(fmt.Errorf("%w: %w", token.ErrRevoked, token.ErrMarkerLost), "no session")), "no session"},
		{fmt.Errorf("%w: %w", token.ErrInvalidToken, fmt.Errorf("%w: no session", token.ErrRevoked)), "no session"},
		{refusal.New(token.ErrInvalidToken, "jti: %w", idErr), `jti: "0x1f"`},
		{fmt.Errorf("%w: no route /x", ErrNotFound), "no route /x"},
		{refusal.Describe(fmt.Errorf("%w: %w", token.ErrInvalidToken, errors.New("a library's words")), "in ours"), "in ours"},
		{&authlimit.LimitedError{Key: authlimit.Key{Kind: authlimit.Client}}, "too many failed authentications: this client is refused for 1s; retry later"},
	}
	for _, tt := range tests {
		if got := description(tt.err); got != tt.want {
			t.Errorf("description(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
