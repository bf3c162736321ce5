package cmd

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionCmd prints the module version and the VCS revision the binary was
// built from.
func versionCmd(args []string, stdout io.Writer) error {
	f := newCmdFlags("version", "", "Print the module version and the VCS revision snowtoken was built from.", stdout)
	if err := f.parse(args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(info))
	return nil
}

// versionLine describes a build: "snowtoken v1.2.3 (revision 0123abc…,
// modified, 2026-11-23T06:00:00Z, go1.26.8)". Whatever the build does not
// record (go run and go test record no revision) is left out or "unknown".
func versionLine(info *debug.BuildInfo) string {
	if info == nil {
		return "snowtoken unknown (no build information)"
	}
	version := info.Main.Version
	if version == "" {
		version = "unknown"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var about []string
	if rev := settings["vcs.revision"]; rev != "" {
		about = append(about, "revision "+rev)
	} else {
		about = append(about, "revision unknown")
	}
	if settings["vcs.modified"] == "true" {
		about = append(about, "modified")
	}
	if t := settings["vcs.time"]; t != "" {
		about = append(about, t)
	}
	if info.GoVersion != "" {
		about = append(about, info.GoVersion)
	}
	return fmt.Sprintf("snowtoken %s (%s)", version, strings.Join(about, ", "))
}
