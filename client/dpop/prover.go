package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Prover makes DPoP proofs with one private key: the client side of the
// protocol. It is safe for concurrent use.
type Prover struct {
	key    crypto.Signer
	alg    string
	jwk    JWK
	header string // base64url of the JOSE header, the same for every proof
}

// proofHeader is the JOSE header of the proofs a Prover makes.
type proofHeader struct {
	Typ string `json:"typ"`
	Alg string `json:"alg"`
	JWK JWK    `json:"jwk"`
}

// NewProver returns a Prover that signs with key: an ed25519.PrivateKey
// (alg EdDSA), an *ecdsa.PrivateKey on P-256 (alg ES256), or any other
// crypto.Signer whose Public key is one of these (a key in an HSM). Any
// other key is ErrKey.
func NewProver(key crypto.Signer) (*Prover, error) {
	var p Prover
	j, err := PublicJWK(key.Public())
	if err != nil {
		return nil, err
	}
	p.alg = AlgES256
	if j.Kty == "OKP" {
		p.alg = AlgEdDSA
	}
	// The key goes through ParseJWK, as a checker reads it: a key it would
	// refuse (an Ed25519 point of small order) makes no Prover.
	data, err := jsonv2.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	if p.jwk, err = ParseJWK(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	h, err := jsonv2.Marshal(proofHeader{Typ: Typ, Alg: p.alg, JWK: p.jwk})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	p.key, p.header = key, base64.RawURLEncoding.EncodeToString(h)
	return &p, nil
}

// PublicJWK returns the JWK of pub, an ed25519.PublicKey (OKP Ed25519) or
// an *ecdsa.PublicKey on P-256 (EC P-256), with the members kty, crv, x
// (and y): what its Thumbprint hashes. Any other key is ErrKey. The point
// is not checked: ParseJWK checks a JWK read from elsewhere.
func PublicJWK(pub crypto.PublicKey) (JWK, error) {
	switch pub := pub.(type) {
	case ed25519.PublicKey:
		return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub)}, nil
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return JWK{}, fmt.Errorf("%w: ECDSA on %s", ErrKey, pub.Curve.Params().Name)
		}
		raw, err := pub.Bytes() // 0x04 || X || Y
		if err != nil {
			return JWK{}, fmt.Errorf("%w: %w", ErrKey, err)
		}
		return JWK{Kty: "EC", Crv: "P-256", X: base64.RawURLEncoding.EncodeToString(raw[1:33]), Y: base64.RawURLEncoding.EncodeToString(raw[33:])}, nil
	}
	return JWK{}, fmt.Errorf("%w: %T", ErrKey, pub)
}

// GenerateProver returns a Prover with a fresh Ed25519 key from
// crypto/rand. The key lives as long as the Prover: a token bound to it
// (cnf.jkt = Thumbprint) can be used only by this Prover, so a process that
// restarts with a new one must get new tokens.
func GenerateProver() (*Prover, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return NewProver(priv)
}

// Algorithm returns the alg of the Prover's proofs: EdDSA or ES256.
func (p *Prover) Algorithm() string { return p.alg }

// JWK returns the Prover's public key.
func (p *Prover) JWK() JWK { return p.jwk }

// Thumbprint returns the RFC 7638 thumbprint of the Prover's public key:
// the cnf.jkt of the tokens bound to it.
func (p *Prover) Thumbprint() string { return p.jwk.Thumbprint() }

// jtiBytes is how many random bytes a jti has: 128 bits.
const jtiBytes = 16

// Proof returns a proof for a request with method to url at now: htu is url
// without its query and fragment, in the normal form Check compares (an
// error if url is not an absolute http(s) URL); ath is the hash of
// accessToken when it is not empty (a request that presents the token);
// nonce is the server's DPoP-Nonce, when it gave one. Each proof has a jti
// of 128 random bits.
func (p *Prover) Proof(method, url, accessToken, nonce string, now time.Time) (string, error) {
	if method == "" {
		return "", fmt.Errorf("%w: empty method", ErrRequest)
	}
	htu, err := normalURL(url)
	if err != nil {
		return "", fmt.Errorf("%w: URL: %w", ErrRequest, err)
	}
	var jti [jtiBytes]byte
	_, _ = rand.Read(jti[:]) // never fails (crypto/rand)
	iat := float64(now.Unix())
	c := claims{JTI: base64.RawURLEncoding.EncodeToString(jti[:]), HTM: method, HTU: htu, IAT: &iat, Nonce: nonce}
	if accessToken != "" {
		c.ATH = AccessTokenHash(accessToken)
	}
	body, err := jsonv2.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrRequest, err) // invalid UTF-8 in method or nonce
	}
	input := p.header + "." + base64.RawURLEncoding.EncodeToString(body)
	sig, err := p.sign(input)
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// sign signs input with alg: Ed25519 over the input itself, ES256 over its
// SHA-256, in the JWS form R || S of 32 bytes each (RFC 7518 §3.4), not
// the ASN.1 a crypto.Signer returns.
func (p *Prover) sign(input string) ([]byte, error) {
	if p.alg == AlgEdDSA {
		sig, err := p.key.Sign(rand.Reader, []byte(input), crypto.Hash(0))
		if err != nil {
			return nil, fmt.Errorf("dpop: signing a proof: %w", err)
		}
		return sig, nil
	}
	h := sha256.Sum256([]byte(input))
	der, err := p.key.Sign(rand.Reader, h[:], crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("dpop: signing a proof: %w", err)
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(der, &rs); err != nil || len(rest) > 0 || rs.R.Sign() <= 0 || rs.S.Sign() <= 0 ||
		rs.R.BitLen() > 256 || rs.S.BitLen() > 256 {
		return nil, errors.New("dpop: signing a proof: the signer's ECDSA signature is not ASN.1 of two 256-bit integers")
	}
	sig := make([]byte, 64)
	rs.R.FillBytes(sig[:32])
	rs.S.FillBytes(sig[32:])
	return sig, nil
}
