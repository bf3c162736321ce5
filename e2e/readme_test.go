package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock is a shell block of README.md or a docs/ page that runs
// against a dev server.
type readmeBlock struct {
	file string
	line int // of its opening fence
	text string
}

// readmeDevFiles are the pages whose examples run, README.md first: the
// README's quick tour, then each page of docs/ in name order.
func readmeDevFiles(tb testing.TB) []string {
	tb.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, pages...)
}

// readmeDevBlocks returns the blocks of README.md and docs/*.md fenced as
// ```sh dev-test: the fence's info string says "sh" to a reader and a
// renderer, and "dev-test" only to this test.
func readmeDevBlocks(tb testing.TB) []readmeBlock {
	tb.Helper()
	var blocks []readmeBlock
	for _, name := range readmeDevFiles(tb) {
		blocks = append(blocks, fileDevBlocks(tb, name)...)
	}
	return blocks
}

// fileDevBlocks returns the ```sh dev-test blocks of one page.
func fileDevBlocks(tb testing.TB, name string) []readmeBlock {
	tb.Helper()
	f, err := os.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh dev-test":
			cur = &readmeBlock{file: name, line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if cur != nil {
		tb.Fatalf("%s:%d: the block does not end", name, cur.line)
	}
	return blocks
}

// TestREADMEDevExamples runs the API examples of the README and of the
// docs/ pages as a newcomer would:
// the built binary with no configuration (dev mode, its embedded Redis), the
// three commands its banner says to paste, then every ```sh dev-test block in
// order in one shell (runRunbook's), each of which must exit 0. curl is told by a curlrc
// of the test's own (invisible in the README) to fail on an HTTP error, so an
// answer such as 400 invalid_scope fails its block. The only change made to
// the blocks is the port: the server listens on a free one, not on 8080 and
// 9464, which another program may hold.
func TestREADMEDevExamples(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("needs jq (Debian: apt-get install jq)")
	}
	// The curlrc below says fail-with-body, which curl has since 7.76.
	if out, err := exec.Command("curl", "--fail-with-body", "--version").CombinedOutput(); err != nil {
		t.Skipf("needs curl 7.76 or later (--fail-with-body): curl --fail-with-body --version: %v: %s", err, lastLines(string(out), 2))
	}
	blocks := readmeDevBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("%d ```sh dev-test blocks in %v, want the API's examples", len(blocks), readmeDevFiles(t))
	}
	bin := fleetBinary(t)
	p := fleet{bin: bin}.start(t, replica{name: "dev server", dev: true})
	metricsAddr := p.metricsAddr
	out := p.out.String()
	// Every command the banner says to paste: to its closing rule.
	start := strings.Index(out, " export CLIENT_ID=")
	end := strings.Index(out[max(start, 0):], "\n=====")
	if start < 0 || end < 0 || metricsAddr == "" {
		t.Fatalf("no banner commands to paste, or no metrics address:\n%s", out)
	}
	pasted := out[start : start+end+1]
	for _, want := range []string{"/token/validate\n", "token-exchange", "txn_token=1"} {
		if !strings.Contains(pasted, want) {
			t.Fatalf("the banner's commands have no %q:\n%s", want, pasted)
		}
	}
	base := "http://localhost:" + p.addr[strings.LastIndexByte(p.addr, ':')+1:]

	var script strings.Builder
	script.WriteString(pasted + "\necho\n")
	for _, b := range blocks {
		text := strings.ReplaceAll(b.text, "http://localhost:8080", base)
		text = strings.ReplaceAll(text, "127.0.0.1:9464", metricsAddr)
		fmt.Fprintf(&script, "echo '### %s:%d'\n%s\n", b.file, b.line, text)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".curlrc"), []byte("fail-with-body\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// It stops at the first command that fails; the last ### line names its block.
	got := runRunbook(t, bin, script.String(), "HOME="+home, "CURL_HOME="+home)
	if !strings.Contains(got, `"active":true`) {
		t.Errorf("no example validated a token:\n%s", got)
	}
}
