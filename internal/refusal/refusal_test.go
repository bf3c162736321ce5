package refusal

import (
	"errors"
	"fmt"
	"testing"
)

var errKind = errors.New("pkg: invalid request")

func TestNew(t *testing.T) {
	t.Parallel()
	err := New(errKind, "parameter %q repeated", "scope")
	if want := fmt.Errorf("%w: parameter %q repeated", errKind, "scope").Error(); err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, errKind) {
		t.Error("errors.Is(err, kind) = false")
	}
	wrapped := fmt.Errorf("%w: %w", errors.New("pkg: outer"), err)
	if d, ok := Description(wrapped); !ok || d != `parameter "scope" repeated` {
		t.Errorf("Description = %q, %v", d, ok)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	inner := New(errKind, "inner words")
	err := Describe(fmt.Errorf("%w: %w", errKind, inner), "outer words")
	if d, _ := Description(err); d != "outer words" {
		t.Errorf("Description = %q, want the outermost", d)
	}
	if err.Error() != "pkg: invalid request: pkg: invalid request: inner words" {
		t.Errorf("Error() = %q", err)
	}
	if _, ok := Description(fmt.Errorf("%w: secret detail", errKind)); ok {
		t.Error("an error without a description has one")
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	err := Within("ack", New(errKind, "an event ID is <epoch>-<ms>-<seq>"))
	if want := "ack: pkg: invalid request: an event ID is <epoch>-<ms>-<seq>"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if d, _ := Description(err); d != "ack: an event ID is <epoch>-<ms>-<seq>" {
		t.Errorf("Description = %q", d)
	}
	if !errors.Is(err, errKind) {
		t.Error("errors.Is(err, kind) = false")
	}
	if _, ok := Description(Within("ack", errKind)); ok {
		t.Error("Within gave a description to an error without one")
	}
}

func TestNewWraps(t *testing.T) {
	t.Parallel()
	inner := Phrase("must be 1 to %d characters", 128)
	err := New(errKind, "subject: %w", inner)
	if want := "pkg: invalid request: subject: must be 1 to 128 characters"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if d, _ := Description(err); d != "subject: must be 1 to 128 characters" {
		t.Errorf("Description = %q", d)
	}
	if !errors.Is(err, errKind) || !errors.Is(err, inner) {
		t.Error("New does not wrap kind and the error given with %w")
	}
	// An error without a description: none for the whole, never its text.
	secret := errors.New("lib: dial 10.0.0.7:6379: secret-looking detail")
	if d, ok := Description(New(errKind, "store: %w", secret)); ok {
		t.Errorf("Description = %q, want none", d)
	}
}

// carrier is an error of another package that carries its own description.
type carrier struct{}

func (carrier) Error() string       { return "other: too many attempts: retry in 3s" }
func (carrier) Description() string { return "too many attempts: retry in 3s" }

func TestDescriptionMethod(t *testing.T) {
	t.Parallel()
	if d, _ := Description(fmt.Errorf("%w: %w", errKind, carrier{})); d != "too many attempts: retry in 3s" {
		t.Errorf("Description = %q", d)
	}
}
