// Command grafana writes snowtoken's Grafana dashboards, built with
// Grafana's own types (grafana-foundation-sdk), as the JSON files of
// dashboards/ that Grafana provisions (provisioning/, the Compose profile
// "observability") or that an operator imports. Run it from this folder
// after changing a dashboard:
//
//	go run .
//
// The test of this module fails while a committed file differs from what
// the builders make. Every query of every panel runs against a real
// Prometheus scraping a real issuer in e2e/observability_test.go (the root
// module). The module is apart from the issuer's so that the SDK stays out
// of the issuer's go.mod.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := write("dashboards"); err != nil {
		fmt.Fprintln(os.Stderr, "grafana:", err)
		os.Exit(1)
	}
}

// write writes every dashboard as dir/<uid>.json.
func write(dir string) error {
	files, err := render()
	if err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
