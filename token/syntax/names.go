package syntax

import (
	"fmt"
	"slices"
	"strings"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// Missing returns the strings of want that are not in have, in want's
// order, or nil: for an error that names them.
func Missing(have, want []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

// ContainsAll reports whether every string in want is in have, in time
// linear in their lengths: a nested loop while have is short, else a set.
func ContainsAll(have, want []string) bool {
	if len(have) > 8 && len(want) > 1 {
		set := make(map[string]struct{}, len(have))
		for _, h := range have {
			set[h] = struct{}{}
		}
		for _, w := range want {
			if _, ok := set[w]; !ok {
				return false
			}
		}
		return true
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// MaxNameLen bounds subjects, client IDs and each scope: names go into
// Redis keys and headers.
const MaxNameLen = 128

// CheckName accepts a client ID or subject: 1 to 128 of A-Z a-z 0-9 and
// . _ - : @ +. Braces are excluded because names become Redis hash tags;
// spaces and control characters because they become HTTP headers.
func CheckName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return refusal.Phrase("must be 1 to %d characters", MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-:@+", c) >= 0) {
			return refusal.Phrase("character %q not allowed (use A-Z a-z 0-9 . _ - : @ +)", c)
		}
	}
	return nil
}

// CheckScope accepts one scope as RFC 6749 §3.3 defines it: printable
// ASCII other than space, double quote and backslash.
func CheckScope(s string) error { return checkPrintable(s, MaxNameLen, "a scope") }

// checkPrintable accepts 1 to maxLen bytes of printable ASCII other than
// space, double quote and backslash: what goes unescaped into a JSON string
// and into a space-separated list. what names the thing in the error.
func checkPrintable(s string, maxLen int, what string) error {
	if s == "" || len(s) > maxLen {
		return refusal.Phrase("must be 1 to %d characters", maxLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return refusal.Phrase("character %q not allowed in %s", c, what)
		}
	}
	return nil
}

// ParseScope splits a space-separated scope parameter (RFC 6749 §3.3) into
// its scopes, dropping repeats. An empty string gives no scopes. More than
// MaxScopes scopes (repeats included) or MaxScopeLen bytes are refused
// before any work that grows with them; parsing is linear.
func ParseScope(s string) ([]string, error) {
	if len(s) > MaxScopeLen {
		return nil, errScopeTooLong
	}
	n := strings.Count(s, " ") + 1
	if n > MaxScopes {
		return nil, errTooManyScopes
	}
	out := make([]string, 0, n)
	var seen map[string]struct{} // for repeats, once a nested loop would cost more
	if n > 8 {
		seen = make(map[string]struct{}, n)
	}
	for f := range strings.SplitSeq(s, " ") {
		if f == "" {
			if n == 1 {
				break
			}
			return nil, refusal.New(ErrInvalidScope, "scope has an empty entry (use single spaces)")
		}
		if err := CheckScope(f); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidScope, err)
		}
		if seen != nil {
			if _, dup := seen[f]; dup {
				continue
			}
			seen[f] = struct{}{}
		} else if slices.Contains(out, f) {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseScope's refusals of an oversized parameter, made once: refusing
// costs no allocation.
var (
	errScopeTooLong  = refusal.New(ErrInvalidScope, "longer than %d bytes", MaxScopeLen)
	errTooManyScopes = refusal.New(ErrInvalidScope, "more than %d scopes", MaxScopes)
)

// IsThumbprint reports whether s has the shape of an RFC 7638 SHA-256
// thumbprint (a DPoP key's cnf.jkt): 43 base64url characters.
func IsThumbprint(s string) bool {
	if len(s) != 43 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
