package e2e

import (
	"bufio"
	"context"
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
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// The observability bundle of issue 37 against the real thing: the metrics
// reference against a running replica's /metrics, and a real Prometheus
// (Debian's) scraping a real replica, through which every dashboard query
// and every rule runs, and in which the alerts of a refused reload, a
// stopped heartbeat writer and a frozen Redis become true.

const (
	metricsDoc    = "../docs/metrics.md"
	dashboardsDir = "../deploy/grafana/dashboards"
)

// obsReplica is one production replica whose /metrics has every series the
// metrics reference lists: on a redis-server of its own with a maxmemory
// (INFO's memory), a keys directory with a next key (the key times), a
// client whose secret expires, and requests of every kind sent.
type obsReplica struct {
	p       *fleetProc
	redis   *redistest.Server
	creds   fleetCreds
	metrics string // the metrics listener, host:port
}

func startObsReplica(t *testing.T) *obsReplica {
	t.Helper()
	bin := fleetBinary(t)
	s := redistest.NewConfiguredServer(t, "--maxmemory", "256mb", "--maxmemory-policy", "noeviction")
	creds := newFleetCreds(t, bin)
	fleetCommand(t, bin, "client", "new", "-file", creds.clientsPath, "-id", "expiring", "-scopes", "read", "-secret-valid-for", "720h")
	keys := filepath.Join(t.TempDir(), "keys")
	fleetCommand(t, bin, "keys", "rotate", "-dir", keys, "-adopt", creds.keyPath)
	fleetCommand(t, bin, "keys", "rotate", "-dir", keys) // a next key
	p := startFleetProc(t, bin, "replica", creds.env(map[string]string{"SNOWTOKEN_REDIS_URL": s.URL()},
		fleetAddr(t, "127.0.0.37"), "127.0.0.37", "SNOWTOKEN_SIGNING_KEYS", keys))
	r := &obsReplica{p: p, redis: s, creds: creds, metrics: strings.TrimSuffix(strings.TrimPrefix(p.metricsURL(t), "http://"), "/metrics")}

	tok := p.issue(t, creds.svc, "alice")
	p.mustValidate(t, tok, 37)
	if status := p.revoke(t, creds.svc, tok); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if status, _ := p.validate(t, tok); status != http.StatusUnauthorized {
		t.Fatalf("a revoked token: %d, want 401", status)
	}
	wrong := creds.svc
	wrong.secret += "x"
	if status, _, _, _ := p.tryIssue(t, wrong, ""); status != http.StatusUnauthorized {
		t.Fatalf("a wrong secret: %d, want 401", status)
	}
	return r
}

// exposition is what a /metrics answer exports: each family's type and
// label names (le and quantile left out), and every sample name (a
// histogram's _bucket, _sum and _count).
type exposition struct {
	types   map[string]string
	labels  map[string]map[string]bool
	samples map[string]bool
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)

// scrapeExposition reads GET /metrics of r.
func (r *obsReplica) exposition(t *testing.T) exposition {
	t.Helper()
	status, _, body := fleetCall(t, http.MethodGet, "http://"+r.metrics+"/metrics", nil, "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	e := exposition{types: map[string]string{}, labels: map[string]map[string]bool{}, samples: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			e.types[name], e.labels[name] = typ, map[string]bool{}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		e.samples[name] = true
		family := name
		if _, ok := e.types[family]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(name, suffix); ok && e.types[f] == "histogram" {
					family = f
				}
			}
		}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			for _, m := range labelPair.FindAllStringSubmatch(line[i:strings.LastIndexByte(line, '}')], -1) {
				if m[1] != "le" && m[1] != "quantile" {
					e.labels[family][m[1]] = true
				}
			}
		}
	}
	return e
}

// docRow is a row of a table of docs/metrics.md: a metric, or a family
// of them (name ending in *), its type and its labels.
type docRow struct {
	name, typ string
	labels    []string
}

func readMetricsDoc(t *testing.T) []docRow {
	t.Helper()
	data, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\|\\s*`([a-z_:]+\\*?)`\\s*\\|\\s*([a-z]*)\\s*\\|([^|]*)\\|")
	var rows []docRow
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		r := docRow{name: m[1], typ: m[2]}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				r.labels = append(r.labels, l)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table rows of metrics", metricsDoc)
	}
	return rows
}

// TestMetricsReference checks docs/metrics.md against a running replica's
// /metrics, both ways: every metric it exports is documented with its type
// and labels (go_* and process_* as families), and every metric documented
// is exported. A new metric without its row, or a renamed one, fails it.
func TestMetricsReference(t *testing.T) {
	r := startObsReplica(t)
	e := r.exposition(t)
	rows := readMetricsDoc(t)
	documented := map[string]docRow{}
	var families []string
	for _, row := range rows {
		if prefix, ok := strings.CutSuffix(row.name, "*"); ok {
			families = append(families, prefix)
			if !slices.ContainsFunc(slices.Collect(maps.Keys(e.types)), func(n string) bool { return strings.HasPrefix(n, prefix) }) {
				t.Errorf("docs/metrics.md lists the family %s, which the replica does not export", row.name)
			}
			continue
		}
		documented[row.name] = row
	}
	for name, typ := range e.types {
		if slices.ContainsFunc(families, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		row, ok := documented[name]
		if !ok {
			t.Errorf("%s (%s) is exported but not in docs/metrics.md", name, typ)
			continue
		}
		if row.typ != typ {
			t.Errorf("%s: docs/metrics.md says %s, the replica exports a %s", name, row.typ, typ)
		}
		if got := slices.Sorted(maps.Keys(e.labels[name])); !slices.Equal(got, slices.Sorted(slices.Values(row.labels))) {
			t.Errorf("%s: docs/metrics.md lists labels %v, the replica exports %v", name, row.labels, got)
		}
	}
	for name := range documented {
		if _, ok := e.types[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which the replica does not export", name)
		}
	}
}

// promServer is a prometheus process of the test's own.
type promServer struct {
	url string
}

// startPrometheus runs Debian's prometheus on loopback with the rules file,
// scraping targets every 2 s (each scrape may wait up to 1 s for Redis's
// INFO: snowtoken_redis_up), and waits until it has scraped them.
func startPrometheus(t *testing.T, targets ...string) *promServer {
	t.Helper()
	bin := prometheusTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(targets)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: snowtoken
    static_configs:
      - targets: %s
`, rules, quoted)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fleetAddr(t, "127.0.0.1")
	spawnFleetProc(t, "prometheus", nil, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	ps := &promServer{url: "http://" + addr}
	ps.waitFor(t, "ready and scraped every target", func() bool {
		res, err := ps.query(`up{job="snowtoken"} == 1`)
		return err == nil && len(res) == len(targets)
	})
	return ps
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs expr through the HTTP API (/api/v1/query) now.
func (ps *promServer) query(expr string) ([]promSample, error) {
	resp, err := fleetHTTP.Get(ps.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var ans struct {
		Status, ErrorType, Error string
		Data                     struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("%d %s: %w", resp.StatusCode, body, err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("%s: %s", ans.ErrorType, ans.Error)
	}
	if ans.Data.ResultType != "vector" {
		return nil, nil // a scalar: no series
	}
	var res []promSample
	if err := json.Unmarshal(ans.Data.Result, &res); err != nil {
		return nil, err
	}
	return res, nil
}

// labelValues is Grafana's label_values(selector, label), through the API.
func (ps *promServer) labelValues(selector, label string) ([]string, error) {
	resp, err := fleetHTTP.Get(ps.url + "/api/v1/label/" + label + "/values?match[]=" + url.QueryEscape(selector))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ans struct {
		Status, Error string
		Data          []string
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return nil, err
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("%s", ans.Error)
	}
	return ans.Data, nil
}

// waitFor polls ok every 250 ms until it holds, for up to a minute.
func (ps *promServer) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s: not %s within a minute", ps.url, what)
		}
	}
}

// dashboardQueries returns every query of the committed dashboards, by
// dashboard and panel title: the panels' PromQL and the variables'
// label_values queries.
func dashboardQueries(t *testing.T) (panels map[string]string, variables map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s (%v)", dashboardsDir, err)
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
			t.Fatal(err)
		}
		var d struct {
			Title      string
			Panels     []panel
			Templating struct {
				List []struct{ Name, Type, Query string }
			}
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
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
	return panels, variables
}

// grafanaVars sets a panel query's variables as Grafana would for the
// job snowtoken, every replica, a 5-minute range and 2 s scrapes.
var grafanaVars = strings.NewReplacer(`$job`, `snowtoken`, `$instance`, `.*`, `$__rate_interval`, `1m`, `$__range`, `5m`)

// TestPrometheusScrapesIssuer: a real Prometheus (Debian's) scrapes a real
// replica with the rules file loaded. Every query of every dashboard panel
// and every rule's expression runs without error, every panel query and
// recording rule gives a series (the replica has every metric), every
// metric they name is in the replica's /metrics (and every recorded one is
// a rule of the file), and the dashboards' variables find the job and the
// replica. Then a
// stopped heartbeat writer, a refused reload and a frozen Redis each make
// their alert's expression true in that Prometheus (the for: durations are
// not waited out; promtool's tests cover them), having been false before.
func TestPrometheusScrapesIssuer(t *testing.T) {
	r := startObsReplica(t)
	ps := startPrometheus(t, r.metrics)
	e := r.exposition(t)
	rules := readRules(t)
	recorded := map[string]bool{}
	alerts := map[string]string{}
	queries := map[string]string{}
	for _, rule := range rules.rules() {
		if rule.Record != "" {
			recorded[rule.Record] = true
			queries["rule "+rule.Record] = rule.Expr
		} else {
			alerts[rule.Alert] = rule.Expr
			queries["alert "+rule.Alert] = rule.Expr
		}
	}
	panels, variables := dashboardQueries(t)
	for name, expr := range panels {
		queries["panel "+name] = grafanaVars.Replace(expr)
	}
	// Twice the 1m of the rates: every rate has two samples or more, and
	// the recording rules have been evaluated.
	ps.waitFor(t, "evaluating the recording rules", func() bool {
		res, err := ps.query(`count(snowtoken:issue_errors:ratio_rate5m)`)
		return err == nil && len(res) == 1
	})
	var firing []string
	for _, name := range slices.Sorted(maps.Keys(queries)) {
		expr := queries[name]
		res, err := ps.query(expr)
		if err != nil {
			t.Errorf("%s: %s: %v", name, expr, err)
			continue
		}
		if len(res) == 0 && !strings.HasPrefix(name, "alert ") {
			// The replica has every series: a panel or a recorded
			// ratio that shows nothing here shows nothing anywhere.
			t.Errorf("%s: %s: no series", name, expr)
		}
		if len(res) > 0 && strings.HasPrefix(name, "alert ") {
			firing = append(firing, name)
		}
		names := promqlMetricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %s names no metric", name, expr)
		}
		for _, n := range names {
			if strings.Contains(n, ":") && !recorded[n] {
				t.Errorf("%s: %s is no recording rule of %s", name, n, rulesFile)
			}
			if !strings.Contains(n, ":") && !e.samples[n] {
				t.Errorf("%s: %s is not in the replica's /metrics", name, n)
			}
		}
	}
	t.Logf("%d queries ran (%d panels, %d rules); alerts whose expression holds on a healthy replica: %q", len(queries), len(panels), len(rules.rules()), firing)
	for name, q := range variables {
		m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(q)
		if m == nil {
			t.Errorf("%s: %q is not label_values(selector, label)", name, q)
			continue
		}
		values, err := ps.labelValues(grafanaVars.Replace(m[1]), m[2])
		want := map[string]string{"job": "snowtoken", "instance": r.metrics}[m[2]]
		if err != nil || !slices.Contains(values, want) {
			t.Errorf("%s: %s = %v (%v), want %s among them", name, q, values, err, want)
		}
	}

	// Each fault makes its alert's expression true: false before it.
	holds := func(t *testing.T, alert string) bool {
		t.Helper()
		res, err := ps.query(alerts[alert])
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		return len(res) > 0
	}
	t.Run("stopped heartbeat writer", func(t *testing.T) {
		// Another writer holds the writer key and never beats: the
		// replica's writer leaves it alone, and no heartbeat comes.
		rdb := r.redis.Client()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				rdb.Set(ctx, revlogKey+":writer", "a-stopped-writer", 200*time.Millisecond)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		defer func() { cancel(); <-done }()
		ps.waitFor(t, "firing SnowtokenRevocationStale's expression", func() bool { return holds(t, "SnowtokenRevocationStale") })
	})
	t.Run("refused reload", func(t *testing.T) {
		if holds(t, "SnowtokenReloadRefused") {
			t.Fatal("SnowtokenReloadRefused's expression is true before the reload")
		}
		if err := os.WriteFile(r.creds.clientsPath, []byte(`{"clients": [`), 0o600); err != nil {
			t.Fatal(err)
		}
		ps.waitFor(t, "firing SnowtokenReloadRefused's expression", func() bool { return holds(t, "SnowtokenReloadRefused") })
	})
	t.Run("frozen redis", func(t *testing.T) {
		if holds(t, "SnowtokenRedisUnreachable") {
			t.Fatal("SnowtokenRedisUnreachable's expression is true before Redis froze")
		}
		r.redis.Signal(syscall.SIGSTOP)
		defer r.redis.Signal(syscall.SIGCONT)
		ps.waitFor(t, "firing SnowtokenRedisUnreachable's expression", func() bool { return holds(t, "SnowtokenRedisUnreachable") })
	})
}

// promqlMetricNames returns the metric names an expression selects: what
// is left once string literals, label matchers, ranges, and the label
// lists of by, without, on, ignoring, group_left and group_right are taken
// out, and neither a function or aggregation (followed by a parenthesis),
// a keyword, nor a number.
func promqlMetricNames(expr string) []string {
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

// TestPromQLMetricNames: the extraction the test above relies on.
func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (le) (rate(snowtoken_http_request_duration_seconds_bucket{route="/token",le="0.05"}[5m]))`: {"snowtoken_http_request_duration_seconds_bucket"},
		`snowtoken_redis_memory_used_bytes / (snowtoken_redis_memory_max_bytes > 0) > 0.9`:                 {"snowtoken_redis_memory_used_bytes", "snowtoken_redis_memory_max_bytes"},
		`(time() - a_seconds) > 83 * 86400 and on (job, instance) b{state="next"} == 0`:                    {"a_seconds", "b"},
		`snowtoken:issue_errors:ratio_rate1h > 14.4 * 0.001 or x offset 5m`:                                {"snowtoken:issue_errors:ratio_rate1h", "x"},
		`histogram_quantile(0.99, sum by (le, status) (rate(h_bucket{job="and or"}[1m]))) + 1e3`:           {"h_bucket"},
		`sort(min by (client_id) ((c{job="x"} - time()) / 86400))`:                                         {"c"},
		`{__name__="x"}`: nil,
	} {
		if got := promqlMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("promqlMetricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
