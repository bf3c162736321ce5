package token

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// policy is how parse checks a token: the golang-jwt parser, and the same
// parser's claims validator for parseOwn (nil: no claims validation, as
// jwt.WithoutClaimsValidation).
type policy struct {
	parser    *jwt.Parser
	validator *jwt.Validator
}

// newPolicy returns the policy of opts.
func newPolicy(validate bool, opts ...jwt.ParserOption) policy {
	p := policy{parser: jwt.NewParser(opts...)}
	if validate {
		p.validator = jwt.NewValidator(opts...)
	}
	return p
}

// headerSegment is the base64url JWS header of every token key kid signs:
// the signer writes it, and parseOwn knows a token of ours by it.
func headerSegment(kid string) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": jwt.SigningMethodEdDSA.Alg(), "kid": kid, "typ": jwtpolicy.Type})
	if err != nil {
		return "", err
	}
	return b64.EncodeToString(header), nil
}

// sigSegmentLen is the length of an Ed25519 signature in base64url.
var sigSegmentLen = b64.EncodedLen(ed25519.SignatureSize)

// strictB64 decodes a segment as golang-jwt does with WithStrictDecoding.
var strictB64 = b64.Strict()

// parseOwn is golang-jwt's ParseWithClaims with p, for a token whose header
// is byte for byte the one one of our keys signs (headerSegment) and whose
// signature segment has an Ed25519 signature's length: it decodes the claims
// and the signature, finds the key (keyFor's checks), verifies and validates
// the claims, in golang-jwt's order and with its errors (ErrTokenMalformed,
// ErrTokenUnverifiable, ErrTokenSignatureInvalid, ErrTokenInvalidClaims),
// into claims. For any other token it reports ok false and does nothing:
// golang-jwt decides. A differential fuzz target (FuzzParseOwn) holds the
// two to the same verdicts.
//
// It exists because golang-jwt parses the fixed header into a map, copies
// the signing input and decodes every segment into new buffers: 26
// allocations and about 2 KB per never-seen token, against 4 here
// (BenchmarkValidate/cold, -benchmem).
func (s *Service) parseOwn(p policy, raw string, claims *Claims) (ok bool, err error) {
	header, rest, found := strings.Cut(raw, ".")
	if !found {
		return false, nil
	}
	k, found := s.byHeader[header]
	if !found {
		return false, nil
	}
	payload, sig, found := strings.Cut(rest, ".")
	if !found || strings.IndexByte(sig, '.') >= 0 || len(sig) != sigSegmentLen {
		return false, nil
	}

	claimBytes := make([]byte, b64.DecodedLen(len(payload)))
	n, err := strictB64.Decode(claimBytes, bytesOf(payload))
	if err != nil {
		return true, fmt.Errorf("%w: could not base64 decode claim: %w", jwt.ErrTokenMalformed, err)
	}
	// golang-jwt decodes the claims with json.Unmarshal, which refuses what
	// is not one JSON value before UnmarshalJSON sees it, as UnmarshalJSON
	// does itself ("one JSON object"), and takes null for no claims at all.
	if err := claims.UnmarshalJSON(claimBytes[:n]); err != nil && strings.Trim(string(claimBytes[:n]), " \t\r\n") != "null" {
		return true, fmt.Errorf("%w: could not JSON decode claim: %w", jwt.ErrTokenMalformed, err)
	}
	var signature [ed25519.SignatureSize]byte
	if n, err := strictB64.Decode(signature[:], bytesOf(sig)); err != nil || n != len(signature) {
		return true, fmt.Errorf("%w: could not base64 decode signature: %v", jwt.ErrTokenMalformed, err)
	}
	if !s.verifies(k, s.opts.Now()) {
		return true, fmt.Errorf("%w: %w", jwt.ErrTokenUnverifiable, errDroppedKid)
	}
	if !k.Verify(bytesOf(raw[:len(header)+1+len(payload)]), signature[:]) {
		return true, fmt.Errorf("%w: %w", jwt.ErrTokenSignatureInvalid, jwt.ErrEd25519Verification)
	}
	if p.validator != nil {
		if err := p.validator.Validate(claims); err != nil {
			return true, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, err)
		}
	}
	return true, nil
}

// The refusals of checkSyntax, made once: refusing costs no allocation.
var (
	errTooLong    = refusal.New(ErrInvalidToken, "longer than %d bytes", MaxTokenLen)
	errTokenBytes = refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, jwtpolicy.ErrTokenBytes),
		"the token holds a byte outside base64url and its two dots")
	errTokenShape = refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, jwtpolicy.ErrTokenShape),
		"the token is not a well-formed JWT")
)

// checkSyntax is what a presented token passes before any other work on
// it, JWT or opaque: at most MaxTokenLen bytes, and jwtpolicy.CheckSyntax
// (only base64url and its two dots, in the shape of a compact JWS or an
// opaque token), so that no other spelling of a token (a line break, which
// base64 decoding skips) reaches the cache, base64 or a signature check.
// It does not allocate.
func checkSyntax(raw string) error {
	if len(raw) > MaxTokenLen {
		return errTooLong
	}
	switch err := jwtpolicy.CheckSyntax(raw); {
	case err == nil:
		return nil
	case errors.Is(err, jwtpolicy.ErrTokenBytes):
		return errTokenBytes
	default:
		return errTokenShape
	}
}

// bytesOf is s as a byte slice, without a copy: for reading only (base64
// and Ed25519 read their input, never write it).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
