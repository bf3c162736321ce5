package snowflakealg

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzIDUnmarshalJSON feeds UnmarshalJSON arbitrary bytes, directly and
// through encoding/json. A refusal wraps ErrInvalidID and leaves the ID as it
// was; what it accepts is exactly what MarshalJSON writes.
func FuzzIDUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`"1"`, `"9223372036854775807"`, `"9223372036854775808"`, `"-1"`, `"01"`, `""`, `1`,
		`"1`, `null`, `"\u0031"`, `" 1"`, `"1e3"`, `"`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id := ID(42)
		if err := id.UnmarshalJSON(b); err != nil {
			if !errors.Is(err, ErrInvalidID) || id != 42 {
				t.Fatalf("UnmarshalJSON(%q): %v, id %d; want ErrInvalidID and the id untouched", b, err, id)
			}
			return
		}
		out, err := id.MarshalJSON()
		if err != nil || !bytes.Equal(out, b) || id < 0 {
			t.Fatalf("UnmarshalJSON(%q) = %d, which marshals as %q (%v)", b, id, out, err)
		}
		var v struct{ ID ID }
		if err := json.Unmarshal(append(append([]byte(`{"ID":`), b...), '}'), &v); err != nil || v.ID != id {
			t.Fatalf("through encoding/json, %q = %d, %v; want %d", b, v.ID, err, id)
		}
	})
}
