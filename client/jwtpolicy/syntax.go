package jwtpolicy

import (
	"errors"
	"strings"
)

// OpaquePrefix starts every opaque token (the issuer's token_format
// "opaque"): OpaquePrefix and OpaqueChars base64url characters, no dot. No
// JWT starts with it (a JWT starts with the base64url of "{", "ey").
const OpaquePrefix = "st_"

// OpaqueChars is the length of an opaque token after OpaquePrefix: the
// base64url, without padding, of its 8-byte ID and 16-byte secret.
const OpaqueChars = 32

// Errors of CheckSyntax.
var (
	ErrTokenBytes = errors.New("jwtpolicy: the token holds a byte outside base64url and its dots")
	ErrTokenShape = errors.New("jwtpolicy: the token is neither a compact JWS nor an opaque token")
)

// b64url holds the base64url alphabet (RFC 4648 §5), no padding.
var b64url = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		t[c] = true
	}
	return t
}()

// CheckSyntax is the one check of a presented token's bytes, made wherever
// a token is read (the issuer's Authorization header and form fields, its
// cache and its opaque tokens; this module's Local and Remote modes) before
// any other work on it: a cache lookup, base64 decoding, a signature check,
// a network call. It refuses a token with a byte outside the base64url
// alphabet and the dots (ErrTokenBytes): base64 decoders skip CR and LF, so
// without it a token with a line break inside would be a second spelling
// of one token, under another cache key. It refuses as well a token that
// is neither a compact JWS (three non-empty segments) nor, when it begins
// with OpaquePrefix, an opaque token (ErrTokenShape). It reads each byte
// once and does not allocate; bound raw's length first.
func CheckSyntax(raw string) error {
	if rest, ok := strings.CutPrefix(raw, OpaquePrefix); ok {
		for i := 0; i < len(rest); i++ {
			if !b64url[rest[i]] {
				return ErrTokenBytes
			}
		}
		if len(rest) != OpaqueChars {
			return ErrTokenShape
		}
		return nil
	}
	dots, start := 0, 0
	shape := true
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if b64url[c] {
			continue
		}
		if c != '.' {
			return ErrTokenBytes
		}
		if i == start {
			shape = false // an empty segment
		}
		dots++
		start = i + 1
	}
	if !shape || dots != 2 || start == len(raw) {
		return ErrTokenShape
	}
	return nil
}
