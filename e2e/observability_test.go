package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/promtest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// The observability bundle against the real thing: the metrics
// reference against a running replica's /metrics, and a real Prometheus
// (Debian's) scraping a real replica, through which every dashboard query
// and every rule runs, and in which the alerts of a refused reload, a
// stopped heartbeat writer and a frozen Redis become true.

const (
	metricsDoc    = "../docs/metrics.md"
	dashboardsDir = "../deploy/grafana/dashboards"
)

// startObsReplica starts one production replica whose /metrics has every
// series the metrics reference lists: on a redis-server of its own with a
// maxmemory (INFO's memory), returned beside it, a keys directory with a
// next key (the key times), a client whose secret expires, and requests of
// every kind sent.
func startObsReplica(t *testing.T) (*issuer, *redistest.Server) {
	t.Helper()
	s := redistest.NewConfiguredServer(t, "--maxmemory", "256mb", "--maxmemory-policy", "noeviction")
	p := startIssuer(t, issuerOpts{ip: "127.0.0.37", redis: s.URL(), prepare: func(bin string, creds fleetCreds) []string {
		fleetCommand(t, bin, "client", "new", "-file", creds.clientsPath, "-id", "expiring", "-scopes", "read", "-secret-valid-for", "720h")
		// A client whose keys are fetched: its snowtoken_client_keys_unavailable_total starts at 0.
		fleetCommand(t, bin, "client", "new", "-file", creds.clientsPath, "-id", "keyed", "-scopes", "read", "-jwks-uri", "https://keys.example.test/jwks.json")
		keys := filepath.Join(t.TempDir(), "keys")
		fleetCommand(t, bin, "keys", "rotate", "-dir", keys, "-adopt", creds.keyPath)
		fleetCommand(t, bin, "keys", "rotate", "-dir", keys) // a next key
		// The ext_authz listener, whose series exist only with it.
		return []string{"SNOWTOKEN_SIGNING_KEYS", keys, "SNOWTOKEN_EXTAUTHZ_ADDR", fleetAddr(t, "127.0.0.37")}
	}})
	creds := p.creds

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
	return p, s
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

// scrapeExposition reads GET /metrics of p.
func scrapeExposition(t *testing.T, p *issuer) exposition {
	t.Helper()
	status, _, body := fleetCall(t, http.MethodGet, p.metricsURL(t), nil, "", nil)
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
	p, _ := startObsReplica(t)
	e := scrapeExposition(t, p)
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

// startPrometheus runs Debian's prometheus on loopback with the rules file,
// scraping targets every 2 s (each scrape may wait up to 1 s for Redis's
// INFO: snowtoken_redis_up), and waits until it has scraped them.
func startPrometheus(t *testing.T, targets ...string) promtest.Server {
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
	spawnProc(t, "prometheus", nil, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	ps := promtest.Server{URL: "http://" + addr}
	ps.WaitFor(t, "ready and scraped every target", time.Minute, func() bool {
		res, err := ps.Query(`up{job="snowtoken"} == 1`)
		return err == nil && len(res) == len(targets)
	})
	return ps
}

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
	p, redis := startObsReplica(t)
	ps := startPrometheus(t, p.metricsAddr)
	e := scrapeExposition(t, p)
	rules := readRules(t)
	// Twice the 1m of the rates: every rate has two samples or more, and
	// the recording rules have been evaluated.
	ps.WaitFor(t, "evaluating the recording rules", time.Minute, func() bool {
		res, err := ps.Query(`count(snowtoken:issue_errors:ratio_rate5m)`)
		return err == nil && len(res) == 1
	})
	// The replica has every series: a panel or a recorded ratio that shows
	// nothing here shows nothing anywhere.
	if holding := promtest.CheckQueries(t, ps, rules, dashboardsDir, "snowtoken", p.metricsAddr,
		func(name string) bool { return e.samples[name] }, true); len(holding) > 0 {
		t.Logf("on a healthy replica, the expressions of %v hold", holding)
	}

	// Each fault makes its alert's expression true: false before it.
	holds := func(t *testing.T, alert string) bool {
		t.Helper()
		res, err := ps.Query(rules.Alert(alert))
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		return len(res) > 0
	}
	t.Run("stopped heartbeat writer", func(t *testing.T) {
		// Another writer holds the writer key and never beats: the
		// replica's writer leaves it alone, and no heartbeat comes.
		rdb := redis.Client()
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
		ps.WaitFor(t, "firing SnowtokenRevocationStale's expression", time.Minute, func() bool { return holds(t, "SnowtokenRevocationStale") })
	})
	t.Run("refused reload", func(t *testing.T) {
		if holds(t, "SnowtokenReloadRefused") {
			t.Fatal("SnowtokenReloadRefused's expression is true before the reload")
		}
		if err := os.WriteFile(p.creds.clientsPath, []byte(`{"clients": [`), 0o600); err != nil {
			t.Fatal(err)
		}
		ps.WaitFor(t, "firing SnowtokenReloadRefused's expression", time.Minute, func() bool { return holds(t, "SnowtokenReloadRefused") })
	})
	t.Run("frozen redis", func(t *testing.T) {
		if holds(t, "SnowtokenRedisUnreachable") {
			t.Fatal("SnowtokenRedisUnreachable's expression is true before Redis froze")
		}
		redis.Signal(syscall.SIGSTOP)
		defer redis.Signal(syscall.SIGCONT)
		ps.WaitFor(t, "firing SnowtokenRedisUnreachable's expression", time.Minute, func() bool { return holds(t, "SnowtokenRedisUnreachable") })
	})
}
