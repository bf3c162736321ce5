package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestClientNewFlags checks that each flag of `client new` reaches the
// clients-file entry it prints.
func TestClientNewFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, field string
	}{
		{"-may-set-subject", "may_set_subject"},
		{"-may-introspect", "may_introspect"},
		{"-admin", "admin"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			var out bytes.Buffer
			if err := Run(t.Context(), []string{"client", "new", "-id", "gw", "-scopes", "a", tc.flag}, nil, &out); err != nil {
				t.Fatalf("client new %s: %v", tc.flag, err)
			}
			_, entry, ok := strings.Cut(out.String(), "clients-file entry:\n")
			if !ok {
				t.Fatalf("client new printed no clients-file entry:\n%s", out.String())
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(entry), &got); err != nil {
				t.Fatalf("entry %s: %v", entry, err)
			}
			if got[tc.field] != true {
				t.Errorf("client new %s: entry %s, want %q true", tc.flag, entry, tc.field)
			}
		})
	}
}
