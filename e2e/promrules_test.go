package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/snowtoken/snowtoken/internal/promtest"
)

// The Prometheus side of the observability bundle: the rules
// file, its promtool tests, and the docs each alert links. The dashboards
// and a real Prometheus scraping a real issuer are observability_test.go's.

// envRequirePrometheus makes a missing prometheus or promtool a failure
// instead of a skip; CI sets it (Debian's prometheus package has both).
const envRequirePrometheus = "SNOWTOKEN_TEST_REQUIRE_PROMETHEUS"

const (
	rulesFile     = "../deploy/prometheus/snowtoken-rules.yml"
	rulesTestFile = "../deploy/prometheus/snowtoken-rules.test.yml"
	alertsDoc     = "../docs/alerts.md"
	// runbookBase is where every alert's runbook_url points, with the
	// anchor of the alert's section.
	runbookBase = "https://github.com/snowtoken/snowtoken/blob/main/docs/alerts.md#"
)

// prometheusTool returns the path of name (prometheus, promtool), or skips
// the test without it (fails it under envRequirePrometheus).
func prometheusTool(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		why := name + " is not on PATH (Debian: apt-get install prometheus)"
		if os.Getenv(envRequirePrometheus) == "1" {
			tb.Fatalf("%s, and %s=1", why, envRequirePrometheus)
		}
		tb.Skipf("%s (set %s=1 to make this a failure)", why, envRequirePrometheus)
	}
	return bin
}

// readRules reads deploy/prometheus/snowtoken-rules.yml strictly.
func readRules(tb testing.TB) promtest.RuleGroups {
	tb.Helper()
	g, err := promtest.ReadRules(rulesFile)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestPrometheusRules runs promtool on the rules file (check rules, then its
// unit tests, test rules) and checks that the unit tests have, for every
// alert, series that fire it and series that do not.
func TestPrometheusRules(t *testing.T) {
	promtool := prometheusTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", filepath.Base(rulesFile)}, {"test", "rules", filepath.Base(rulesTestFile)}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(rulesFile)}) {
		t.Errorf("%s tests rule_files %v, want %s alone", rulesTestFile, tests.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range readRules(t).Rules() {
		if r.Alert == "" {
			continue
		}
		if !fires[r.Alert] {
			t.Errorf("%s: no series fire %s", rulesTestFile, r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no series leave %s quiet", rulesTestFile, r.Alert)
		}
	}
}

// TestAlertsHaveRunbooks: every alert has a severity (page or ticket), a
// summary and a runbook_url whose anchor is its own section of
// docs/alerts.md; and every section there is an alert's. It checks the
// promise that the docs link each alert to what to do.
func TestAlertsHaveRunbooks(t *testing.T) {
	data, err := os.ReadFile(alertsDoc)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllSubmatch(data, -1) {
		sections[string(m[1])] = true
	}
	alerts := map[string]bool{}
	for _, r := range readRules(t).Rules() {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		severity := r.Labels["severity"]
		if severity != "page" && severity != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, severity)
			continue
		}
		if len(strings.TrimSpace(r.Annotations["summary"])) < 40 {
			t.Errorf("%s: summary %q, want one saying what callers see", r.Alert, r.Annotations["summary"])
		}
		if got, want := r.Annotations["runbook_url"], runbookBase+strings.ToLower(r.Alert); got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !sections[r.Alert] {
			t.Errorf("%s: docs/alerts.md has no section \"## %s\" for its runbook", r.Alert, r.Alert)
			continue
		}
		// The section says what to check and what to do.
		_, body, _ := bytes.Cut(data, []byte("\n## "+r.Alert+"\n"))
		body, _, _ = bytes.Cut(body, []byte("\n## "))
		if opening := "**" + strings.ToUpper(severity[:1]) + severity[1:] + ".**"; !bytes.HasPrefix(bytes.TrimSpace(body), []byte(opening)) {
			t.Errorf("docs/alerts.md: the section of %s does not open with its severity, %s", r.Alert, opening)
		}
		if !bytes.Contains(body, []byte("Check")) {
			t.Errorf("docs/alerts.md: the section of %s says nothing to check", r.Alert)
		}
	}
	for s := range sections {
		if !alerts[s] {
			t.Errorf("docs/alerts.md has a section %q that is no alert of %s", s, rulesFile)
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alert in the rules file: the check reads nothing")
	}
}
