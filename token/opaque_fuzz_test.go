package token

import (
	"errors"
	"testing"

	"github.com/snowtoken/snowtoken/snowflakealg"
)

// FuzzParseOpaque feeds parseOpaque arbitrary strings. A refusal wraps
// ErrInvalidToken; a token it accepts is the one formatOpaque writes for its
// ID and secret, byte for byte: no two strings are the same token.
func FuzzParseOpaque(f *testing.F) {
	var secret [opaqueSecretLen]byte
	copy(secret[:], "0123456789abcdef")
	good := formatOpaque(snowflakealg.ID(118251258602614784), secret)
	for _, s := range []string{
		good, good + "=", good[:len(good)-1], "ST_" + good[3:], good[:10] + "+" + good[11:], good[:10] + "/" + good[11:],
		formatOpaque(0, [opaqueSecretLen]byte{}), formatOpaque(1<<63-1, secret), "st_", "", "eyJhbGciOiJFZERTQSJ9.e30.sig",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, secret, err := parseOpaque(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("parseOpaque(%q): %v, which is not ErrInvalidToken", raw, err)
			}
			return
		}
		if back := formatOpaque(id, secret); back != raw {
			t.Fatalf("parseOpaque(%q) = %v, %x, which formatOpaque writes as %q", raw, id, secret, back)
		}
	})
}
