package main

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// dashboards lists the builders of every dashboard, by file name.
var dashboards = []struct {
	file  string
	build func() *board
}{
	{"snowtoken-overview.json", overview},
	{"snowtoken-revocation.json", revocation},
	{"snowtoken-ids-redis.json", idsAndRedis},
	{"snowtoken-configuration.json", configuration},
}

// render builds every dashboard and returns its JSON by file name.
func render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range dashboards {
		built, err := d.build().d.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.file, err)
		}
		data, err := json.MarshalIndent(built, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.file, err)
		}
		out[d.file] = append(data, '\n')
	}
	return out, nil
}

// datasource is every panel's: the dashboard's variable, so that an import
// asks which Prometheus to use.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel selects the series of the dashboard's job and instances (replicas):
// put it first in every selector.
const sel = `job="$job",instance=~"$instance"`

// board is a dashboard under construction: its panels numbered in order.
type board struct {
	d  *dashboard.DashboardBuilder
	id uint32
}

// newBoard starts a dashboard with the variables every one has: the
// Prometheus data source, the job and its instances (all by default).
func newBoard(uid, title, description string) *board {
	d := dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"snowtoken"}).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Readonly().
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("Job").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(snowtoken_http_requests_total, job)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithVariable(dashboard.NewQueryVariableBuilder("instance").Label("Replica").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(snowtoken_http_requests_total{job="$job"}, instance)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).IncludeAll(true).AllValue(".*"))
	return &board{d: d}
}

// query is one target of a panel: a PromQL expression and its legend.
type query struct {
	expr, legend string
}

// targets builds qs as Prometheus queries A, B, ….
func targets(qs []query, instant bool) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		b := prometheus.NewDataqueryBuilder().Datasource(datasource).RefId(string(rune('A' + i))).
			Expr(q.expr).LegendFormat(q.legend)
		if instant {
			b = b.Instant()
		} else {
			b = b.Range()
		}
		out[i] = b
	}
	return out
}

func (b *board) next() uint32 {
	b.id++
	return b.id
}

// row starts a row of panels.
func (b *board) row(title string) {
	b.d.WithRow(dashboard.NewRowBuilder(title).Id(b.next()))
}

// graph adds a time series panel w columns wide (of 24).
func (b *board) graph(title, description, unit string, w uint32, qs ...query) {
	b.d.WithPanel(timeseries.NewPanelBuilder().Id(b.next()).Title(title).Description(description).
		Datasource(datasource).Targets(targets(qs, false)).Unit(unit).Span(w).Height(8).FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true)))
}

// stat adds a panel of single values, w columns wide, with thresholds
// (nil: none) and value mappings (nil: none).
func (b *board) stat(title, description, unit string, w uint32, steps []dashboard.Threshold, mappings []dashboard.ValueMapping, qs ...query) {
	p := stat.NewPanelBuilder().Id(b.next()).Title(title).Description(description).
		Datasource(datasource).Targets(targets(qs, true)).Unit(unit).Span(w).Height(5).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		GraphMode(common.BigValueGraphModeNone).ColorMode(common.BigValueColorModeValue)
	if steps != nil {
		p = p.Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps))
	}
	if mappings != nil {
		p = p.Mappings(mappings)
	}
	b.d.WithPanel(p)
}

// table adds a table of instant values, one row a series with its labels.
func (b *board) table(title, description, unit string, w uint32, qs ...query) {
	b.d.WithPanel(table.NewPanelBuilder().Id(b.next()).Title(title).Description(description).
		Datasource(datasource).Targets(targets(qs, true)).Unit(unit).Span(w).Height(8).
		Transformations([]dashboard.DataTransformerConfig{{Id: "labelsToFields", Options: map[string]any{}}, {Id: "merge", Options: map[string]any{}}}).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"})))
}

// steps are thresholds: a base color, then each value and the color from it on.
func steps(base string, more ...any) []dashboard.Threshold {
	out := []dashboard.Threshold{{Value: nil, Color: base}}
	for i := 0; i+1 < len(more); i += 2 {
		out = append(out, dashboard.Threshold{Value: cog.ToPtr(more[i].(float64)), Color: more[i+1].(string)})
	}
	return out
}

// valueText maps exact values to a text and a color.
func valueText(pairs ...string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i := 0; i+2 < len(pairs)+1; i += 3 {
		opts[pairs[i]] = dashboard.ValueMappingResult{Text: cog.ToPtr(pairs[i+1]), Color: cog.ToPtr(pairs[i+2]), Index: cog.ToPtr(int32(i / 3))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}
