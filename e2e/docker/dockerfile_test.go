package docker

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snowtoken/snowtoken/config"
)

// The images' base names. Changing one is a decision: change the test with it.
const (
	distrolessNonroot = "gcr.io/distroless/static-debian12:nonroot"
	issuerStage       = "issuer"
	consumerStage     = "consumer"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Line int    // where it starts, 1-based
	Cmd  string // upper case: FROM, RUN, ...
	Args string
}

// stage is one FROM and the instructions after it.
type stage struct {
	From, Name string
	Instrs     []instruction
}

// parseDockerfile splits a Dockerfile into stages. It knows what this
// repository's Dockerfile uses: comments, blank lines, backslash
// continuations, and FROM image [AS name]; no heredocs, no escape directive.
func parseDockerfile(data []byte) ([]stage, error) {
	var (
		stages  []stage
		pending strings.Builder
		start   int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // comment lines inside a continuation are dropped
		}
		if pending.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont)
			pending.WriteByte(' ')
			continue
		}
		pending.WriteString(line)
		text := pending.String()
		pending.Reset()

		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := stage{From: f[0]}
			switch {
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.Name = f[2]
			case len(f) != 1:
				return nil, fmt.Errorf("line %d: FROM %q: want IMAGE [AS NAME]", start, in.Args)
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			return nil, fmt.Errorf("line %d: %s before the first FROM", start, in.Cmd)
		}
		stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
	}
	if pending.Len() > 0 {
		return nil, errors.New("the last line ends in a backslash")
	}
	return stages, sc.Err()
}

// all returns the stage's instructions named cmd.
func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.Instrs {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// one returns the stage's only instruction named cmd.
func (s stage) one(tb testing.TB, cmd string) instruction {
	tb.Helper()
	ins := s.all(cmd)
	if len(ins) != 1 {
		tb.Fatalf("stage %q has %d %s instructions, want 1", s.Name, len(ins), cmd)
	}
	return ins[0]
}

// execForm parses a JSON-array (exec form) argument such as ["/snowtoken"].
func execForm(tb testing.TB, in instruction, args string) []string {
	tb.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		tb.Fatalf("line %d: %s %s: want the exec form [\"...\"] (no shell in distroless): %v", in.Line, in.Cmd, args, err)
	}
	return argv
}

// repoRoot is the module root: the parent of this package's directory.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		tb.Fatalf("no go.mod in %s: %v", root, err)
	}
	return root
}

func loadDockerfile(tb testing.TB) []stage {
	tb.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		tb.Fatal(err)
	}
	stages, err := parseDockerfile(data)
	if err != nil {
		tb.Fatalf("Dockerfile: %v", err)
	}
	return stages
}

func stageNamed(tb testing.TB, stages []stage, name string) stage {
	tb.Helper()
	for _, s := range stages {
		if s.Name == name {
			return s
		}
	}
	tb.Fatalf("Dockerfile has no stage %q", name)
	return stage{}
}

// goDirective returns go.mod's "go" version, such as "1.26.8".
func goDirective(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(tb), "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)\s*$`).FindSubmatch(data)
	if m == nil {
		tb.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestParseDockerfile(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n\nFROM golang:1.26 AS build\nRUN a \\\n  # inside\n  b\nFROM scratch\nCOPY x /x\n"
	got, err := parseDockerfile([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []stage{
		{From: "golang:1.26", Name: "build", Instrs: []instruction{{Line: 4, Cmd: "RUN", Args: "a  b"}}},
		{From: "scratch", Instrs: []instruction{{Line: 8, Cmd: "COPY", Args: "x /x"}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parse = %+v\nwant    %+v", got, want)
	}
	for _, bad := range []string{"RUN x\n", "FROM a b\n", "FROM a\nRUN x \\\n"} {
		if _, err := parseDockerfile([]byte(bad)); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// TestDockerfileNeedsNoFrontendImage: a "# syntax=" directive makes BuildKit
// fetch that frontend image from a registry on every build, which an offline
// build (the stack test's, a mirrored CI's) cannot; the built-in frontend has
// all the file uses.
func TestDockerfileNeedsNoFrontendImage(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Parser directives: comments of the form "# key=value" before anything else.
	for line := range strings.Lines(string(data)) {
		directive, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok {
			break
		}
		if key, _, ok := strings.Cut(directive, "="); ok && strings.EqualFold(strings.TrimSpace(key), "syntax") {
			t.Errorf("Dockerfile has the parser directive %q: builds would fetch a frontend image", strings.TrimSpace(line))
		}
	}
}

// legacyFlags are the instruction flags Docker's legacy builder knows, which
// builds the images where BuildKit is not at hand: Debian's docker-compose
// 1.29 builds with it, as does Docker 20.10's CLI without DOCKER_BUILDKIT=1
// and a CLI of 23 or later without buildx.
var legacyFlags = map[string][]string{
	"COPY":        {"--from", "--chown"},
	"ADD":         {"--chown"},
	"HEALTHCHECK": {"--interval", "--timeout", "--start-period", "--retries"},
}

// TestDockerfileBuildsWithoutBuildKit: no BuildKit-only syntax (RUN --mount
// or --network, COPY --link or --chmod, heredocs), which the legacy builder
// rejects.
func TestDockerfileBuildsWithoutBuildKit(t *testing.T) {
	heredoc := regexp.MustCompile(`<<-?["']?[A-Za-z_]`)
	for _, st := range loadDockerfile(t) {
		for _, in := range st.Instrs {
			for _, word := range strings.Fields(in.Args) {
				if !strings.HasPrefix(word, "--") {
					break
				}
				flag, _, _ := strings.Cut(word, "=")
				if !slices.Contains(legacyFlags[in.Cmd], flag) {
					t.Errorf("line %d: %s %s: the legacy builder has no such flag", in.Line, in.Cmd, flag)
				}
			}
			if in.Cmd != "HEALTHCHECK" && heredoc.MatchString(in.Args) {
				t.Errorf("line %d: %s has a heredoc, which the legacy builder cannot read", in.Line, in.Cmd)
			}
		}
	}
}

func TestDockerfileStages(t *testing.T) {
	stages := loadDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d FROM stages, want a build stage and final stages", len(stages))
	}

	// The build stage is exactly the Go version go.mod asks for (a patch
	// release, so the image's toolchain is the one the reproducibility test
	// builds with), and an exact image (pinnedImage).
	build := stages[0]
	goVersion := goDirective(t)
	if strings.Count(goVersion, ".") != 2 {
		t.Errorf("go.mod says go %s, want a patch release (go 1.26.8) the image can pin", goVersion)
	}
	if want := "golang:" + goVersion; build.From != want && !strings.HasPrefix(build.From, want+"-") && !strings.HasPrefix(build.From, want+"@") {
		t.Errorf("build stage FROM %s, want %s (go.mod says go %s)", build.From, want, goVersion)
	}
	if !pinnedImage.MatchString(build.From) {
		t.Errorf("build stage FROM %s, want an exact version", build.From)
	}

	// The default target (the last stage) is the issuer.
	if last := stages[len(stages)-1]; last.Name != issuerStage {
		t.Errorf("last stage is %q, want %q: `docker build` without --target must give the issuer", last.Name, issuerStage)
	}

	defaultPort := ""
	for _, v := range config.Vars {
		if v.Name == "SNOWTOKEN_ADDR" {
			defaultPort = strings.TrimPrefix(v.Default, ":")
		}
	}
	for _, tc := range []struct {
		stage, binary, port string
		healthcheck         []string
	}{
		{issuerStage, "/snowtoken", defaultPort, []string{"/snowtoken", "healthcheck"}},
		{consumerStage, "/consumer", "8081", []string{"/consumer", "healthcheck"}},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			s := stageNamed(t, stages, tc.stage)
			if s.From != distrolessNonroot {
				t.Errorf("FROM %s, want %s", s.From, distrolessNonroot)
			}
			if u := s.one(t, "USER"); u.Args != "nonroot" {
				t.Errorf("USER %s, want nonroot", u.Args)
			}
			if e := s.one(t, "EXPOSE"); e.Args != tc.port {
				t.Errorf("EXPOSE %s, want %s", e.Args, tc.port)
			}
			ep := s.one(t, "ENTRYPOINT")
			if argv := execForm(t, ep, ep.Args); !slices.Equal(argv, []string{tc.binary}) {
				t.Errorf("ENTRYPOINT %q, want [%q]", argv, tc.binary)
			}
			copied := false
			for _, c := range s.all("COPY") {
				f := strings.Fields(c.Args)
				if slices.Contains(f, "--from="+build.Name) && f[len(f)-1] == tc.binary && f[len(f)-2] == "/out"+tc.binary {
					copied = true
				}
			}
			if !copied {
				t.Errorf("no COPY --from=%s /out%s %s", build.Name, tc.binary, tc.binary)
			}
			hc := s.all("HEALTHCHECK")
			if tc.healthcheck == nil {
				if len(hc) != 0 {
					t.Errorf("unexpected HEALTHCHECK %s", hc[0].Args)
				}
				return
			}
			if len(hc) != 1 {
				t.Fatalf("%d HEALTHCHECK instructions, want 1", len(hc))
			}
			_, cmd, ok := strings.Cut(hc[0].Args, "CMD ")
			if !ok {
				t.Fatalf("HEALTHCHECK %s: want ... CMD [...]", hc[0].Args)
			}
			if argv := execForm(t, hc[0], cmd); !slices.Equal(argv, tc.healthcheck) {
				t.Errorf("HEALTHCHECK CMD %q, want %q", argv, tc.healthcheck)
			}
		})
	}

	// The secrets directory the init service writes into belongs to nonroot.
	issuer := stageNamed(t, stages, issuerStage)
	if !slices.ContainsFunc(issuer.all("COPY"), func(c instruction) bool {
		return strings.Contains(c.Args, "--chown=65532:65532") && strings.Contains(c.Args, "/out/rootfs/ /")
	}) {
		t.Error("issuer stage does not give /secrets to nonroot (65532)")
	}
	// Each directory the init service mounts a volume at, so writes into.
	initSvc := service(t, loadCompose(t, true), "init")
	for _, v := range initSvc.Volumes {
		if !slices.ContainsFunc(build.all("RUN"), func(r instruction) bool {
			_, mkdir, ok := strings.Cut(r.Args, "mkdir -m 0700 ")
			return ok && slices.Contains(strings.Fields(mkdir), "/out/rootfs"+v.Target)
		}) {
			t.Errorf("build stage does not make /out/rootfs%s 0700: init (nonroot) could not write into its volume", v.Target)
		}
	}
}

// goBuild is one `go build` line of the Dockerfile.
type goBuild struct {
	Line   int
	Env    []string // NAME=VALUE before the command
	Args   []string // after "go build", -o and its value removed
	Output string   // the -o value, such as /out/snowtoken
}

// dockerfileBuilds returns the go build commands of the build stage's RUN lines.
func dockerfileBuilds(tb testing.TB) []goBuild {
	tb.Helper()
	var builds []goBuild
	for _, run := range loadDockerfile(tb)[0].all("RUN") {
		for _, part := range strings.Split(run.Args, "&&") {
			words, err := shellFields(part)
			if err != nil {
				tb.Fatalf("line %d: %v", run.Line, err)
			}
			b := goBuild{Line: run.Line}
			for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
				b.Env, words = append(b.Env, words[0]), words[1:]
			}
			if len(words) < 2 || words[0] != "go" || words[1] != "build" {
				continue
			}
			for i := 2; i < len(words); i++ {
				if words[i] == "-o" && i+1 < len(words) {
					b.Output = words[i+1]
					i++
					continue
				}
				b.Args = append(b.Args, words[i])
			}
			builds = append(builds, b)
		}
	}
	return builds
}

// shellFields splits a POSIX shell word list: blanks separate words; single
// quotes keep everything; double quotes keep everything but \" and \\; a
// backslash outside quotes keeps the next character. No expansions.
func shellFields(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		inW   bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inW {
				words, inW = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, inW = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inW = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inW = true
		case strings.IndexByte("$`;|<>(){}*?[", c) >= 0:
			return nil, fmt.Errorf("shell syntax %q in %q is more than this parser knows", c, s)
		default:
			cur.WriteByte(c)
			inW = true
		}
	}
	if inW {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`CGO_ENABLED=0 go build -ldflags="-s -w -buildid=" -o /out/x .`, []string{"CGO_ENABLED=0", "go", "build", "-ldflags=-s -w -buildid=", "-o", "/out/x", "."}},
		{`a 'b c' "d \"e\"" f\ g`, []string{"a", "b c", `d "e"`, "f g"}},
		{"  ", nil},
	} {
		got, err := shellFields(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("shellFields(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`a "b`, `a 'b`, `a $B`, "a; b"} {
		if _, err := shellFields(bad); err == nil {
			t.Errorf("shellFields(%q): no error", bad)
		}
	}
}

func TestDockerfileBuildFlags(t *testing.T) {
	builds := dockerfileBuilds(t)
	outputs := map[string]string{}
	for _, b := range builds {
		outputs[b.Output] = b.Args[len(b.Args)-1]
		if !slices.Contains(b.Env, "CGO_ENABLED=0") {
			t.Errorf("line %d: env %q: want CGO_ENABLED=0 (a static binary for distroless/static)", b.Line, b.Env)
		}
		for _, flag := range []string{"-trimpath", "-buildvcs=false"} {
			if !slices.Contains(b.Args, flag) {
				t.Errorf("line %d: go build %q lacks %s", b.Line, b.Args, flag)
			}
		}
		ldflags := ""
		for _, a := range b.Args {
			if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
				ldflags = v
			}
		}
		if f := strings.Fields(ldflags); !slices.Contains(f, "-s") || !slices.Contains(f, "-w") || !slices.Contains(f, "-buildid=") {
			t.Errorf("line %d: -ldflags=%q, want -s -w -buildid=", b.Line, ldflags)
		}
	}
	want := map[string]string{"/out/snowtoken": ".", "/out/consumer": "github.com/snowtoken/snowtoken/client/example/consumer"}
	if fmt.Sprint(outputs) != fmt.Sprint(want) {
		t.Errorf("go build outputs = %v, want %v", outputs, want)
	}
}

// Binaries built once, as the Dockerfile builds them, for every test that
// runs them; see builtBinaries.
var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	binaries  map[string]string // base name of the -o value -> path
)

// TestMain runs the tests in the docker folder at the repository root, the
// packaging they check: its files are read by their relative names.
func TestMain(m *testing.M) {
	if err := os.Chdir(filepath.Join("..", "..", "docker")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// builtBinaries runs the Dockerfile's go build lines once, in a copy of the
// Docker build context (the repository less .dockerignore), and returns the
// binaries by name ("snowtoken", "consumer").
func builtBinaries(tb testing.TB) map[string]string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds the binaries; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("no go command on PATH")
	}
	builds := dockerfileBuilds(tb)
	root := repoRoot(tb)
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "snowtoken-docker-"); buildErr != nil {
			return
		}
		src := filepath.Join(buildDir, "src")
		if buildErr = copyContext(root, src); buildErr != nil {
			return
		}
		binaries = map[string]string{}
		for _, b := range builds {
			out := filepath.Join(buildDir, "out", filepath.Base(b.Output))
			if buildErr = runGoBuild(goBin, src, b, out); buildErr != nil {
				return
			}
			binaries[filepath.Base(b.Output)] = out
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binaries
}

// runGoBuild runs b in dir, writing to out, with the environment the Docker
// build has: the RUN line's variables and no GOFLAGS.
func runGoBuild(goBin, dir string, b goBuild, out string) error {
	cmd := exec.Command(goBin, append([]string{"build", "-o", out}, b.Args...)...)
	cmd.Dir = dir
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") })
	cmd.Env = append(env, b.Env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("Dockerfile line %d in %s: go build %q: %v\n%s", b.Line, dir, b.Args, err, msg)
	}
	return nil
}

// copyContext copies what `docker build` sends from root: every file that
// .dockerignore does not exclude.
func copyContext(root, dst string) error {
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		return err
	}
	rules, err := parseDockerignore(string(ignore))
	if err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir // excluded too; skipped for speed
			}
			return nil
		}
		if !d.Type().IsRegular() || excluded(rules, rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// ignoreRule is one .dockerignore line.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// parseDockerignore reads .dockerignore as Docker does for the patterns this
// repository uses: *, ?, ** and leading !; a rule matching a directory
// excludes what is in it; the last matching rule wins.
func parseDockerignore(text string) ([]ignoreRule, error) {
	var rules []ignoreRule
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := ignoreRule{}
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			p, r.negate = strings.TrimSpace(rest), true
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch c := p[i]; {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(?:.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			case c == '[' || c == '\\':
				return nil, fmt.Errorf(".dockerignore: %q: character classes and escapes are more than this parser knows", line)
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		r.re = regexp.MustCompile(re.String())
		rules = append(rules, r)
	}
	return rules, nil
}

// excluded reports whether .dockerignore keeps rel (slash-separated, relative
// to the context) out of the build context.
func excluded(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		match := false
		for p := rel; p != "." && p != ""; p = pathDir(p) {
			if r.re.MatchString(p) {
				match = true
				break
			}
		}
		if match {
			out = !r.negate
		}
	}
	return out
}

func pathDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseDockerignore(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"go.mod":                      false,
		"main.go":                     false,
		"token/service.go":            false,
		"client/go.mod":               false,
		"bitsalloc/go.mod":            false,
		"bitsalloc/bitsalloc.go":      false,
		".git/HEAD":                   true,
		"e2e/program_test.go":         true,
		"e2e/doc.go":                  true,
		"cmd/server/serve.go":         false,
		"token/redisstore/store.go":   false,
		"token/service_test.go":       true,
		"docker/Dockerfile":           true,
		"docker/docker-compose.yml":   true,
		"docker/nginx/default.conf":   true,
		"e2e/docker/compose_test.go":  true,
		"secrets/signing-key.pem":     true,
		"demo.secret":                 true,
		"clients.json":                true,
		"README.md":                   true,
		"snowtoken":                   true,
		"bench/ids_test.go":           true,
		"docker/consumer/consumer.go": true,
	} {
		if got := excluded(rules, path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestDockerfileBuildIsReproducible runs the Dockerfile's go build lines from
// the repository root and compares with the same lines run in a copy of the
// Docker build context (another path, no .git, no tests): the binaries must
// be byte-identical. So the image holds exactly what a local build with the
// same flags and Go version makes, and .dockerignore keeps nothing it needs.
func TestDockerfileBuildIsReproducible(t *testing.T) {
	bins := builtBinaries(t)
	goBin, _ := exec.LookPath("go")
	root := repoRoot(t)
	out := t.TempDir()
	for _, b := range dockerfileBuilds(t) {
		name := filepath.Base(b.Output)
		t.Run(name, func(t *testing.T) {
			local := filepath.Join(out, name)
			if err := runGoBuild(goBin, root, b, local); err != nil {
				t.Fatal(err)
			}
			a, err := os.ReadFile(local)
			if err != nil {
				t.Fatal(err)
			}
			c, err := os.ReadFile(bins[name])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, c) {
				t.Fatalf("not reproducible: built in %s: %d bytes sha256 %x; in the build context copy: %d bytes sha256 %x",
					root, len(a), sha256.Sum256(a), len(c), sha256.Sum256(c))
			}
			if bytes.Contains(a, []byte(root)) {
				t.Errorf("the binary holds the build path %s (-trimpath missing?)", root)
			}
			t.Logf("%s: %d bytes, sha256 %x, identical in both builds", name, len(a), sha256.Sum256(a))
		})
	}
}

func TestBuiltIssuerLists(t *testing.T) {
	bin := builtBinaries(t)["snowtoken"]
	out, err := exec.Command(bin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("snowtoken -h: %v\n%s", err, out)
	}
	for _, v := range config.Vars {
		if !bytes.Contains(out, []byte(v.Name)) {
			t.Errorf("snowtoken -h does not list %s", v.Name)
		}
	}
	if !bytes.Contains(out, []byte("healthcheck")) {
		t.Errorf("snowtoken -h does not list the healthcheck command the HEALTHCHECK runs")
	}
	out, err = exec.Command(bin, "init", "-h").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("-dir")) {
		t.Errorf("snowtoken init -h = %v:\n%s\nwant the -dir flag", err, out)
	}
}
