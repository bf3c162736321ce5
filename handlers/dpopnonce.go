package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// nonceWindow is how long one DPoP nonce is given out; a nonce is accepted
// in its window and the next, so for 1 to 2 of them.
const nonceWindow = time.Minute

// nonces makes and checks the server nonces of DPoP proofs (RFC 9449 §8)
// with no state: a nonce is its window's number and a MAC of it,
//
//	base64url( window (8 bytes, big-endian) || HMAC-SHA256(key, window)[:16] )
//
// so that any replica holding the key accepts any replica's nonce. The key
// is derived from the signing key (keyset.Set.Secret): a key rotation
// makes the nonces given out before it stale at once, which costs each
// client one use_dpop_nonce answer and a retry. A nil *nonces gives out no
// nonces and is asked for none (Options.DPoPNonces off).
type nonces struct{ key []byte }

// give returns the nonce of now's window.
func (n *nonces) give(now time.Time) string {
	if n == nil {
		return ""
	}
	return n.of(uint64(now.Unix()) / uint64(nonceWindow/time.Second))
}

func (n *nonces) of(window uint64) string {
	var b [8 + 16]byte
	binary.BigEndian.PutUint64(b[:8], window)
	mac := hmac.New(sha256.New, n.key)
	mac.Write(b[:8])
	copy(b[8:], mac.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// valid reports whether nonce is one made for now's window or the one
// before it.
func (n *nonces) valid(nonce string, now time.Time) bool {
	var b [8 + 16]byte
	if len(nonce) != base64.RawURLEncoding.EncodedLen(len(b)) {
		return false
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(nonce)); err != nil {
		return false
	}
	window, cur := binary.BigEndian.Uint64(b[:8]), uint64(now.Unix())/uint64(nonceWindow/time.Second)
	if window != cur && window+1 != cur {
		return false
	}
	return hmac.Equal([]byte(n.of(window)), []byte(nonce))
}
