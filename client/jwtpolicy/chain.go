package jwtpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/client/txntoken"
)

// MaxChain caps an exchanged token's ancestry (RFC 8693 token exchange):
// its parents claim lists at most MaxChain tokens, and its act (and
// may_act) claim nests at most MaxChain actors deep. The issuer refuses an
// exchange whose result would need more; a token that carries more does
// not decode.
const MaxChain = 4

// Errors of the chain claims (act, may_act, parents), each wrapped with
// the member it is about.
var (
	// ErrActor: an act or may_act that is not an object with a non-empty
	// sub string, iss and client_id strings and an act of the same shape.
	ErrActor = errors.New("jwtpolicy: an actor must be an object with a sub")
	// ErrParent: a parents entry that is not an object with a jti the
	// issuer writes (a Snowflake ID in decimal), a non-empty client_id,
	// an integer iat and a boolean opaque.
	ErrParent = errors.New("jwtpolicy: a parent must be an object with a jti, a client_id and an iat")
	// ErrChain: parents with more than MaxChain entries, or an act nested
	// more than MaxChain deep.
	ErrChain = fmt.Errorf("jwtpolicy: a chain longer than %d", MaxChain)
)

// Actor is an act or may_act claim (RFC 8693 §4.1, §4.4): the party acting for the
// token's subject; Act is the actor before it in a delegation chain (nesting, newest
// outermost). Only the outermost actor counts for authorization (§4.1). It is
// txntoken.Actor, the one type of the claim: a Transaction Token's tctx carries the
// act of the access token it was minted from as it is.
type Actor = txntoken.Actor

// Parent is one snowtoken token an exchanged token derives from: its jti, the client it
// was issued to, its iat (Unix s), and whether it is opaque (its record is then the opaque
// record of that jti). Same subject as the token, always.
type Parent struct {
	ID       string `json:"jti"`
	ClientID string `json:"client_id"`
	IssuedAt int64  `json:"iat"`
	Opaque   bool   `json:"opaque,omitempty"`
}

// decodeActor reads an act or may_act, depth actors deep already (0 for
// the claim itself): an object with a non-empty sub; iss and client_id
// strings; an act of the same shape, at most MaxChain in all. Other
// members are skipped (strictly), as a claim's are.
func decodeActor(dec *json.Decoder, depth int) (*Actor, error) {
	if depth >= MaxChain {
		return nil, fmt.Errorf("%w: act nested deeper", ErrChain)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ErrActor
	}
	var a Actor
	err := members(dec, func(name string) error {
		switch name {
		case "sub":
			return decodeString(dec, &a.Subject, ErrActor)
		case "iss":
			return decodeString(dec, &a.Issuer, ErrActor)
		case "client_id":
			return decodeString(dec, &a.ClientID, ErrActor)
		case "act":
			var err error
			a.Act, err = decodeActor(dec, depth+1)
			return err
		}
		return skipValue(dec)
	})
	if err != nil {
		return nil, err
	}
	if a.Subject == "" {
		return nil, ErrActor
	}
	return &a, nil
}

// decodeParents reads parents: an array of at most MaxChain parents
// (decodeParent); [] is none.
func decodeParents(dec *json.Decoder) ([]Parent, error) {
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, fmt.Errorf("%w: parents must be an array", ErrParent)
	}
	var out []Parent
	for dec.More() {
		if len(out) == MaxChain {
			return nil, fmt.Errorf("%w: more than %d parents", ErrChain, MaxChain)
		}
		p, err := decodeParent(dec)
		if err != nil {
			return nil, fmt.Errorf("parent %d: %w", len(out), err)
		}
		out = append(out, p)
	}
	_, err := dec.Token() // the ]
	return out, err
}

// decodeParent reads one parent: an object whose jti is a Snowflake ID in
// decimal as the issuer writes it (bitsalloc.ParseID), whose client_id is
// a non-empty string, whose iat is an integer and whose opaque, if given,
// is a boolean. Other members are skipped (strictly).
func decodeParent(dec *json.Decoder) (Parent, error) {
	var p Parent
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return p, ErrParent
	}
	var iat bool
	err := members(dec, func(name string) error {
		switch name {
		case "jti":
			return decodeString(dec, &p.ID, ErrParent)
		case "client_id":
			return decodeString(dec, &p.ClientID, ErrParent)
		case "iat":
			iat = true
			return decodeInt(dec, &p.IssuedAt)
		case "opaque":
			t, err := dec.Token()
			b, ok := t.(bool)
			if err != nil || !ok {
				return fmt.Errorf("%w: opaque must be a boolean", ErrParent)
			}
			p.Opaque = b
			return nil
		}
		return skipValue(dec)
	})
	if err != nil {
		return p, err
	}
	if _, err := bitsalloc.ParseID(p.ID); err != nil {
		return p, fmt.Errorf("%w: jti: %w", ErrParent, err)
	}
	if p.ClientID == "" || !iat {
		return p, ErrParent
	}
	return p, nil
}

// decodeString reads a JSON string into s; anything else is kind.
func decodeString(dec *json.Decoder, s *string, kind error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	str, ok := t.(string)
	if !ok {
		return fmt.Errorf("%w: want a string", kind)
	}
	*s = str
	return nil
}

// decodeInt reads a JSON integer (no fraction, no exponent) that fits an
// int64 into n; anything else is ErrParent.
func decodeInt(dec *json.Decoder, n *int64) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	v, err := strconv.ParseInt(string(raw), 10, 64) // refuses a string, a fraction, an exponent
	if err != nil {
		return fmt.Errorf("%w: iat must be an integer", ErrParent)
	}
	*n = v
	return nil
}
