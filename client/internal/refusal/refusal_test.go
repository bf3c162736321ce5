package refusal

import (
	"errors"
	"fmt"
	"testing"
)

var errKind = errors.New("pkg: invalid token")

func TestNew(t *testing.T) {
	err := New(errKind, "claim %s: %w", "jti", Sentinel("other", "not a number"))
	if want := "pkg: invalid token: claim jti: other: not a number"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, errKind) {
		t.Error("errors.Is(err, kind) = false")
	}
	if d, ok := Description(fmt.Errorf("outer: %w", err)); !ok || d != "claim jti: not a number" {
		t.Errorf("Description = %q, %v", d, ok)
	}
	// An error without a description leaves the whole one without.
	if d, ok := Description(New(errKind, "dial: %w", errors.New("10.0.0.7:6379 refused"))); ok {
		t.Errorf("Description of a library's error = %q", d)
	}
	if d, _ := Description(Describe(fmt.Errorf("%w: from %q", errKind, "https://x"), "issuer mismatch")); d != "issuer mismatch" {
		t.Errorf("Describe: %q", d)
	}
}
