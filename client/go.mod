module github.com/snowtoken/snowtoken/client

go 1.26.8

require (
	filippo.io/edwards25519 v1.2.0
	github.com/go-json-experiment/json v1.27.2
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/snowtoken/snowtoken/bitsalloc v0.0.0
)

// bitsalloc (stdlib only) is the module beside this one: the working tree's
// copy here. A module that requires the client ignores this replace and gets
// the bitsalloc version required above, so a release tags bitsalloc/vX.Y.Z
// before client/vX.Y.Z and requires it here (docs/modules.md).
replace github.com/snowtoken/snowtoken/bitsalloc => ../bitsalloc
