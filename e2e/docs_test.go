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
// which the issuer refuses.
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

// TestNoTrackerNumbers checks that no code comment or string (every .go file
// of every module) and no doc (docs/*.md, README.md) cites a tracker
// number, such as "(issue N)", "item 6 of issue N" or a bare "#N": no
// reader can resolve one, so the text says the reason itself. The verb
// ("issues 20,000 tokens") and another project's reference
// ("ory/hydra#1218") are not citations.
func TestNoTrackerNumbers(t *testing.T) {
	root := repoRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go"):
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	files = append(files, filepath.Join(root, "README.md"))
	if len(files) < 100 {
		t.Fatalf("read %d files: the walk missed the repository", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, c := range trackerCitations(string(b)) {
			t.Errorf("%s cites a tracker number: %q: say the reason instead", rel, c)
		}
	}
}

// TestTrackerCitations holds trackerCitations to what it must find and what
// it must leave.
func TestTrackerCitations(t *testing.T) {
	n := "2" + "6" // built, so that this file cites nothing
	for _, cite := range []string{
		"(issue " + n + ")", "issue " + n + "'s target", "(found in review: issue " + n + " finding 4)",
		"item 6 of issue " + n, "issues " + n + " and " + n, "Issue " + n + " moved", "(issue\n// " + n + " finding 11)",
		"see #" + n, "(#" + n + ")", "issue #" + n,
	} {
		if got := trackerCitations(cite); len(got) != 1 {
			t.Errorf("%q: found %q, want one citation", cite, got)
		}
	}
	for _, text := range []string{
		"an issue of a token", "measureSessions issues 20,000 tokens", "issues 3 × 100,000 tokens",
		"an ordinary issue 203 µs", "JWT issue 2.17×", "Issues 110,000 tokens", "DPoP issue 3,922",
		"keycloak#12076", "ory/hydra#1218", "PKCS #8", "[a step](#2-install)", "color #000",
	} {
		if got := trackerCitations(text); len(got) != 0 {
			t.Errorf("%q: found %q, want no citation", text, got)
		}
	}
}

var (
	// issueRef is "issue N" or "issues N"; what follows tells a citation
	// from the verb or a figure ("issues 20,000 tokens", "issue 2.17×",
	// "issue 203 µs").
	issueRef = regexp.MustCompile(`(?i)\bissues?\s+#?\d+([,.]\d|\s*×|\s+tokens\b|\s+µs)?`)
	// hashRef is a bare "#N", not another project's "owner/name#N", a
	// "PKCS #8", an anchor "#2-install" nor a colour "#000".
	hashRef = regexp.MustCompile(`(PKCS)?(^|[\s(\[,;])#(\d+)([\w-]?)`)
	// wrap joins a comment's or a paragraph's lines, so that a citation
	// broken over two lines is one.
	wrap = regexp.MustCompile(`[ \t]*\n[ \t]*(//[ \t]*)?`)
)

// trackerCitations returns the tracker numbers text cites.
func trackerCitations(text string) []string {
	text = wrap.ReplaceAllString(text, " ")
	var out []string
	for _, m := range issueRef.FindAllStringSubmatch(text, -1) {
		if m[1] == "" {
			out = append(out, m[0])
		}
	}
	text = issueRef.ReplaceAllString(text, "")
	for _, m := range hashRef.FindAllStringSubmatch(text, -1) {
		if m[1] == "" && m[4] == "" && !strings.HasPrefix(m[3], "0") {
			out = append(out, strings.TrimSpace(m[0]))
		}
	}
	return out
}
