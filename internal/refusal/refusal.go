// Package refusal carries what a client is told of an error as data of the
// error: an error built here says what was wrong in words meant for the
// client (its description), while its Error() text, the whole Go error
// chain, goes to the log. The HTTP layer answers with Description(err),
// else with a fixed text of the error's kind, never with err.Error(), so
// renaming a package or wrapping a library's error never changes nor leaks
// into an answer.
package refusal

import (
	"errors"
	"fmt"
)

// New returns an error of kind, a sentinel error, whose description is
// format with args (fmt.Sprintf: values with %v, %q, %d..., never an
// error with %w) and whose text is kind's, ": " and the description, as
// fmt.Errorf("%w: "+format, kind, args...) would make it.
func New(kind error, format string, args ...any) error {
	desc := fmt.Sprintf(format, args...)
	return &refused{err: kind, text: kind.Error() + ": " + desc, desc: desc}
}

// Describe returns err, unchanged in its text and chain, with desc as what
// a client is told of it. Use it where err wraps an error whose text is not
// the client's to read (a library's, or one of our own sentinels').
func Describe(err error, desc string) error {
	return &refused{err: err, text: err.Error(), desc: desc}
}

// Within returns err as said of name (a parameter, a header, a claim):
// its text and, if it carries one, its description begin with name and
// ": ", as fmt.Errorf("%s: %w", name, err) would make its text.
func Within(name string, err error) error {
	d, ok := Description(err)
	if !ok {
		return fmt.Errorf("%s: %w", name, err)
	}
	return &refused{err: err, text: name + ": " + err.Error(), desc: name + ": " + d}
}

// Description returns the description of the outermost error of err's
// chain made by New or Describe, and whether there is one.
func Description(err error) (string, bool) {
	var r *refused
	if errors.As(err, &r) {
		return r.desc, true
	}
	return "", false
}

// refused is an error with a description for clients; see New.
type refused struct {
	err  error
	text string
	desc string
}

func (r *refused) Error() string { return r.text }
func (r *refused) Unwrap() error { return r.err }
