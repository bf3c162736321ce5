package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// TestDashboardsUpToDate fails while a file of dashboards/ differs from
// what the builders make, or dashboards/ holds a file they do not: run
// `go run .` in deploy/grafana and commit the result.
func TestDashboardsUpToDate(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("dashboards", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join("dashboards", name))
		if err != nil {
			t.Errorf("%v: run `go run .` in deploy/grafana", err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("dashboards/%s differs from what the builders make: run `go run .` in deploy/grafana", name)
		}
	}
	for _, name := range names {
		if _, ok := want[name]; !ok {
			t.Errorf("dashboards/%s is no dashboard of the builders: remove it", name)
		}
	}
}

// readDashboard decodes a committed dashboard into Grafana's own types
// (the SDK's decoding, with the panel and query types registered) and
// writes it back: it must come out byte for byte, so that every member is
// one the types know (an unknown or misspelt one is dropped on the way)
// with a value of its type (a wrong one fails to decode). Every panel's
// type must be one Grafana has, and Validate checks what the schema
// requires. (The SDK's UnmarshalJSONStrict would say this at once, but in
// v0.0.22 it returns its empty list of errors as an error, and so drops
// every panel without a word.)
func readDashboard(data []byte) (*dashboard.Dashboard, error) {
	plugins.RegisterDefaultPlugins()
	d := &dashboard.Dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, err
	}
	again, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(append(again, '\n'), data) {
		return nil, fmt.Errorf("not Grafana's dashboard schema: members unknown to its types, or values not of theirs (%d bytes read, %d written back)", len(data), len(again)+1)
	}
	for _, p := range d.Panels {
		if p.Panel != nil {
			if _, ok := cog.ConfigForPanelcfgVariant(p.Panel.Type); !ok {
				return nil, fmt.Errorf("panel type %q is none of Grafana's", p.Panel.Type)
			}
		}
	}
	return d, d.Validate()
}

// TestDashboardsAreGrafanas decodes every committed dashboard with the SDK
// strictly and checks what the builders promise: unique UIDs and panel
// IDs, panels within the 24-column grid, and every panel querying the
// dashboard's Prometheus data source variable with at least one
// expression that selects the dashboard's job.
func TestDashboardsAreGrafanas(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards (%v)", err)
	}
	uids := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := readDashboard(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if d.Uid == nil || *d.Uid == "" || uids[*d.Uid] != "" {
			t.Errorf("%s: uid %v missing or also %s's", f, d.Uid, uids[*d.Uid])
		} else {
			uids[*d.Uid] = f
		}
		ids := map[uint32]bool{}
		for _, p := range d.Panels {
			if p.RowPanel != nil {
				ids[p.RowPanel.Id] = true
				continue
			}
			panel := p.Panel
			if panel == nil || panel.Id == nil || ids[*panel.Id] {
				t.Errorf("%s: a panel without an ID, or with another's", f)
				continue
			}
			ids[*panel.Id] = true
			title := ""
			if panel.Title != nil {
				title = *panel.Title
			}
			if g := panel.GridPos; g == nil || g.X+g.W > 24 || g.W == 0 || g.H == 0 {
				t.Errorf("%s: panel %q: grid position %+v outside the 24 columns", f, title, g)
			}
			if panel.Datasource == nil || panel.Datasource.Uid == nil || *panel.Datasource.Uid != "${datasource}" {
				t.Errorf("%s: panel %q does not use the datasource variable", f, title)
			}
			if len(panel.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, title)
			}
			for _, target := range panel.Targets {
				q, ok := target.(*prometheus.Dataquery)
				if !ok {
					t.Errorf("%s: panel %q: a query of type %T, want Prometheus's", f, title, target)
					continue
				}
				if !strings.Contains(q.Expr, `job="$job"`) && !strings.Contains(q.Expr, "snowtoken:") {
					t.Errorf("%s: panel %q: %s selects no job=\"$job\"", f, title, q.Expr)
				}
			}
		}
	}
	if want := len(dashboards); len(uids) != want {
		t.Errorf("%d dashboards decoded, want %d", len(uids), want)
	}
}

// TestMalformedPanelFails: readDashboard is what catches a malformed
// panel: a misspelt member of a panel or of its field config, a query's
// expression of the wrong type, and a panel type Grafana does not have are
// each refused.
func TestMalformedPanelFails(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("dashboards", "snowtoken-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readDashboard(data); err != nil {
		t.Fatalf("the committed dashboard: %v", err)
	}
	for name, change := range map[string]func(panel map[string]any){
		"misspelt member": func(p map[string]any) { p["gridPosition"] = p["gridPos"]; delete(p, "gridPos") },
		"expr a number":   func(p map[string]any) { p["targets"].([]any)[0].(map[string]any)["expr"] = 42 },
		"misspelt unit member": func(p map[string]any) {
			p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["units"] = "s"
		},
		"no such panel type": func(p map[string]any) { p["type"] = "timeseriez" },
	} {
		var d map[string]any
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		panels := d["panels"].([]any)
		i := slices.IndexFunc(panels, func(p any) bool { return p.(map[string]any)["type"] == "timeseries" })
		change(panels[i].(map[string]any))
		bad, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readDashboard(bad); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}
