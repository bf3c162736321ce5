package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The house's limits: a newcomer reads it as a few units on a few
// levels, and no file of code is too long to read at once.
const (
	maxUnits       = 16
	maxLevels      = 6
	maxBackImports = 1
	maxCodeLines   = 500
)

// repoRoot is the repository's root: the tests of package e2e run in e2e/.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		tb.Fatalf("no repository root above e2e/: %v", err)
	}
	return root
}

// layoutEntry is one line of the README's Layout block that names entries:
// top-level ones at the start of a line ("go.mod, go.sum   ..."), notable
// folders below them indented and written from the root ("  cmd/server/ ...").
type layoutEntry struct {
	names  []string
	nested bool
	line   int // in README.md
}

var (
	layoutTopLine    = regexp.MustCompile(`^([^\s,]+(?:, [^\s,]+)*)(?:\s{2,}|$)`)
	layoutNestedLine = regexp.MustCompile(`^\s+([^\s,]+/)(?:\s|$)`)
)

// readmeLayout parses the first fenced block under the README's "## Layout".
// A line of the block that is neither an entry nor a continuation (indented
// past the names' column) is an error, so that a line the test cannot read
// is not taken for prose.
func readmeLayout(tb testing.TB, root string) []layoutEntry {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, "## Layout")
	if start < 0 {
		tb.Fatal(`README.md has no "## Layout" section`)
	}
	var (
		entries []layoutEntry
		inBlock bool
	)
	for i := start + 1; i < len(lines); i++ {
		line := lines[i]
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			tb.Fatalf("README.md:%d: the Layout section has no fenced block", start+1)
		case !inBlock && strings.HasPrefix(line, "```"):
			inBlock = true
		case inBlock && strings.HasPrefix(line, "```"):
			if len(entries) == 0 {
				tb.Fatalf("README.md:%d: the Layout block lists nothing", i+1)
			}
			return entries
		case !inBlock || strings.TrimSpace(line) == "":
		case layoutTopLine.MatchString(line):
			names := strings.Split(layoutTopLine.FindStringSubmatch(line)[1], ", ")
			entries = append(entries, layoutEntry{names: names, line: i + 1})
		case layoutNestedLine.MatchString(line) && strings.Contains(strings.TrimSuffix(layoutNestedLine.FindStringSubmatch(line)[1], "/"), "/"):
			entries = append(entries, layoutEntry{names: []string{layoutNestedLine.FindStringSubmatch(line)[1]}, nested: true, line: i + 1})
		case strings.HasPrefix(line, strings.Repeat(" ", 8)):
			// the continuation of the line above
		default:
			tb.Fatalf("README.md:%d: a Layout line that names no entry: %q", i+1, line)
		}
	}
	tb.Fatal("README.md: the Layout block does not end")
	return nil
}

// topLevelEntries returns the repository's top-level files and folders:
// what git tracks or would track (ignored files such as a built binary left
// out), or, without git, what the root holds; dot-entries are left to the
// list's choice either way.
func topLevelEntries(tb testing.TB, root string) map[string]bool {
	tb.Helper()
	seen := map[string]bool{}
	if out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output(); err == nil {
		for _, p := range strings.Split(string(out), "\x00") {
			if p == "" {
				continue
			}
			first, _, isDir := strings.Cut(p, "/")
			if _, err := os.Lstat(filepath.Join(root, first)); err != nil {
				continue // deleted in the work tree, not yet in the index
			}
			seen[first+map[bool]string{true: "/"}[isDir]] = true
		}
		return seen
	}
	des, err := os.ReadDir(root)
	if err != nil {
		tb.Fatal(err)
	}
	for _, de := range des {
		seen[de.Name()+map[bool]string{true: "/"}[de.IsDir()]] = true
	}
	return seen
}

// TestLayoutREADME checks the README's Layout against the repository both
// ways: every entry it lists exists (a folder as a folder), and every
// top-level entry of the repository that is not a dot-entry is listed.
func TestLayoutREADME(t *testing.T) {
	root := repoRoot(t)
	listed := map[string]bool{}
	for _, e := range readmeLayout(t, root) {
		for _, name := range e.names {
			if !e.nested && strings.Count(strings.TrimSuffix(name, "/"), "/") > 0 {
				t.Errorf("README.md:%d: %q is not a top-level entry: indent it under its folder", e.line, name)
			}
			listed[name] = true
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
			switch {
			case err != nil:
				t.Errorf("README.md:%d: the Layout lists %s, which the repository does not have", e.line, name)
			case strings.HasSuffix(name, "/") != fi.IsDir():
				t.Errorf("README.md:%d: the Layout lists %s, but it is %s", e.line, name, map[bool]string{true: "a folder (write it with a slash)", false: "a file"}[fi.IsDir()])
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(topLevelEntries(t, root))) {
		if !listed[name] && !strings.HasPrefix(name, ".") {
			t.Errorf("%s is in the repository but not in README.md's Layout: add a line saying what it holds", name)
		}
	}
}

// repoFiles returns the paths of the repository's files, every module's,
// not those of folders that hold no code of the house (skipDir).
func repoFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && skipDir(d.Name()):
			return filepath.SkipDir
		case !d.IsDir():
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// goModules returns the directories of the repository's Go modules.
func goModules(tb testing.TB, root string) []string {
	tb.Helper()
	var mods []string
	for _, path := range repoFiles(tb, root) {
		if filepath.Base(path) == "go.mod" {
			mods = append(mods, filepath.Dir(path))
		}
	}
	return mods
}

// skipDir says which folders hold no code of the house: history, vendored
// code and test data.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "vendor" || name == "testdata"
}

// listedPackage is what the house test reads of `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// listPackages runs `go list -json ./...` in each module.
func listPackages(tb testing.TB, mods []string) []listedPackage {
	tb.Helper()
	var pkgs []listedPackage
	for _, mod := range mods {
		cmd := exec.Command("go", "list", "-e", "-json", "./...")
		cmd.Dir = mod
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("go list in %s: %v\n%s", mod, err, stderr.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listedPackage
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				tb.Fatalf("go list in %s: %v", mod, err)
			}
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// houseUnits maps each unit to the units it imports (non-test imports): a
// unit is a top-level folder holding Go packages, all of them together, or
// one code file of the root package, by the imports of that file alone.
func houseUnits(tb testing.TB, root string, pkgs []listedPackage) map[string]map[string]bool {
	tb.Helper()
	unitOf := map[string]string{} // import path -> unit
	for _, p := range pkgs {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			tb.Fatalf("package %s is outside the repository: %s", p.ImportPath, p.Dir)
		}
		if rel != "." {
			unitOf[p.ImportPath] = strings.Split(filepath.ToSlash(rel), "/")[0] + "/"
		}
	}
	units := map[string]map[string]bool{}
	add := func(unit string, imports []string) {
		if units[unit] == nil {
			units[unit] = map[string]bool{}
		}
		for _, imp := range imports {
			if u, ok := unitOf[imp]; ok && u != unit {
				units[unit][u] = true
			}
		}
	}
	for _, p := range pkgs {
		if u, ok := unitOf[p.ImportPath]; ok {
			add(u, p.Imports)
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
			if err != nil {
				tb.Fatal(err)
			}
			var imports []string
			for _, spec := range f.Imports {
				path, _ := strconv.Unquote(spec.Path.Value)
				imports = append(imports, path)
			}
			add(name, imports)
		}
	}
	return units
}

// houseLevels gives each unit its level, 1 + the highest level of the units
// it imports, walking the units in name order; an import that closes a cycle
// runs back up: it is returned as a back import and gives no level.
func houseLevels(units map[string]map[string]bool) (levels map[string]int, back [][2]string) {
	levels = map[string]int{}
	onPath := map[string]bool{}
	var visit func(u string) int
	visit = func(u string) int {
		if l, ok := levels[u]; ok {
			return l
		}
		onPath[u] = true
		level := 1
		for _, imp := range slices.Sorted(maps.Keys(units[u])) {
			if onPath[imp] {
				back = append(back, [2]string{u, imp})
				continue
			}
			level = max(level, 1+visit(imp))
		}
		onPath[u] = false
		levels[u] = level
		return level
	}
	for _, u := range slices.Sorted(maps.Keys(units)) {
		visit(u)
	}
	return levels, back
}

// TestLayoutImports draws the house from its imports (go list of every
// module of the repository) and holds it to the house's limits: at most 16
// units on at most 6 levels, at most one import that runs back up, and no
// file of code over 500 lines. The drawing is in the log (go test -v).
func TestLayoutImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("draws the house with `go list`: needs the go command on PATH")
	}
	root := repoRoot(t)
	units := houseUnits(t, root, listPackages(t, goModules(t, root)))
	levels, back := houseLevels(units)

	var drawing strings.Builder
	top := 0
	for _, l := range levels {
		top = max(top, l)
	}
	for l := top; l >= 1; l-- {
		for _, u := range slices.Sorted(maps.Keys(units)) {
			if levels[u] == l {
				fmt.Fprintf(&drawing, "level %d  %-16s imports %s\n", l, u, strings.Join(slices.Sorted(maps.Keys(units[u])), " "))
			}
		}
	}
	for _, b := range back {
		fmt.Fprintf(&drawing, "back import: %s -> %s\n", b[0], b[1])
	}
	t.Logf("the house, %d units on %d levels:\n%s", len(units), top, drawing.String())

	if len(units) > maxUnits {
		t.Errorf("%d units, want at most %d", len(units), maxUnits)
	}
	if top > maxLevels {
		t.Errorf("%d levels, want at most %d", top, maxLevels)
	}
	if len(back) > maxBackImports {
		t.Errorf("%d imports run back up (%v), want at most %d", len(back), back, maxBackImports)
	}
	for _, f := range longCodeFiles(t, root) {
		t.Errorf("%s, want at most %d lines in a file of code: give its concerns files (or packages) of their own", f, maxCodeLines)
	}
}

// longCodeFiles returns the non-test .go files of the repository (every
// module; not vendored code nor test data) over maxCodeLines, with their
// line counts.
func longCodeFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var long []string
	for _, path := range repoFiles(tb, root) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		if n := bytes.Count(data, []byte("\n")); n > maxCodeLines {
			rel, _ := filepath.Rel(root, path)
			long = append(long, fmt.Sprintf("%s: %d lines", filepath.ToSlash(rel), n))
		}
	}
	return long
}

// mdLink is a Markdown link or image target: [text](target) or
// ![alt](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// mdPage is what the link check reads of a Markdown page: its lines outside
// fenced blocks, inline code taken out, and the anchors its headings and
// <a id> tags give.
type mdPage struct {
	lines   map[int]string // line number -> text
	anchors map[string]bool
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	htmlTag    = regexp.MustCompile(`<[^>]*>`)
	mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

func readMDPage(tb testing.TB, path string) mdPage {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	page := mdPage{lines: map[int]string{}, anchors: map[string]bool{}}
	slugs := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			page.anchors[m[1]] = true
		}
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			slug := githubSlug(title)
			if k := slugs[slug]; k > 0 {
				page.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				page.anchors[slug] = true
			}
			slugs[slug]++
		}
		page.lines[n] = inlineCode.ReplaceAllString(line, "")
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return page
}

// githubSlug is the anchor GitHub gives a heading: its text without tags and
// link targets, in lower case, keeping letters, digits, '-' and '_', spaces
// made '-'.
func githubSlug(title string) string {
	title = mdLinkText.ReplaceAllString(htmlTag.ReplaceAllString(title, ""), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinks checks every relative link of README.md, BENCHMARKS.md and
// docs/*.md: the file it names exists, and an anchor it names is a heading
// or an <a id> of that page.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}, pages...)
	read := map[string]mdPage{}
	page := func(path string) mdPage {
		if p, ok := read[path]; ok {
			return p
		}
		read[path] = readMDPage(t, path)
		return read[path]
	}
	links := 0
	for _, from := range pages {
		rel, _ := filepath.Rel(root, from)
		p := page(from)
		for _, n := range slices.Sorted(maps.Keys(p.lines)) {
			for _, m := range mdLink.FindAllStringSubmatch(p.lines[n], -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				path := from
				if file != "" {
					path = filepath.Join(filepath.Dir(from), filepath.FromSlash(file))
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %s: no such file", rel, n, target)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !page(path).anchors[anchor] {
					t.Errorf("%s:%d: link %s: no heading or <a id> %q in %s", rel, n, target, anchor, filepath.Base(path))
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative link found: the check reads nothing")
	}
}
