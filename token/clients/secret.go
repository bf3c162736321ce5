package clients

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// checkSecrets decodes the client's secret hashes into secretSum and
// previousSum, and checks that a previous secret comes with its expiry. A
// client that authenticates with assertions must have none.
func (c *Client) checkSecrets() error {
	if !c.UsesSecret() {
		if c.SecretSHA256 != "" || !c.SecretExpires.IsZero() || c.PreviousSecretSHA256 != "" || !c.PreviousSecretExpires.IsZero() {
			return fmt.Errorf("a %s client has no secret: remove secret_sha256, secret_expires and the previous secret", c.Method())
		}
		return nil
	}
	if err := decodeSum(c.SecretSHA256, &c.secretSum); err != nil {
		return fmt.Errorf("secret_sha256: %w", err)
	}
	switch {
	case c.PreviousSecretSHA256 == "" && !c.PreviousSecretExpires.IsZero():
		return errors.New("previous_secret_expires without previous_secret_sha256")
	case c.PreviousSecretSHA256 == "":
		return nil
	case c.PreviousSecretExpires.IsZero():
		return errors.New("previous_secret_sha256 needs previous_secret_expires (RFC 3339), when the previous secret stops working")
	}
	if err := decodeSum(c.PreviousSecretSHA256, &c.previousSum); err != nil {
		return fmt.Errorf("previous_secret_sha256: %w", err)
	}
	if c.previousSum == c.secretSum {
		return errors.New("previous_secret_sha256 is the same as secret_sha256")
	}
	return nil
}

// decodeSum decodes a hex SHA-256 into sum.
func decodeSum(s string, sum *[sha256.Size]byte) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return errors.New("must be 64 hex digits (a SHA-256)")
	}
	copy(sum[:], b)
	return nil
}

// Authenticate returns the client whose ID and secret match at time now, or
// ErrInvalidClient (a client without a secret, too: see UsesSecret). The
// secret may be the client's current one until its
// SecretExpires, or its previous one until PreviousSecretExpires. It takes
// the same time whether the ID is unknown or the secret wrong, and whichever
// of the two secrets matches: both are always compared.
//
// A secret that matches but has expired is refused with a description
// saying so: the caller has proved it holds the secret, and "expired" tells
// its operator what to do, as Hydra does.
func (cs *Registry) Authenticate(id, secret string, now time.Time) (*Client, error) {
	sum := sha256.Sum256([]byte(secret))
	c, ok := cs.byID[id]
	current, previous := &cs.dummy, &cs.dummy
	currentLive, previousLive := 0, 0
	if ok {
		current, previous = &c.secretSum, &c.previousSum
		currentLive = secretLive(c.SecretExpires, now)
		if c.PreviousSecretSHA256 != "" {
			previousLive = secretLive(c.PreviousSecretExpires, now)
		}
	}
	currentMatch := subtle.ConstantTimeCompare(sum[:], current[:])
	previousMatch := subtle.ConstantTimeCompare(sum[:], previous[:])
	switch {
	case !ok || c.Disabled || !c.UsesSecret():
		return nil, ErrInvalidClient
	case currentMatch&currentLive|previousMatch&previousLive == 1:
		return c, nil
	case currentMatch|previousMatch == 1: // previousSum is zero without a previous secret: no secret hashes to it
		return nil, errSecretExpired
	}
	return nil, ErrInvalidClient
}

// SecretExpiry returns when secret, which authenticated c (Authenticate),
// stops authenticating: the expiry of c's current secret or of its
// previous one, whichever it is. Zero means never. It hashes secret only
// for a client one of whose secrets expires.
func (c *Client) SecretExpiry(secret string) time.Time {
	if c.SecretExpires.IsZero() && c.PreviousSecretSHA256 == "" {
		return time.Time{}
	}
	if sum := sha256.Sum256([]byte(secret)); subtle.ConstantTimeCompare(sum[:], c.secretSum[:]) == 1 {
		return c.SecretExpires
	}
	return c.PreviousSecretExpires
}

// errSecretExpired is Authenticate's refusal of a right but expired secret.
var errSecretExpired = refusal.New(ErrInvalidClient, "the client secret has expired")

// secretLive is 1 if a secret whose expiry is expires (zero: never) still
// authenticates at now, else 0.
func secretLive(expires, now time.Time) int {
	return boolInt(expires.IsZero() || now.Before(expires))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NewSecret returns a random secret (256 bits, base64url) and the
// hex SHA-256 the clients file stores.
func NewSecret() (secret, sha256Hex string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	secret = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	return secret, hex.EncodeToString(sum[:]), nil
}
