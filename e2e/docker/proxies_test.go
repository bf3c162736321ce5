package docker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/logtest"
)

// The variables that make a missing proxy a failure instead of a skip.
// CI sets the first: Debian has caddy. Traefik is built from its Go module
// or taken from its release, neither of which these machines can do (some
// of the modules it links are not served by the module proxy they use, and
// its release site cannot be reached): SNOWTOKEN_TEST_TRAEFIK names a
// traefik binary where a machine has one, else traefik on PATH runs.
const (
	envRequireCaddy   = "SNOWTOKEN_TEST_REQUIRE_CADDY"
	envRequireTraefik = "SNOWTOKEN_TEST_REQUIRE_TRAEFIK"
	envTraefik        = "SNOWTOKEN_TEST_TRAEFIK"
)

// missingProxy skips, or fails when the variable require is 1.
func missingProxy(tb testing.TB, require, why string) {
	tb.Helper()
	if os.Getenv(require) == "1" {
		tb.Fatalf("%s, and %s=1", why, require)
	}
	tb.Skipf("%s (set %s=1 to make this a failure)", why, require)
}

// caddyBinary returns the caddy to run, or skips (fails under
// envRequireCaddy).
func caddyBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("caddy")
	if err != nil {
		missingProxy(tb, envRequireCaddy, "caddy is not on PATH")
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		missingProxy(tb, envRequireCaddy, fmt.Sprintf("caddy version: %v: %s", err, out))
	}
	return bin
}

// traefikBinary returns the traefik SNOWTOKEN_TEST_TRAEFIK names, else
// the one on PATH, or skips (fails under envRequireTraefik).
func traefikBinary(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv(envTraefik)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("traefik"); err != nil {
			missingProxy(tb, envRequireTraefik, "traefik is not on PATH and "+envTraefik+" names none")
		}
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		missingProxy(tb, envRequireTraefik, fmt.Sprintf("%s version: %v: %s", bin, err, out))
	}
	return bin
}

// replacement is one host-specific string of a shipped file, and what a
// test puts in its place.
type replacement struct{ old, new string }

// renderConf is the file name (conf its content) with each replacement
// made, each old string found exactly once, and nothing else changed.
func renderConf(tb testing.TB, name, conf string, rs ...replacement) string {
	tb.Helper()
	for _, r := range rs {
		if n := strings.Count(conf, r.old); n != 1 {
			tb.Fatalf("%s holds %q %d times, want once", name, r.old, n)
		}
		conf = strings.Replace(conf, r.old, r.new, 1)
	}
	return conf
}

// caddyReplacements are caddy/Caddyfile's host-specific strings: the
// port, the issuer's address (twice) and the consumer's. (A host in the
// site's address would make Caddy serve HTTPS there.)
func caddyReplacements(port int, issuer, consumer string) []replacement {
	return []replacement{
		{"\n:8080 {\n", "\n:" + strconv.Itoa(port) + " {\n"},
		{"reverse_proxy issuer:8080 {", "reverse_proxy " + issuer + " {"},
		{"forward_auth issuer:8080 {", "forward_auth " + issuer + " {"},
		{"reverse_proxy consumer:8081\n", "reverse_proxy " + consumer + "\n"},
	}
}

// traefikReplacements are traefik/traefik.yml's and traefik/dynamic.yml's
// host-specific strings: the entry point's address and the dynamic file's
// path; the issuer's address (twice) and the consumer's.
func traefikReplacements(listen, dynamic, issuer, consumer string) (static, dyn []replacement) {
	return []replacement{
			{`address: ":8080"`, `address: "` + listen + `"`},
			{"filename: /etc/traefik/dynamic.yml", "filename: " + dynamic},
		}, []replacement{
			{`address: "http://issuer:8080/`, `address: "http://` + issuer + `/`},
			{`url: "http://issuer:8080"`, `url: "http://` + issuer + `"`},
			{`url: "http://consumer:8081"`, `url: "http://` + consumer + `"`},
		}
}

func TestRenderProxyConfs(t *testing.T) {
	static, dyn := traefikReplacements("127.0.0.1:3", "/tmp/d.yml", "127.0.0.1:1", "127.0.0.1:2")
	for _, f := range []struct {
		name string
		rs   []replacement
	}{
		{filepath.Join("caddy", "Caddyfile"), caddyReplacements(3, "127.0.0.1:1", "127.0.0.1:2")},
		{filepath.Join("traefik", "traefik.yml"), static},
		{filepath.Join("traefik", "dynamic.yml"), dyn},
	} {
		conf, err := os.ReadFile(f.name)
		if err != nil {
			t.Fatal(err)
		}
		got := renderConf(t, f.name, string(conf), f.rs...)
		// Undoing the replacements gives the file back: nothing else changed.
		back := got
		for _, r := range f.rs {
			if n := strings.Count(back, r.new); n != 1 {
				t.Fatalf("%s rendered holds %q %d times, want once", f.name, r.new, n)
			}
			back = strings.Replace(back, r.new, r.old, 1)
		}
		if back != string(conf) || got == string(conf) {
			t.Errorf("rendering %s changed more, or less, than its host-specific strings", f.name)
		}
	}
}

// startProcess starts cmd, keeping its output, and stops it at cleanup
// (stop, SIGKILL 10 s later), logging the output as name's if the test
// failed. It returns a channel closed when the process exits, and the output.
func startProcess(tb testing.TB, name string, cmd *exec.Cmd, stop syscall.Signal) (<-chan struct{}, func() string) {
	tb.Helper()
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(stop)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("%s output:\n%s", name, out.String())
		}
	})
	return exited, out.String
}

// startProxy runs bin with args in dir (its HOME), and waits until base
// answers GET /.well-known/jwks.json (the issuer's, through it) with 200.
func startProxy(tb testing.TB, name, dir, base, bin string, args ...string) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir}
	exited, output := startProcess(tb, name, cmd, syscall.SIGTERM)
	waitOK(tb, base+"/.well-known/jwks.json", exited, output)
}

// startCaddy runs caddy/Caddyfile in caddy on a free port, in
// front of issuer and consumer (host:port), and returns its URL.
func startCaddy(tb testing.TB, bin, issuer, consumer string) string {
	tb.Helper()
	conf, err := os.ReadFile(filepath.Join("caddy", "Caddyfile"))
	if err != nil {
		tb.Fatal(err)
	}
	port := freePort(tb)
	dir := tb.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	rendered := renderConf(tb, "caddy/Caddyfile", string(conf), caddyReplacements(port, issuer, consumer)...)
	if err := os.WriteFile(file, []byte(rendered), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config", file, "--adapter", "caddyfile").CombinedOutput(); err != nil {
		tb.Fatalf("caddy validate: %v\n%s", err, out)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	startProxy(tb, "caddy", dir, base, bin, "run", "--config", file, "--adapter", "caddyfile")
	return base
}

// startTraefik runs traefik/traefik.yml and traefik/dynamic.yml in traefik
// on a free loopback port, in front of issuer and consumer (host:port), and
// returns its URL.
func startTraefik(tb testing.TB, bin, issuer, consumer string) string {
	tb.Helper()
	dir := tb.TempDir()
	listen := "127.0.0.1:" + strconv.Itoa(freePort(tb))
	static, dyn := traefikReplacements(listen, filepath.Join(dir, "dynamic.yml"), issuer, consumer)
	for _, f := range []struct {
		name string
		rs   []replacement
	}{{"traefik.yml", static}, {"dynamic.yml", dyn}} {
		conf, err := os.ReadFile(filepath.Join("traefik", f.name))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(renderConf(tb, "traefik/"+f.name, string(conf), f.rs...)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	base := "http://" + listen
	startProxy(tb, "traefik", dir, base, bin, "--configFile="+filepath.Join(dir, "traefik.yml"))
	return base
}

// TestGatewayDocsShowShippedFiles checks that docs/api.md's Gateways
// section shows the Caddy and Traefik files as they are shipped (and run
// by TestGatewaysForwardAuth), each in a code block of its list item.
func TestGatewayDocsShowShippedFiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"caddy/Caddyfile", "traefik/traefik.yml", "traefik/dynamic.yml"} {
		b, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		var indented strings.Builder
		for l := range strings.Lines(string(b)) {
			if strings.TrimSpace(l) != "" {
				indented.WriteString("  ")
			}
			indented.WriteString(l)
		}
		if !strings.Contains(string(doc), "\n"+indented.String()+"  ```\n") {
			t.Errorf("docs/api.md does not show docker/%s as it is, in a code block", name)
		}
	}
}
