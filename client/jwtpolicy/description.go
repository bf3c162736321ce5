package jwtpolicy

import "fmt"

// policyError is an error of this package a service passes on to its
// client: its text names the package, its Description, what the client is
// told (the issuer reads it with its refusal.Description), does not.
type policyError struct{ desc string }

func (e *policyError) Error() string       { return "jwtpolicy: " + e.desc }
func (e *policyError) Description() string { return e.desc }

// refusal is one of the package's errors (kind) with what was wrong
// (detail): its text is kind's, ": " and the detail, its Description the
// detail.
type refusal struct {
	kind   error
	detail string
}

func (r *refusal) Error() string       { return r.kind.Error() + ": " + r.detail }
func (r *refusal) Unwrap() error       { return r.kind }
func (r *refusal) Description() string { return r.detail }

// refuse returns a refusal of kind; its detail is format with args.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, detail: fmt.Sprintf(format, args...)}
}
