package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// signer writes tokens without reflection or maps: the header is the same for
// every token of a key, iss is JSON-encoded once, and every other claim is a
// number or a string whose characters CheckName, checkPrintable (scopes and
// audiences) or the decimal ID format already limit to ones JSON needs no
// escape for.
// The signature is golang-jwt's EdDSA method. Validation reads a token with
// the header our keys write in parseOwn, and any other with golang-jwt;
// FuzzParseOwn holds the two to the same verdicts.
type signer struct {
	key    ed25519.PrivateKey
	header string // base64url header and the dot after it
	iss    []byte // `{"iss":"…"`
}

var b64 = base64.RawURLEncoding

func newSigner(k keyset.Key, issuer string) (*signer, error) {
	header, err := headerSegment(k.ID)
	if err != nil {
		return nil, err
	}
	iss, err := json.Marshal(issuer)
	if err != nil {
		return nil, err
	}
	return &signer{key: k.Private, header: header + ".", iss: append([]byte(`{"iss":`), iss...)}, nil
}

// grant is what a new token says: its claims, whatever its format.
type grant struct {
	sub, client, scope, jti string
	aud                     []string // none when empty
	iat, exp                int64    // Unix seconds
	// jkt, if set, binds the token to a DPoP key (RFC 9449 §6): its
	// cnf.jkt, the key's RFC 7638 thumbprint.
	jkt string
	// chain is an exchanged token's act and parents claims, as JSON
	// members (encodeChain); "" for any other token.
	chain string
}

// sign returns the compact JWS of g's claims. Its signature is
// golang-jwt's EdDSA (TestSignerSignatureMatchesLibrary) computed with
// ed25519.Sign over the buffer itself, and the buffer becomes the string
// without a copy: the library's method takes a string and copies it back
// to bytes, and copies the key's public half: seven allocations and 1.3 KB
// a token (BenchmarkSign/signer: 9 → 2 allocs/op, 2048 → 688 B/op). The
// claims' estimate counts an exchanged token's chain, which outgrew it.
func (s *signer) sign(g *grant) string {
	sub, clientID, scope, jti, aud := g.sub, g.client, g.scope, g.jti, g.aud
	n := 160 + len(s.iss) + len(sub) + len(clientID) + len(scope) + len(g.jkt) + len(g.chain)
	for _, a := range aud {
		n += len(a) + 3
	}
	claims := make([]byte, 0, n)
	claims = append(claims, s.iss...)
	claims = append(claims, `,"sub":"`...)
	claims = append(claims, sub...)
	claims = append(claims, '"')
	for i, a := range aud {
		if i == 0 {
			claims = append(claims, `,"aud":["`...)
		} else {
			claims = append(claims, `,"`...)
		}
		claims = append(claims, a...)
		claims = append(claims, '"')
	}
	if len(aud) > 0 {
		claims = append(claims, ']')
	}
	claims = append(claims, `,"exp":`...)
	claims = strconv.AppendInt(claims, g.exp, 10)
	claims = append(claims, `,"iat":`...)
	claims = strconv.AppendInt(claims, g.iat, 10)
	claims = append(claims, `,"jti":"`...)
	claims = append(claims, jti...)
	claims = append(claims, `","client_id":"`...)
	claims = append(claims, clientID...)
	claims = append(claims, '"')
	if scope != "" {
		claims = append(claims, `,"scope":"`...)
		claims = append(claims, scope...)
		claims = append(claims, '"')
	}
	if g.jkt != "" { // a thumbprint is base64url: no escape
		claims = append(claims, `,"cnf":{"jkt":"`...)
		claims = append(claims, g.jkt...)
		claims = append(claims, `"}`...)
	}
	if g.chain != "" {
		claims = append(append(claims, ','), g.chain...)
	}
	claims = append(claims, '}')

	out := make([]byte, 0, len(s.header)+b64.EncodedLen(len(claims))+1+b64.EncodedLen(ed25519.SignatureSize))
	out = append(out, s.header...)
	out = b64.AppendEncode(out, claims)
	sig := ed25519.Sign(s.key, out)
	out = append(out, '.')
	out = b64.AppendEncode(out, sig)
	return unsafe.String(unsafe.SliceData(out), len(out)) // out is never written again
}

// ErrEventType: SignEvent was asked for an access token's typ, or none.
var ErrEventType = errors.New("token: not a typ SignEvent signs")

// SignEvent signs claims as a JWT of type typ (such as "secevent+jwt", RFC
// 8417) with the service's current signing key: EdDSA, its kid in the
// header, verifiable with the JWKS. It is for what the issuer publishes
// besides tokens (package revfeed: the revocation feed). typ must be set and
// must not be an access token's (jwtpolicy.Type, in any case, with or
// without "application/"), so that nothing SignEvent signs validates as a
// token.
func (s *Service) SignEvent(typ string, claims jwt.Claims) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	raw, err := s.SignEventPayload(typ, b64.AppendEncode(nil, payload))
	return string(raw), err
}

// eventHeader is the JOSE header of what SignEventPayload signs: a struct,
// not a map, so that encoding it sorts nothing (the members in the order a
// map's sorted keys had).
type eventHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// SignEventPayload is SignEvent for claims the caller has encoded itself:
// their JSON, base64url-encoded without padding (RFC 7515 §2), given in
// parts that it joins. It returns the compact JWS in one buffer of its exact
// size, the parts copied into it once: for a payload too large to copy
// more often (the revocation feed's snapshot, whose shared part is encoded
// once for every request).
func (s *Service) SignEventPayload(typ string, payload ...[]byte) ([]byte, error) {
	t := strings.TrimPrefix(strings.ToLower(typ), "application/")
	if t == "" || t == jwtpolicy.Type {
		return nil, fmt.Errorf("%w: %.32q", ErrEventType, typ)
	}
	header, err := json.Marshal(eventHeader{Alg: jwt.SigningMethodEdDSA.Alg(), Kid: s.keys.SigningKeyID(), Typ: typ})
	if err != nil {
		return nil, err
	}
	n := b64.EncodedLen(len(header)) + 1 + 1 + b64.EncodedLen(ed25519.SignatureSize)
	for _, p := range payload {
		n += len(p)
	}
	out := make([]byte, 0, n)
	out = b64.AppendEncode(out, header)
	out = append(out, '.')
	for _, p := range payload {
		out = append(out, p...)
	}
	sig := ed25519.Sign(s.signer.key, out) // golang-jwt's EdDSA, without its copy of the input
	out = append(out, '.')
	return b64.AppendEncode(out, sig), nil
}
