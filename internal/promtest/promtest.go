// Package promtest runs snowtoken's monitoring against a real Prometheus in
// tests: its HTTP API, the rules file
// (deploy/prometheus/snowtoken-rules.yml), the committed Grafana dashboards
// (deploy/grafana/dashboards), and CheckQueries, which runs every query of
// both and checks every metric they name. e2e/observability_test.go uses it
// on a Prometheus of its own, e2e/docker/stack_test.go on the Compose
// stack's.
package promtest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// Server is a Prometheus, by its base URL (http://host:port).
type Server struct {
	URL string
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// Sample is one series of an instant query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs expr through the HTTP API (/api/v1/query) now; a scalar
// answer has no series.
func (s Server) Query(expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get("/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, nil
	}
	var res []Sample
	return res, json.Unmarshal(data.Result, &res)
}

// LabelValues is Grafana's label_values(selector, label), through the API.
func (s Server) LabelValues(selector, label string) ([]string, error) {
	var values []string
	return values, s.get("/api/v1/label/"+label+"/values?match[]="+url.QueryEscape(selector), &values)
}

// get reads an API answer's data into data, or its error.
func (s Server) get(path string, data any) error {
	resp, err := httpClient.Get(s.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var ans struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("%s: %d %.200s: %w", path, resp.StatusCode, body, err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("%s: %s", ans.ErrorType, ans.Error)
	}
	return json.Unmarshal(ans.Data, data)
}

// WaitFor polls ok every 250 ms until it holds, or fails tb after limit.
func (s Server) WaitFor(tb testing.TB, what string, limit time.Duration, ok func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("prometheus at %s: not %s within %v", s.URL, what, limit)
		}
	}
}

// Rule is one rule of a Prometheus rules file.
type Rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// RuleGroups is a Prometheus rules file.
type RuleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rules returns every rule of every group.
func (g RuleGroups) Rules() []Rule {
	var all []Rule
	for _, grp := range g.Groups {
		all = append(all, grp.Rules...)
	}
	return all
}

// Alert returns the expression of the alert named name, or "".
func (g RuleGroups) Alert(name string) string {
	for _, r := range g.Rules() {
		if r.Alert == name {
			return r.Expr
		}
	}
	return ""
}

// ReadRules reads a rules file strictly: an unknown member fails.
func ReadRules(path string) (RuleGroups, error) {
	var g RuleGroups
	data, err := os.ReadFile(path)
	if err != nil {
		return g, err
	}
	if err := yaml.UnmarshalWithOptions(data, &g, yaml.Strict()); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	if len(g.Rules()) == 0 {
		return g, fmt.Errorf("%s holds no rule", path)
	}
	return g, nil
}

// DashboardQueries returns every query of the dashboards in dir: the
// panels' PromQL by "dashboard / panel [i]", and the variables' queries by
// "dashboard / $name".
func DashboardQueries(dir string) (panels, variables map[string]string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no dashboards in %s (%v)", dir, err)
	}
	type panel struct {
		Title   string
		Panels  json.RawMessage // a collapsed row's
		Targets []struct{ Expr string }
	}
	panels, variables = map[string]string{}, map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		var d struct {
			Title      string
			Panels     []panel
			Templating struct {
				List []struct{ Name, Type, Query string }
			}
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		all := d.Panels
		for _, p := range d.Panels {
			var inner []panel
			if len(p.Panels) > 0 && json.Unmarshal(p.Panels, &inner) == nil {
				all = append(all, inner...)
			}
		}
		for _, p := range all {
			for i, tg := range p.Targets {
				panels[fmt.Sprintf("%s / %s [%d]", d.Title, p.Title, i)] = tg.Expr
			}
		}
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				variables[d.Title+" / $"+v.Name] = v.Query
			}
		}
	}
	return panels, variables, nil
}

// grafanaVars sets a panel query's variables as Grafana would for job,
// every replica, a 5-minute range and a rate interval of a minute.
func grafanaVars(job string) *strings.Replacer {
	return strings.NewReplacer(`$job`, job, `$instance`, `.*`, `$__rate_interval`, `1m`, `$__range`, `5m`)
}

var labelValuesQuery = regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)

// CheckQueries runs, in s, every rule of rules and every panel query of
// the dashboards in dashboardsDir (their variables set for job): each must
// answer without error, every metric it names must be exported (exported
// says; a recorded name must be a rule of rules), and, when withData, every
// panel query and recording rule must give a series. The dashboards'
// label_values variables must find job, and instance for the replica
// variable. It returns the alerts whose expression holds now.
func CheckQueries(tb testing.TB, s Server, rules RuleGroups, dashboardsDir, job, instance string, exported func(string) bool, withData bool) (holding []string) {
	tb.Helper()
	recorded := map[string]bool{}
	queries := map[string]string{}
	for _, r := range rules.Rules() {
		if r.Record != "" {
			recorded[r.Record] = true
			queries["rule "+r.Record] = r.Expr
		} else {
			queries["alert "+r.Alert] = r.Expr
		}
	}
	panels, variables, err := DashboardQueries(dashboardsDir)
	if err != nil {
		tb.Fatal(err)
	}
	vars := grafanaVars(job)
	for name, expr := range panels {
		queries["panel "+name] = vars.Replace(expr)
	}
	for _, name := range slices.Sorted(maps.Keys(queries)) {
		expr := queries[name]
		res, err := s.Query(expr)
		if err != nil {
			tb.Errorf("%s: %s: %v", name, expr, err)
			continue
		}
		alert := strings.HasPrefix(name, "alert ")
		switch {
		case alert && len(res) > 0:
			holding = append(holding, strings.TrimPrefix(name, "alert "))
		case !alert && withData && len(res) == 0:
			tb.Errorf("%s: %s: no series", name, expr)
		}
		names := MetricNames(expr)
		if len(names) == 0 {
			tb.Errorf("%s: %s names no metric", name, expr)
		}
		for _, n := range names {
			if strings.Contains(n, ":") && !recorded[n] {
				tb.Errorf("%s: %s is no recording rule of the rules file", name, n)
			}
			if !strings.Contains(n, ":") && !exported(n) {
				tb.Errorf("%s: %s is not in the issuer's /metrics", name, n)
			}
		}
	}
	tb.Logf("%d queries ran (%d panels, %d rules); alerts whose expression holds now: %q", len(queries), len(panels), len(rules.Rules()), holding)
	for name, q := range variables {
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			tb.Errorf("%s: %q is not label_values(selector, label)", name, q)
			continue
		}
		values, err := s.LabelValues(vars.Replace(m[1]), m[2])
		want := map[string]string{"job": job, "instance": instance}[m[2]]
		if err != nil || len(values) == 0 || want != "" && !slices.Contains(values, want) {
			tb.Errorf("%s: %s = %v (%v), want %s among them", name, q, values, err, want)
		}
	}
	return holding
}

// MetricNames returns the metric names an expression selects: what is left
// once string literals, label matchers, ranges, and the label lists of by,
// without, on, ignoring, group_left and group_right are taken out, and
// neither a function or aggregation (followed by a parenthesis), a
// keyword, nor a number.
func MetricNames(expr string) []string {
	for _, re := range promqlStrip {
		expr = re.ReplaceAllString(expr, " ")
	}
	seen := map[string]bool{}
	var names []string
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(expr, -1) {
		name := expr[m[2]:m[3]]
		if promqlKeywords[strings.ToLower(name)] || strings.HasPrefix(strings.TrimSpace(expr[m[3]:]), "(") || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	return names
}

var (
	promqlStrip = []*regexp.Regexp{
		regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`"),
		regexp.MustCompile(`\{[^}]*\}`),
		regexp.MustCompile(`\[[^\]]*\]`),
		regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
		regexp.MustCompile(`\boffset\s+-?[0-9a-z]+`),
	}
	// An identifier not inside another word or number (1e3, 0x1f).
	promqlIdent    = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "offset": true, "inf": true, "nan": true}
)
