// Package refusal carries what the party a refusal answers is told as data
// of the error, for every package of the client module: an error built here
// says what was wrong in words meant for that party (its description),
// while its Error() text, the whole Go error chain, goes to the log. An
// answer is Description(err), else a fixed text of the error's kind, never
// cut from err.Error(), so renaming a package or wrapping a library's error
// never changes nor leaks into an answer. It is the client module's own
// small twin of the issuer's internal/refusal (which the client module
// cannot import): a description is read from any error by the method
// Description() string, so the issuer reads the client module's errors
// the same way.
package refusal

import (
	"errors"
	"fmt"
	"strings"
)

// New returns an error of kind, a sentinel error, whose description is
// format with args and whose text is kind's, ": " and format with args, as
// fmt.Errorf("%w: "+format, kind, args...) makes it. An error among args
// (%w wraps it) is told by its own description; if one has none, neither
// has the error New returns, and its kind's fixed text is told.
func New(kind error, format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
	desc, ok := describe(format, args)
	if !ok {
		return err
	}
	return &refused{err: err, text: err.Error(), desc: desc}
}

// Describe returns err, unchanged in its text and chain, with desc as what
// is told of it: where err's text is not the other party's to read (a
// library's, or values of this side's configuration).
func Describe(err error, desc string) error {
	return &refused{err: err, text: err.Error(), desc: desc}
}

// Sentinel returns a sentinel error whose text is pkg, ": " and desc, and
// whose description is desc alone.
func Sentinel(pkg, desc string) error {
	return &refused{err: nil, text: pkg + ": " + desc, desc: desc}
}

// Description returns the description of the outermost error of err's
// chain that carries one (a method Description() string), and whether
// there is one.
func Description(err error) (string, bool) {
	var d interface{ Description() string }
	if errors.As(err, &d) {
		return d.Description(), true
	}
	return "", false
}

// describe is format with args, each error among them told by its
// description; ok is false if one has none.
func describe(format string, args []any) (desc string, ok bool) {
	told := make([]any, len(args))
	for i, a := range args {
		told[i] = a
		if e, isErr := a.(error); isErr {
			if told[i], ok = Description(e); !ok {
				return "", false
			}
		}
	}
	return fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), told...), true
}

// refused is an error with a description; see New.
type refused struct {
	err  error
	text string
	desc string
}

func (r *refused) Error() string { return r.text }
func (r *refused) Unwrap() error { return r.err }

// Description is what the other party is told.
func (r *refused) Description() string { return r.desc }
