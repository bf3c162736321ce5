package jwtpolicy

import "github.com/snowtoken/snowtoken/client/internal/refusal"

// Token types (RFC 6750 §4, RFC 9449 §5): a token's token_type, and the
// Authorization scheme that presents it.
const (
	TypeBearer = "Bearer"
	TypeDPoP   = "DPoP"
)

// TokenType is the token_type of a token whose cnf.jkt is jkt: DPoP when
// it is bound to a key (RFC 9449 §5, §6.2), else Bearer.
func TokenType(jkt string) string {
	if jkt != "" {
		return TypeDPoP
	}
	return TypeBearer
}

// Errors of CheckBinding.
var (
	// ErrBound is a DPoP-bound token presented as Bearer (RFC 9449 §7.2).
	ErrBound error = refusal.Sentinel("jwtpolicy", "the token is DPoP-bound (send it with the DPoP scheme and a DPoP proof)")
	// ErrNotBound is a token bound to no key presented as DPoP: the scheme
	// claims a binding the token does not have. A resource could accept
	// it (its proof checks out), but the issuer names DPoP only the
	// tokens it bound, refusing costs an honest client nothing but the
	// scheme's name, and accepting would hide a token that lost its
	// binding on the way (a tampered or misissued one) behind a valid
	// proof.
	ErrNotBound error = refusal.Sentinel("jwtpolicy", "the token is not DPoP-bound (send it as Bearer)")
	// ErrProofKey is a proof signed by another key than the one the token
	// is bound to: a refused proof (RFC 9449 §4.3, check 12), which both
	// the issuer and the client module answer invalid_dpop_proof.
	ErrProofKey error = refusal.Sentinel("jwtpolicy", "the DPoP proof is not signed by the key the token is bound to (cnf.jkt)")
)

// CheckBinding is the DPoP binding rule (RFC 9449 §7.1, §7.2), the
// issuer's and the client module's: a token whose cnf.jkt is jkt counts
// only as presented with the DPoP scheme (asDPoP) and a proof whose key's
// RFC 7638 thumbprint (dpop.Proof.Thumbprint) is proofKey, equal to jkt; a
// token bound to no key only as Bearer. proofKey is not looked at unless
// the token is bound and presented as DPoP, so the presentation can be
// refused before a proof is checked; then an empty proofKey is refused.
func CheckBinding(jkt string, asDPoP bool, proofKey string) error {
	switch {
	case jkt == "" && asDPoP:
		return ErrNotBound
	case jkt == "":
		return nil
	case !asDPoP:
		return ErrBound
	case proofKey != jkt:
		return ErrProofKey
	}
	return nil
}
