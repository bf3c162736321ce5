// Package refusal carries what a client is told of an error as data of the
// error: an error built here says what was wrong in words meant for the
// client (its description), while its Error() text, the whole Go error
// chain, goes to the log. The HTTP layer answers with Description(err),
// else with a fixed text of the error's kind, never with err.Error(), so
// renaming a package or wrapping a library's error never changes nor leaks
// into an answer.
//
// An error of any package (or module) carries a description by a method
// Description() string; the errors made here have one.
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
// has the error New returns, and a client is told the fixed text of its
// kind.
func New(kind error, format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
	desc, ok := describe(format, args)
	if !ok {
		return err
	}
	return &refused{err: err, text: err.Error(), desc: desc}
}

// Phrase returns an error of no kind whose text and description are both
// format with args (fmt.Sprintf): words of our own, such as "must be 1 to
// 128 characters", which New or Within give a kind and a name to.
func Phrase(format string, args ...any) error {
	desc := fmt.Sprintf(format, args...)
	return &refused{err: errors.New(desc), text: desc, desc: desc}
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

// refused is an error with a description for clients; see New.
type refused struct {
	err  error
	text string
	desc string
}

func (r *refused) Error() string       { return r.text }
func (r *refused) Unwrap() error       { return r.err }
func (r *refused) Description() string { return r.desc }
