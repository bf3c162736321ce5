package client_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"snowtoken/client"
	"snowtoken/client/clienttest"
)

// FuzzValidateLocal feeds Local mode arbitrary tokens: none may panic, and
// none but the one the issuer signed may pass.
func FuzzValidateLocal(f *testing.F) {
	at := time.Now()
	now := func() time.Time { return at } // fixed: no token expires, no key refetch
	is := clienttest.New(f, clienttest.Config{Now: now})
	v, err := client.New(client.Options{IssuerURL: is.URL, Mode: client.Local, RevocationCheck: client.Skip,
		Now: now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	valid, err := is.Token(f.Context(), "")
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	for _, s := range []string{valid, "", "a.b.c", parts[0] + "." + parts[1] + ".", parts[0] + ".." + parts[2],
		parts[1] + "." + parts[0] + "." + parts[2], valid + "A", strings.ToUpper(valid)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := v.Validate(t.Context(), raw)
		switch {
		case err == nil && raw != valid:
			t.Fatalf("accepted a token the issuer did not sign: %q", raw)
		case err != nil && raw == valid:
			t.Fatalf("rejected the valid token: %v", err)
		case err != nil && !errors.Is(err, client.ErrInvalidToken):
			t.Fatalf("got %v, want ErrInvalidToken", err)
		}
	})
}
