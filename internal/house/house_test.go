// Package house measures the repository's architecture and keeps it: at
// most MaxUnits units on MaxLevels levels, no import back up (a cycle
// between units) and no code file over MaxLines lines.
//
// A unit is a top-level room of the root module: a top-level directory
// holding non-test Go code, its subpackages included, and the root's main
// package one unit of its own. internal/ is one unit: its packages are
// shared helpers under every room, production (atomicfile, tracing, watch,
// …) and test (redistest, logtest, …) alike. The other modules (client,
// bitsalloc, bench, …) are libraries or tools beside the house, not rooms of
// it, and are not units. A unit imports another when a non-test file of one
// of its packages imports a package of the other; a unit's level is the
// number of units on the longest import chain that starts at it (a unit that
// imports no other is level 1), and the house has as many levels as its
// highest unit. Test files are left out of the graph: a test may reach
// across the house (e2e drives everything), production code may not.
//
// The line limit holds for every non-test .go file of every module in the
// repository (testdata aside).
//
//	go test ./internal/house -v    prints the units, their levels and imports
//
// See docs/modules.md.
package house

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The house's limits.
const (
	MaxUnits  = 16
	MaxLevels = 6
	MaxLines  = 500
)

// pkg is the part of `go list -json` the measure reads.
type pkg struct {
	ImportPath string
	Dir        string
	Module     *struct{ Path, Dir string }
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
}

// rootModule returns the root module's path and folder.
func rootModule(tb testing.TB) (path, dir string) {
	tb.Helper()
	out, err := exec.Command("go", "list", "-m", "-json").Output()
	if err != nil {
		tb.Fatalf("go list -m: %v", err)
	}
	var m struct{ Path, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		tb.Fatalf("go list -m: %v", err)
	}
	return m.Path, m.Dir
}

// listPackages returns the root module's packages that hold non-test code.
func listPackages(tb testing.TB, dir string) []pkg {
	tb.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("go list ./...: %v", err)
		}
		if len(p.GoFiles)+len(p.CgoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// unitOf returns the unit of the package importPath in the module modPath:
// its top-level directory, "main" for the root package, or "" when it is
// not in the module.
func unitOf(modPath, importPath string) string {
	if importPath == modPath {
		return "main"
	}
	rest, ok := strings.CutPrefix(importPath, modPath+"/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// graph is the units and, for each, the units it imports.
type graph map[string]map[string]bool

// unitGraph builds the import graph between the units of pkgs, the root
// module's packages. A path under the module's that belongs to a module of
// its own (client, bitsalloc) names no unit.
func unitGraph(modPath string, pkgs []pkg) graph {
	g := graph{}
	for _, p := range pkgs {
		g[unitOf(modPath, p.ImportPath)] = map[string]bool{}
	}
	for _, p := range pkgs {
		from := unitOf(modPath, p.ImportPath)
		for _, imp := range p.Imports {
			if to := unitOf(modPath, imp); g[to] != nil && to != from {
				g[from][to] = true
			}
		}
	}
	return g
}

// levels returns each unit's level, or the units of a cycle when there is one.
func (g graph) levels() (map[string]int, []string) {
	level := map[string]int{}
	state := map[string]int{} // 1: on the path, 2: done
	var path []string
	var cycle []string
	var visit func(u string) int
	visit = func(u string) int {
		switch state[u] {
		case 2:
			return level[u]
		case 1:
			i := slices.Index(path, u)
			cycle = append(slices.Clone(path[i:]), u)
			return 0
		}
		state[u] = 1
		path = append(path, u)
		l := 1
		for _, v := range slices.Sorted(maps.Keys(g[u])) {
			l = max(l, visit(v)+1)
			if cycle != nil {
				return 0
			}
		}
		path = path[:len(path)-1]
		state[u] = 2
		level[u] = l
		return l
	}
	for _, u := range slices.Sorted(maps.Keys(g)) {
		visit(u)
		if cycle != nil {
			return nil, cycle
		}
	}
	return level, nil
}

func TestHouseUnitsAndLevels(t *testing.T) {
	modPath, dir := rootModule(t)
	g := unitGraph(modPath, listPackages(t, dir))
	level, cycle := g.levels()
	if cycle != nil {
		t.Fatalf("an import back up: the units %s import each other", strings.Join(cycle, " → "))
	}
	height := 0
	for _, u := range slices.Sorted(maps.Keys(g)) {
		height = max(height, level[u])
		t.Logf("house: level %d  %-13s imports %s", level[u], u, strings.Join(slices.Sorted(maps.Keys(g[u])), " "))
	}
	t.Logf("house: %d units on %d levels (limits %d, %d)", len(g), height, MaxUnits, MaxLevels)
	if len(g) > MaxUnits {
		t.Errorf("the house has %d units, want at most %d", len(g), MaxUnits)
	}
	if height > MaxLevels {
		t.Errorf("the house has %d levels, want at most %d", height, MaxLevels)
	}
}

func TestGraphFindsTheBackUp(t *testing.T) {
	// The measure itself: a chain of three is three levels, and an import
	// back up is a cycle, named.
	g := graph{"a": {"b": true}, "b": {"c": true}, "c": {}}
	level, cycle := g.levels()
	if cycle != nil || level["a"] != 3 || level["c"] != 1 {
		t.Errorf("levels of a→b→c = %v (cycle %v), want a:3 b:2 c:1", level, cycle)
	}
	g["c"]["a"] = true
	if _, cycle := g.levels(); strings.Join(cycle, " ") != "a b c a" {
		t.Errorf("cycle of a→b→c→a = %v, want a b c a", cycle)
	}
	if got := unitOf("m", "m/token/keyset"); got != "token" {
		t.Errorf("unitOf(m/token/keyset) = %q, want token", got)
	}
	if got := unitOf("m", "m"); got != "main" {
		t.Errorf("unitOf(m) = %q, want main", got)
	}
	if got := unitOf("m", "mx/token"); got != "" {
		t.Errorf("unitOf(mx/token) = %q, want none", got)
	}
	other := unitGraph("m", []pkg{
		{ImportPath: "m/token", Imports: []string{"m/client", "m/internal/x"}},
		{ImportPath: "m/internal/x"},
	})
	if len(other) != 2 || other["token"]["client"] || !other["token"]["internal"] {
		t.Errorf("units of token→{client (a module of its own), internal} = %v, want token→internal only", other)
	}
}

func TestNoCodeFileOverTheLimit(t *testing.T) {
	_, dir := rootModule(t)
	files, biggest, biggestLines := 0, "", 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		n, err := countLines(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(dir, path)
		if n > biggestLines {
			biggest, biggestLines = rel, n
		}
		if n > MaxLines {
			t.Errorf("%s has %d lines, want at most %d", rel, n, MaxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("house: %d code files in every module, the longest %s at %d lines (limit %d)", files, biggest, biggestLines, MaxLines)
}

// countLines returns the number of lines in the file at path.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
