package jwtpolicy

import (
	"errors"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestCheckType(t *testing.T) {
	for typ, ok := range map[any]bool{
		"at+jwt": true, "AT+JWT": true, "application/at+jwt": true,
		"JWT": false, "": false, nil: false, 7: false, "at+jwt ": false,
	} {
		tok := &jwt.Token{Header: map[string]any{"typ": typ}}
		if err := CheckType(tok); (err == nil) != ok || (err != nil && !errors.Is(err, ErrType)) {
			t.Errorf("typ %#v: got %v, want ok=%v", typ, err, ok)
		}
	}
}
