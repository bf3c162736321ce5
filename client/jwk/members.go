package jwk

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// members are a key's members that the rules read; nil for one absent.
type members struct {
	kty, crv, x, y, n, e, kid, use, alg *string
	keyOps                              []string
	x5c                                 []string // a set's keys only
}

// privateMembers are the JWK members of private or symmetric key material
// (RFC 7518 §6.2.2, §6.3.2, §6.4.1; "priv" is ML-DSA's).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"}

// commonMembers are the members a key of any type may have alone: those of
// RFC 7517 §4 a verifier reads, and ext, which WebCrypto's
// exportKey("jwk") adds to a public key.
var commonMembers = []string{"kty", "kid", "use", "alg", "key_ops", "ext"}

// typeMembers are the members of a key type's public key.
var typeMembers = map[string][]string{"OKP": {"crv", "x"}, "EC": {"crv", "x", "y"}, "RSA": {"n", "e"}}

// readMembers reads data, one JSON object, member by member in order: the
// first private member is ErrPrivateKey; a member named twice, or whose
// name differs from another's only in case (a reader that folds case would
// take one for the other), is ErrKey. Alone, a member that no key of algs'
// types has is ErrKey as well; in a set, it is ignored.
func readMembers(data []byte, algs []string, alone bool) (members, error) {
	var m members
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return m, refuse(ErrKey, "the jwk is not a JSON object")
	}
	known := slices.Clone(commonMembers)
	for _, alg := range algs {
		for _, t := range algTypes[alg] {
			known = append(known, typeMembers[t]...)
		}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadToken(); err != nil {
		return m, jsonRefusal(err)
	}
	var folded []string
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return m, jsonRefusal(err)
		}
		name := tok.String()
		val, err := dec.ReadValue()
		if err != nil {
			return m, jsonRefusal(err)
		}
		lower := strings.ToLower(name)
		switch {
		case slices.Contains(privateMembers, lower):
			return m, refuse(ErrPrivateKey, "the jwk holds the private key member %.16s: send the public key alone", name)
		case slices.Contains(folded, lower):
			return m, refuse(ErrKey, "jwk member names %.16q and another differ only in case", name)
		case alone && !slices.Contains(known, name):
			return m, refuse(ErrKey, "jwk member %.64q is not allowed", name)
		}
		folded = append(folded, lower)
		if err := m.set(name, val, alone); err != nil {
			return m, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return m, jsonRefusal(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return m, refuse(ErrKey, "the jwk is not valid JSON")
	}
	return m, nil
}

// set keeps the member name of value val, checking its type (null is
// of none).
func (m *members) set(name string, val jsontext.Value, alone bool) error {
	strs := map[string]**string{"kty": &m.kty, "crv": &m.crv, "x": &m.x, "y": &m.y, "n": &m.n, "e": &m.e, "kid": &m.kid, "use": &m.use, "alg": &m.alg}
	var dst any
	what := "a string"
	switch {
	case strs[name] != nil:
		s := new(string)
		*strs[name], dst = s, s
	case name == "key_ops":
		dst, what = &m.keyOps, "an array of strings"
	case name == "ext":
		dst, what = new(bool), "true or false"
	case name == "x5c" && !alone:
		dst, what = &m.x5c, "an array of strings"
	default:
		return nil // ignored
	}
	if val.Kind() == 'n' || jsonv2.Unmarshal(val, dst) != nil {
		return refuse(ErrKey, "jwk member %.16s is not %s", name, what)
	}
	return nil
}

// jsonRefusal says what is wrong with a key's JSON text that jsontext
// refused with err: a member named twice, or a text that is not JSON.
func jsonRefusal(err error) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName) {
		var name string
		for tok := range syn.JSONPointer.Tokens() {
			name = tok
		}
		return refuse(ErrKey, "jwk member %.64q appears twice", name)
	}
	return refuse(ErrKey, "the jwk is not valid JSON")
}
