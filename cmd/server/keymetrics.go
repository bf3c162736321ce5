package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/snowtoken/snowtoken/token/keyset"
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
	keys                     func() *keyset.Set
	count, activated, nextAt *prometheus.Desc
}

func newKeyMetrics(keys func() *keyset.Set) *keyMetrics {
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
	n := map[keyset.State]int{}
	var activated, nextAt time.Time
	for _, k := range m.keys().Keys() {
		n[k.State]++
		switch {
		case k.State == keyset.Active:
			activated = k.Activated
		case k.State == keyset.Next && !k.Published.IsZero():
			if at := k.Published.Add(keyset.PublishDelay); nextAt.IsZero() || at.Before(nextAt) {
				nextAt = at
			}
		}
	}
	for _, s := range []keyset.State{keyset.Next, keyset.Active, keyset.Retired} {
		ch <- prometheus.MustNewConstMetric(m.count, prometheus.GaugeValue, float64(n[s]), string(s))
	}
	if !activated.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.activated, prometheus.GaugeValue, float64(activated.Unix()))
	}
	if !nextAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.nextAt, prometheus.GaugeValue, float64(nextAt.Unix()))
	}
}
