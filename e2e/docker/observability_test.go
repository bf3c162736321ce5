package docker

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/goccy/go-yaml"
)

// The Compose profile "observability": Prometheus and Grafana
// beside the stack, with the rules and dashboards provisioned. Checked here
// as files; the stack test runs the Prometheus (a stand-in image from
// Debian's binary) against the running stack. No Grafana can run on the
// test machine (no binary, no registry): its service is checked here only.

const observabilityProfile = "observability"

// envRequirePrometheus makes a missing promtool a failure instead of a
// skip; CI sets it (as for e2e's tests of the rules).
const envRequirePrometheus = "SNOWTOKEN_TEST_REQUIRE_PROMETHEUS"

// flagValue returns the value of --name=VALUE in a command, or "".
func flagValue(command []string, name string) string {
	for _, a := range command {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// TestComposeObservabilityProfile: the profile adds prometheus and grafana
// and nothing else, and only with it; both are pinned, limited, health
// checked, hardened as far as each allows, published on loopback alone;
// Prometheus reaches the issuers' metrics listeners and no Redis, Grafana
// reaches Prometheus and nothing else of the stack; and each mounts what
// the other files name: Prometheus's config and the rules file where the
// config loads it, Grafana's provisioning and the dashboards where the
// provider reads them, a data source that is the prometheus service.
func TestComposeObservabilityProfile(t *testing.T) {
	base := loadCompose(t, true)
	p := loadCompose(t, true, observabilityProfile)
	added := slices.DeleteFunc(slices.Sorted(maps.Keys(p.Services)), func(n string) bool { _, ok := base.Services[n]; return ok })
	if !slices.Equal(added, []string{"grafana", "prometheus"}) {
		t.Fatalf("--profile %s adds %v, want grafana and prometheus", observabilityProfile, added)
	}
	for _, name := range added {
		s := service(t, p, name)
		if !slices.Equal(s.Profiles, []string{observabilityProfile}) {
			t.Errorf("%s profiles %v, want [%s] alone", name, s.Profiles, observabilityProfile)
		}
		if !pinnedImage.MatchString(s.Image) {
			t.Errorf("%s image %q, want an exact version", name, s.Image)
		}
		if l := s.Deploy; l == nil || l.Resources.Limits == nil || l.Resources.Limits.NanoCPUs.Value() <= 0 || l.Resources.Limits.MemoryBytes <= 0 {
			t.Errorf("%s has no CPU and memory limits", name)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("%s has no health check", name)
		}
		if !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s cap_drop %v security_opt %v, want ALL and no-new-privileges", name, s.CapDrop, s.SecurityOpt)
		}
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %+v beyond loopback", name, port)
			}
		}
		if _, ok := s.Networks["data"]; ok {
			t.Errorf("%s is on the data network, with Redis", name)
		}
	}
	prom, graf, issuer := service(t, p, "prometheus"), service(t, p, "grafana"), service(t, p, "issuer")
	if !prom.ReadOnly {
		t.Error("prometheus has a writable root: it writes its data volume alone")
	}
	shares := func(a, b types.ServiceConfig) bool {
		return slices.ContainsFunc(slices.Collect(maps.Keys(a.Networks)), func(n string) bool { _, ok := b.Networks[n]; return ok })
	}
	if !shares(prom, issuer) {
		t.Error("prometheus shares no network with the issuers: it cannot scrape them")
	}
	if !shares(graf, prom) {
		t.Error("grafana shares no network with prometheus")
	}
	for _, other := range []string{"issuer", "redis", "nginx", "consumer", "consumer-dpop"} {
		if shares(graf, service(t, p, other)) {
			t.Errorf("grafana shares a network with %s", other)
		}
	}

	// Prometheus: its config and the rules file, where the config says.
	cfgPath := flagValue(prom.Command, "config.file")
	cfgMount := volume(t, prom, cfgPath)
	if want, _ := filepath.Abs(filepath.Join("prometheus", "prometheus.yml")); cfgMount.Source != want || !cfgMount.ReadOnly {
		t.Errorf("prometheus config %s from %s (read-only %v), want %s read-only", cfgPath, cfgMount.Source, cfgMount.ReadOnly, want)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	data, err := os.ReadFile(cfgMount.Source)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	rulesHost, _ := filepath.Abs(filepath.Join("..", "deploy", "prometheus", "snowtoken-rules.yml"))
	if len(cfg.RuleFiles) != 1 || volume(t, prom, cfg.RuleFiles[0]).Source != rulesHost {
		t.Errorf("prometheus.yml rule_files %v: want the one mounted from %s", cfg.RuleFiles, rulesHost)
	}
	if v := volume(t, prom, flagValue(prom.Command, "storage.tsdb.path")); v.Type != types.VolumeTypeVolume {
		t.Errorf("prometheus's storage %s is a %s, want a named volume", v.Target, v.Type)
	}
	_, metricsPort, err := net.SplitHostPort(env(t, issuer)["SNOWTOKEN_METRICS_ADDR"])
	if err != nil {
		t.Fatalf("the issuer's SNOWTOKEN_METRICS_ADDR: %v", err)
	}
	if len(cfg.ScrapeConfigs) != 1 || len(cfg.ScrapeConfigs[0].DNSSDConfigs) != 1 ||
		!slices.Equal(cfg.ScrapeConfigs[0].DNSSDConfigs[0].Names, []string{"issuer"}) ||
		cfg.ScrapeConfigs[0].DNSSDConfigs[0].Type != "A" || metricsPort != strconv.Itoa(cfg.ScrapeConfigs[0].DNSSDConfigs[0].Port) {
		t.Errorf("prometheus.yml scrapes %+v: want every replica of the issuer service by DNS (A) on its metrics port %s", cfg.ScrapeConfigs, metricsPort)
	}
	// promtool checks the config with the rules file it loads.
	if promtool, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv(envRequirePrometheus) == "1" {
			t.Errorf("promtool is not on PATH, and %s=1", envRequirePrometheus)
		}
	} else {
		dir := t.TempDir()
		local := strings.ReplaceAll(string(data), cfg.RuleFiles[0], rulesHost)
		if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(local), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput(); err != nil {
			t.Errorf("promtool check config prometheus/prometheus.yml: %v\n%s", err, out)
		}
	}

	// Grafana: the provisioning, the dashboards where the provider reads
	// them, and a data source that is the prometheus service.
	prov := volume(t, graf, "/etc/grafana/provisioning")
	if want, _ := filepath.Abs(filepath.Join("..", "deploy", "grafana", "provisioning")); prov.Source != want || !prov.ReadOnly {
		t.Errorf("grafana provisioning from %s (read-only %v), want %s read-only", prov.Source, prov.ReadOnly, want)
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov.Source, "dashboards", "snowtoken.yml"), &provider)
	if len(provider.Providers) != 1 {
		t.Fatalf("provisioning/dashboards/snowtoken.yml: %d providers, want 1", len(provider.Providers))
	}
	dash := volume(t, graf, provider.Providers[0].Options.Path)
	if want, _ := filepath.Abs(filepath.Join("..", "deploy", "grafana", "dashboards")); dash.Source != want || !dash.ReadOnly {
		t.Errorf("grafana dashboards at %s from %s, want %s read-only", dash.Target, dash.Source, want)
	}
	var sources struct {
		Datasources []struct {
			Type, URL string
			IsDefault bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov.Source, "datasources", "prometheus.yml"), &sources)
	if len(sources.Datasources) != 1 || sources.Datasources[0].Type != "prometheus" || !sources.Datasources[0].IsDefault ||
		sources.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("provisioning/datasources/prometheus.yml: %+v, want the default data source, prometheus at http://prometheus:9090", sources.Datasources)
	}
	if flagValue(prom.Command, "web.listen-address") != "" {
		t.Error("prometheus listens elsewhere than its default :9090, which the data source names")
	}
}

// readYAML reads a provisioning file strictly enough: its YAML must parse.
func readYAML(tb testing.TB, path string, into any) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}
