package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsAssertionAudience checks that every paragraph of the docs that
// tells a private_key_jwt client what its assertion's aud is names the rule
// the issuer checks (the issuer alone, RFC 10070) and never offers the
// token endpoint: docs/api.md told clients "the issuer or its /token",
// which the issuer refuses (found in review: issue 34 finding 9).
func TestDocsAssertionAudience(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	// "aud = …" or "aud: …": a paragraph that states the aud (a table or a
	// list of fields is not one paragraph of prose, so it is read a line at
	// a time).
	states := regexp.MustCompile("`?aud`?\\s*(=|:|naming|must be)")
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range regexp.MustCompile(`\n\s*\n`).Split(string(b), -1) {
			units := []string{para}
			if strings.Contains(para, "\n|") {
				units = strings.Split(para, "\n")
			}
			for _, u := range units {
				if !strings.Contains(u, "private_key_jwt") || !states.MatchString(u) {
					continue
				}
				checked++
				if !strings.Contains(u, "RFC 10070") {
					t.Errorf("%s: a paragraph states a private_key_jwt assertion's aud without naming RFC 10070:\n%s", filepath.Base(f), u)
				}
				if strings.Contains(u, "or its /token") {
					t.Errorf("%s: a paragraph offers the token endpoint as a private_key_jwt assertion's aud:\n%s", filepath.Base(f), u)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no paragraph of the docs states a private_key_jwt assertion's aud: the test reads nothing")
	}
}
