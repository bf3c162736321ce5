package jsonw

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: every string, valid UTF-8 or not, comes out as
// encoding/json writes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\x7f", "<script>&", "\u2028\u2029", "é😀", "\xff\xfe", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[len("prefix"):], want)
		}
	})
}
