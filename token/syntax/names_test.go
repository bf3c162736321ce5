package syntax

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "", want: []string{}},
		{in: "a", want: []string{"a"}},
		{in: "a b", want: []string{"a", "b"}},
		{in: "read write:all urn:x:y", want: []string{"read", "write:all", "urn:x:y"}},
		{in: "a b a", want: []string{"a", "b"}},
		{in: "b a b b", want: []string{"b", "a"}},
		{in: "!#$%&'()*+,-./[]^_`{|}~", want: []string{"!#$%&'()*+,-./[]^_`{|}~"}},
		{in: "a  b", wantErr: true},
		{in: " a", wantErr: true},
		{in: "a ", wantErr: true},
		{in: " ", wantErr: true},
		{in: `a "b"`, wantErr: true},
		{in: `a\b`, wantErr: true},
		{in: "a\tb", wantErr: true},
		{in: "a\nb", wantErr: true},
		{in: "caf\u00e9", wantErr: true},
		{in: "a\x7f", wantErr: true},
		{in: strings.Repeat("s", MaxNameLen+1), wantErr: true},
		{in: scopeList(MaxScopes, 8), want: strings.Fields(scopeList(MaxScopes, 8))},
		{in: scopeList(MaxScopes+1, 1), wantErr: true},
		{in: strings.Repeat("a ", MaxScopes) + "a", wantErr: true}, // repeats count: the limit is on the input
		{in: scopeList(MaxScopeLen/MaxNameLen, MaxNameLen) + " b", wantErr: true},
	} {
		got, err := ParseScope(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrInvalidScope) {
				t.Errorf("ParseScope(%q) = %q, %v; want ErrInvalidScope", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// scopeList is n distinct scopes of size bytes each (at least 6), space-separated.
func scopeList(n, size int) string {
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = fmt.Sprintf("s%0*d", max(size-1, 5), i)
	}
	return strings.Join(scopes, " ")
}

// TestScopeBombIsCheap: a request for too many scopes is refused before it
// is split, so its cost is one pass over the bytes whatever it holds: no
// allocation, and an error that does not quote it.
func TestScopeBombIsCheap(t *testing.T) {
	for name, bomb := range map[string]string{
		"15,000 scopes, 100 KB":       scopeList(15_000, 6),
		"1,000 scopes in 2,000 bytes": strings.Repeat("a ", 999) + "a",
	} {
		var err error
		allocs := testing.AllocsPerRun(10, func() { _, err = ParseScope(bomb) })
		if !errors.Is(err, ErrInvalidScope) {
			t.Fatalf("%s: ParseScope = %v, want ErrInvalidScope", name, err)
		}
		if allocs != 0 {
			t.Errorf("%s: ParseScope made %v allocations, want 0", name, allocs)
		}
		if len(err.Error()) > 100 {
			t.Errorf("%s: error of %d bytes: %.100s", name, len(err.Error()), err)
		}
	}
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"", "a", "a b", "a  b", "a b a", `a "b"`, " a", "a\tb", "caf\u00e9", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseScope(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidScope) {
				t.Fatalf("ParseScope(%q): err = %v, want ErrInvalidScope", s, err)
			}
			return
		}
		for i, sc := range got {
			if err := CheckScope(sc); err != nil {
				t.Fatalf("ParseScope(%q) accepted scope %q: %v", s, sc, err)
			}
			if slices.Contains(got[:i], sc) {
				t.Fatalf("ParseScope(%q) = %q repeats %q", s, got, sc)
			}
		}
		joined := strings.Join(got, " ")
		again, err := ParseScope(joined)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("ParseScope(%q) = %q, but ParseScope(%q) = %q, %v", s, got, joined, again, err)
		}
	})
}
