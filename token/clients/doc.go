// Package clients is the clients registry: the OAuth2 clients allowed to
// ask for tokens, as the clients file (SNOWTOKEN_CLIENTS_FILE,
// docs/clients.md) lists them, and how a client proves it is one. The
// domain (package token) takes a Registry wherever a client's standing
// decides (Service.Issue, Service.Verdict); the HTTP layer authenticates
// callers with it; the commands edit the file through it.
//
//	doc.go         this map, the errors, the token formats a client may have
//	client.go      Client, its fields' meaning and what it may do, Duration
//	clients.go     Registry: New checks every client, lookups, a reload's
//	               differences (Dropped, KeysChanged)
//	file.go        the clients file: File, Load, ParseFile, strictly
//	secret.go      a client's secret: its hashes checked, Authenticate with
//	               it and its rotation, SecretExpiry, NewSecret
//	authmethod.go  how a client authenticates: its method (RFC 7591), its
//	               assertion keys (clientauth.Registration)
//	exchange.go    whether it takes part in token exchange, and the issuers
//	               of the JWTs it may exchange
//
// A Registry is immutable once made: a reload makes a new one and swaps it
// whole. The syntax of IDs, scopes and audiences is package syntax's.
package clients

import "errors"

// Errors returned by this package; details are wrapped with %w. Package
// token exports ErrInvalidClient under the same name, which the HTTP
// layer maps to invalid_client.
var (
	ErrFile          = errors.New("token: bad clients file")
	ErrInvalidClient = errors.New("token: client authentication failed")
)

// Token formats, the values of Client.TokenFormat.
const (
	FormatJWT    = "jwt"    // a signed JWT, verifiable offline (the default)
	FormatOpaque = "opaque" // an opaque token: see package token's opaque.go
)
