package dpop_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/snowtoken/snowtoken/client/dpop"
)

func ExampleChecker_Check() {
	// The client's key and proof, for a token request.
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	now := time.Now()
	proof := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"jti": "Xf3Aq-91sYb2", "htm": "POST", "htu": "https://issuer.example/token", "iat": now.Unix(),
	})
	proof.Header["typ"] = "dpop+jwt"
	proof.Header["jwk"] = map[string]string{"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(priv.Public().(ed25519.PublicKey))}
	signed, err := proof.SignedString(priv)
	if err != nil {
		panic(err)
	}

	// The issuer checks it; the tokens it issues carry cnf.jkt = Thumbprint.
	c, err := dpop.New(dpop.Options{})
	if err != nil {
		panic(err)
	}
	req := dpop.Request{Method: "POST", URL: "https://issuer.example/token"}
	p, err := c.Check(context.Background(), signed, req, now)
	if err != nil {
		panic(err)
	}
	fmt.Println("cnf.jkt:", p.Thumbprint)
	_, err = c.Check(context.Background(), signed, req, now)
	fmt.Println("again:", err)
	// Output:
	// cnf.jkt: 9ZP03Nu8GrXPAUkbKNxHOKBzxPX83SShgFkRNK-f2lw
	// again: dpop: proof already used: jti "Xf3Aq-91sYb2" was used before: make a new proof, with a new jti, for each request
}
