package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/token"
)

// keyMetrics export the signing keys in force, read at each scrape:
//
//	snowtoken_signing_keys{state}                           gauge  keys by state: next, active, retired
//	snowtoken_signing_key_activated_timestamp_seconds       gauge  when the active key began to sign
//	snowtoken_signing_key_next_signs_from_timestamp_seconds gauge  when the next key may sign, at the earliest
//
// The two times come from a keys directory's manifest: a plain list of key
// files has neither, and without a next key there is no second.
type keyMetrics struct {
	keys                     func() *token.KeySet
	count, activated, nextAt *prometheus.Desc
}

func newKeyMetrics(keys func() *token.KeySet) *keyMetrics {
	return &keyMetrics{keys: keys,
		count: prometheus.NewDesc("snowtoken_signing_keys",
			"Signing keys in force, by state: next (published, not signing yet), active (signs), retired (verifies its tokens until they expire).", []string{"state"}, nil),
		activated: prometheus.NewDesc("snowtoken_signing_key_activated_timestamp_seconds",
			"When the active signing key began to sign (keys.json's activated), in Unix seconds; a plain list of key files has none.", nil, nil),
		nextAt: prometheus.NewDesc("snowtoken_signing_key_next_signs_from_timestamp_seconds",
			"When the next signing key may sign at the earliest (published + 10 min), in Unix seconds; none without a next key.", nil, nil),
	}
}

func (m *keyMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.count
	ch <- m.activated
	ch <- m.nextAt
}

func (m *keyMetrics) Collect(ch chan<- prometheus.Metric) {
	n := map[token.KeyState]int{}
	var activated, nextAt time.Time
	for _, k := range m.keys().Keys() {
		n[k.State]++
		switch {
		case k.State == token.KeyActive:
			activated = k.Activated
		case k.State == token.KeyNext && !k.Published.IsZero():
			if at := k.Published.Add(token.KeyPublishDelay); nextAt.IsZero() || at.Before(nextAt) {
				nextAt = at
			}
		}
	}
	for _, s := range []token.KeyState{token.KeyNext, token.KeyActive, token.KeyRetired} {
		ch <- prometheus.MustNewConstMetric(m.count, prometheus.GaugeValue, float64(n[s]), string(s))
	}
	if !activated.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.activated, prometheus.GaugeValue, float64(activated.Unix()))
	}
	if !nextAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.nextAt, prometheus.GaugeValue, float64(nextAt.Unix()))
	}
}
