package cmd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpExitsZero: -h, help and every subcommand's -h print the usage on
// stdout, nothing on stderr, and exit 0.
func TestHelpExitsZero(t *testing.T) {
	cmds := [][]string{
		{"-h"}, {"-help"}, {"--help"}, {"help"}, {"help", "help"},
		{"serve", "-h"}, {"version", "-h"}, {"init", "-h"}, {"healthcheck", "-h"},
		{"id", "-h"}, {"id", "decode", "-h"}, {"keys", "new", "-h"},
		{"client", "-h"}, {"client", "help"}, {"help", "client", "rotate-secret"},
	}
	for _, s := range clientSubs {
		cmds = append(cmds, []string{"client", s.name, "-h"}, []string{"client", s.name, "--help"})
	}
	for _, args := range cmds {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := ExitCode(Run(t.Context(), args, nil, &stdout), &stderr)
			if code != 0 || stderr.Len() > 0 {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
			}
			if !strings.Contains(strings.ToLower(stdout.String()), "usage") {
				t.Errorf("stdout %q, want the usage", stdout.String())
			}
		})
	}
}

// TestSubcommandHelpNamesItsFlags: a client subcommand's -h shows its own
// synopsis and every flag it takes.
func TestSubcommandHelpNamesItsFlags(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"client", "rotate-secret", "-h"}, nil, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("client rotate-secret -h: %v", err)
	}
	for _, want := range []string{"usage: snowtoken client rotate-secret -file F -id ID", "-file", "-id", "-old-valid-for", "(default 24h0m0s)", "-secret-valid-for"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("client rotate-secret -h does not show %q:\n%s", want, out.String())
		}
	}
}

// TestUsageErrorsExitTwo: an unknown command, subcommand or flag, and a
// missing argument, print one line naming the mistake and a hint where the
// usage is, on stderr, and exit 2.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, hint string
	}{
		{[]string{"frobnicate"}, `snowtoken: unknown command "frobnicate"`, "snowtoken -h"},
		{[]string{"-x"}, "snowtoken: unknown flag -x", "snowtoken -h"},
		{[]string{"serve", "now"}, `snowtoken: serve: unexpected argument "now"`, "snowtoken serve -h"},
		{[]string{"version", "-short"}, "snowtoken: version: flag provided but not defined: -short", "snowtoken version -h"},
		{[]string{"client"}, "snowtoken: client: missing subcommand: one of new, rotate-secret,", "snowtoken client -h"},
		{[]string{"client", "rotate"}, `snowtoken: client: unknown subcommand "rotate"`, "snowtoken client -h"},
		{[]string{"client", "new"}, "snowtoken: client new: -id is required", "snowtoken client new -h"},
		{[]string{"client", "new", "-id", "a", "-bogus"}, "snowtoken: client new: flag provided but not defined: -bogus", "snowtoken client new -h"},
		{[]string{"client", "new", "-id", "a", "extra"}, `snowtoken: client new: unexpected argument "extra"`, "snowtoken client new -h"},
		{[]string{"client", "new", "-id", "a", "-max-ttl", "soon"}, `snowtoken: client new: invalid value "soon" for flag -max-ttl`, "snowtoken client new -h"},
		{[]string{"client", "rotate-secret", "-id", "a"}, "snowtoken: client rotate-secret: -file is required", "snowtoken client rotate-secret -h"},
		{[]string{"client", "rotate-secret", "-file", "f"}, "snowtoken: client rotate-secret: -id is required", "snowtoken client rotate-secret -h"},
		{[]string{"client", "list"}, "snowtoken: client list: -file is required", "snowtoken client list -h"},
		{[]string{"client", "disable", "-file", "f"}, "snowtoken: client disable: -id is required", "snowtoken client disable -h"},
		{[]string{"client", "enable", "-file", "f", "-id", "a", "-revoke"}, "snowtoken: client enable: flag provided but not defined: -revoke", "snowtoken client enable -h"},
		{[]string{"client", "remove", "-id", "a"}, "snowtoken: client remove: -file is required", "snowtoken client remove -h"},
		{[]string{"client", "revoke"}, "snowtoken: client revoke: -id is required", "snowtoken client revoke -h"},
		{[]string{"id"}, "snowtoken: id: missing subcommand: decode", "snowtoken id -h"},
		{[]string{"id", "decode"}, "snowtoken: id decode: missing argument", "snowtoken id decode -h"},
		{[]string{"id", "decode", "1", "2"}, `snowtoken: id decode: unexpected argument "2"`, "snowtoken id decode -h"},
		{[]string{"init"}, "snowtoken: init: -dir is required", "snowtoken init -h"},
		{[]string{"healthcheck", "-now"}, "snowtoken: healthcheck: flag provided but not defined: -now", "snowtoken healthcheck -h"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := ExitCode(Run(t.Context(), tc.args, nil, &stdout), &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], tc.want) || lines[1] != "run '"+tc.hint+"' for usage" {
				t.Errorf("stderr:\n%s\nwant a line starting %q, then run '%s' for usage", stderr.String(), tc.want, tc.hint)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestOtherErrorsExitOne: a failure that is not the command line's exits 1
// with one line.
func TestOtherErrorsExitOne(t *testing.T) {
	var stderr bytes.Buffer
	if code := ExitCode(errors.New("redis: down"), &stderr); code != 1 || stderr.String() != "snowtoken: redis: down\n" {
		t.Errorf("exit %d, stderr %q; want 1 and the error", code, stderr.String())
	}
}

// TestVersionLine: the module version, the revision, whether the tree was
// modified, the commit time and the Go version, from the build information.
func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "7e2de2a6fe498dc95488e11b222dd152d68d259d"},
			{Key: "vcs.time", Value: "2026-11-23T06:41:37Z"}, {Key: "vcs.modified", Value: "true"},
		}}, "snowtoken v1.4.0 (revision 7e2de2a6fe498dc95488e11b222dd152d68d259d, modified, 2026-11-23T06:41:37Z, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261123064137-7e2de2a6fe49"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "7e2de2a6fe498dc95488e11b222dd152d68d259d"}, {Key: "vcs.modified", Value: "false"},
		}}, "snowtoken v0.0.0-20261123064137-7e2de2a6fe49 (revision 7e2de2a6fe498dc95488e11b222dd152d68d259d, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "snowtoken (devel) (revision unknown, go1.26.8)"},
		{&debug.BuildInfo{}, "snowtoken unknown (revision unknown)"},
		{nil, "snowtoken unknown (no build information)"},
	} {
		if got := versionLine(tc.info); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var out bytes.Buffer
		if err := Run(t.Context(), args, nil, &out); err != nil || !strings.HasPrefix(out.String(), "snowtoken ") || !strings.Contains(out.String(), "(revision ") {
			t.Errorf("%s: %q, %v; want the version line", args[0], out.String(), err)
		}
	}
}

// TestReportReaders: after writing, a command names whom the mode lets read
// the file, and warns when only root can: the issuer's user, which the CLI
// cannot know, is then surely shut out unless it is root.
func TestReportReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	owner, root := fmt.Sprintf("uid %d", os.Geteuid()), os.Geteuid() == 0
	if root {
		owner = "root"
	}
	group := fmt.Sprintf("group %d", os.Getegid())
	for _, tc := range []struct {
		mode    os.FileMode
		readers string
		warn    bool
	}{
		{0o600, owner, root},
		{0o640, owner + " and " + group, false},
		{0o644, "every user", false},
		{0o000, "root only", true},
	} {
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		reportReaders(&out, path, false)
		if want := fmt.Sprintf("mode %04o: readable by %s, as before", uint32(tc.mode), tc.readers); !strings.Contains(out.String(), want) {
			t.Errorf("mode %04o: %q, want %q", uint32(tc.mode), out.String(), want)
		}
		if got := strings.Contains(out.String(), "warning: only root can read"); got != tc.warn {
			t.Errorf("mode %04o: %q: warned %t, want %t", uint32(tc.mode), out.String(), got, tc.warn)
		}
	}
}
