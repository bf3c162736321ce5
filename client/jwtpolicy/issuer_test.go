package jwtpolicy

import (
	"errors"
	"testing"
)

func TestIssuer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://auth.example.com", "https://auth.example.com"},
		{"https://auth.example.com/", "https://auth.example.com"},
		{"https://auth.example.com///", "https://auth.example.com"},
		{"http://issuer:8080/", "http://issuer:8080"},
		{"HTTPS://Auth.Example.COM/Tenant/", "https://auth.example.com/Tenant"},
		{"https://auth.example.com/a%2Fb/", "https://auth.example.com/a%2Fb"},
		{"http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080"},
	} {
		got, err := Issuer(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Issuer(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
		if again, err := Issuer(got); err != nil || again != got {
			t.Errorf("Issuer(%q) = %q, %v: the canonical form is not its own", got, again, err)
		}
	}
	for _, in := range []string{
		"", "auth.example.com", "/path", "ftp://auth.example.com", "https://", "https:auth.example.com",
		"https://auth.example.com?", "https://auth.example.com/?tenant=1", "https://auth.example.com/#",
		"https://user:pw@auth.example.com", " https://auth.example.com", "https://auth.example.com/\n",
	} {
		if got, err := Issuer(in); !errors.Is(err, ErrIssuer) {
			t.Errorf("Issuer(%q) = %q, %v, want ErrIssuer", in, got, err)
		}
	}
}
