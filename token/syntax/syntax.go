// Package syntax is what a name (a client ID, a subject), a scope and an
// audience may be, and the sets of scopes: the syntax that every request,
// clients file and token is held to. It sits below the domain (package
// token) and the clients registry (package clients), which both check
// what they read with it, and it does no I/O.
//
//	syntax.go    the errors and the limits on what a client asks for
//	names.go     names (CheckName), scopes (CheckScope, ParseScope) and
//	             their sets (ContainsAll, Missing), a DPoP key's
//	             thumbprint (IsThumbprint)
//	audience.go  audiences (CheckAudience, CheckAudienceList) and the
//	             audiences a request names (RequestedAudiences, RFC 8707)
package syntax

import "errors"

// Errors of this package, which package token also exports under the same
// names (the HTTP layer maps each to its OAuth2 error); details are wrapped
// with %w.
var (
	ErrInvalidScope  = errors.New("token: invalid scope")
	ErrInvalidTarget = errors.New("token: invalid target")
)

// Limits on what a client asks for, checked before any work that grows
// with it. Subjects, client IDs and each scope are 1 to MaxNameLen bytes.
const (
	// MaxScopes bounds the scopes of a request, a ?scope= and a client.
	MaxScopes = 64
	// MaxScopeLen bounds a scope parameter in bytes, spaces included, so
	// that a token with all of its scopes stays well within the token's
	// length limit (token.MaxTokenLen).
	MaxScopeLen = 2048
	// MaxAudiences bounds the audiences of a request, counted per
	// parameter (resource, audience), and so the aud of a token.
	MaxAudiences = 4
	// MaxAudienceLen bounds one audience in bytes.
	MaxAudienceLen = 256
)
