package jwk

import (
	"errors"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Set is a parsed JSON Web Key Set (RFC 7517 §5): the keys a caller
// verifies with, in the order of the set.
type Set struct {
	keys []Key
}

// ParseSet reads a key set for verifying signatures made with one of algs
// (nil: Algorithms): a JSON object whose "keys" is an array of at most
// MaxKeys keys; other top-level members are ignored. A key that breaks a
// rule of the package (see its documentation), or two kept keys of one
// kid, refuse the set whole (ErrSet, or ErrPrivateKey): a set is its
// owner's configuration, and a flaw in it is theirs to fix, not ours to
// skip silently. A key for encryption, or of a type, curve or alg not of
// algs, is skipped. A set with no key kept is refused.
func ParseSet(data []byte, algs ...string) (*Set, error) {
	if algs == nil {
		algs = Algorithms
	}
	var doc struct {
		Keys []jsontext.Value `json:"keys"`
	}
	if err := jsonv2.Unmarshal(data, &doc); err != nil {
		return nil, refuse(ErrSet, "not a key set: a JSON object with a \"keys\" array")
	}
	if doc.Keys == nil {
		return nil, refuse(ErrSet, "no \"keys\" array")
	}
	if len(doc.Keys) > MaxKeys {
		return nil, refuse(ErrSet, "%d keys, more than %d", len(doc.Keys), MaxKeys)
	}
	s := &Set{}
	for i, raw := range doc.Keys {
		k, skip, err := parse(raw, algs, false)
		if err != nil {
			kind := ErrSet
			if errors.Is(err, ErrPrivateKey) {
				kind = ErrPrivateKey
			}
			d, _ := Description(err)
			return nil, refuse(kind, "key %d: %s", i, d)
		}
		if skip != "" {
			continue
		}
		if k.ID != "" && slices.ContainsFunc(s.keys, func(o Key) bool { return o.ID == k.ID }) {
			return nil, refuse(ErrSet, "key %d: kid %.64q given twice", i, k.ID)
		}
		s.keys = append(s.keys, k)
	}
	if len(s.keys) == 0 {
		return nil, refuse(ErrSet, "no usable signing key (%s)", typesOf(algs))
	}
	return s, nil
}

// Len is the number of keys in the set.
func (s *Set) Len() int { return len(s.keys) }

// Keys returns the set's keys, in the order of the set.
func (s *Set) Keys() []Key { return slices.Clone(s.keys) }

// ByID returns the key of kid, if the set holds one.
func (s *Set) ByID(kid string) (Key, bool) {
	for _, k := range s.keys {
		if k.ID == kid {
			return k, true
		}
	}
	return Key{}, false
}
