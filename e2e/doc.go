// Package e2e holds the end-to-end tests of the client module (package
// client and its example consumer) against a real issuer: clienttest runs
// the issuer's own handlers on the Redis of internal/redistest. They live in
// the root module because the client module must not depend on the issuer;
// the client module's own tests use fake JWKS and HTTP servers.
package e2e
