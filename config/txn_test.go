package config

import (
	"errors"
	"testing"
	"time"
)

// TestLoadTxn: Transaction Tokens are off in production unless a trust
// domain is set, on in dev mode for DevTxnTrustDomain unless off; the TTL
// is bounded.
func TestLoadTxn(t *testing.T) {
	prod := map[string]string{"SNOWTOKEN_ENV": "production", "SNOWTOKEN_REDIS_URL": "redis://r:6379/0",
		"SNOWTOKEN_SIGNING_KEYS": "k.pem", "SNOWTOKEN_CLIENTS_FILE": "c.json", "SNOWTOKEN_ISSUER": "https://issuer.example"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name       string
		env        map[string]string
		wantDomain string
		wantTTL    time.Duration
	}{
		{"production: off by default", prod, "", time.Minute},
		{"production: a trust domain", with(prod, "SNOWTOKEN_TXN_TRUST_DOMAIN", "shop.internal", "SNOWTOKEN_TXN_TTL", "5m"), "shop.internal", 5 * time.Minute},
		{"production: off", with(prod, "SNOWTOKEN_TXN_TRUST_DOMAIN", "off"), "", time.Minute},
		{"dev: on by default", map[string]string{}, DevTxnTrustDomain, time.Minute},
		{"dev: off", map[string]string{"SNOWTOKEN_TXN_TRUST_DOMAIN": "OFF"}, "", time.Minute},
		{"dev: its own", map[string]string{"SNOWTOKEN_TXN_TRUST_DOMAIN": "mine", "SNOWTOKEN_TXN_TTL": "1s"}, "mine", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, tc.env)
			if c.TxnTrustDomain != tc.wantDomain || c.TxnTTL != tc.wantTTL {
				t.Errorf("trust domain %q, TTL %v; want %q, %v", c.TxnTrustDomain, c.TxnTTL, tc.wantDomain, tc.wantTTL)
			}
		})
	}
	for _, kv := range [][2]string{
		{"SNOWTOKEN_TXN_TRUST_DOMAIN", "shop internal"}, {"SNOWTOKEN_TXN_TRUST_DOMAIN", `a"b`},
		{"SNOWTOKEN_TXN_TTL", "0s"}, {"SNOWTOKEN_TXN_TTL", "-1s"}, {"SNOWTOKEN_TXN_TTL", "6m"}, {"SNOWTOKEN_TXN_TTL", "soon"},
	} {
		if _, err := Load(envOf(map[string]string{kv[0]: kv[1]})); !errors.Is(err, ErrConfig) {
			t.Errorf("%s=%q: %v, want ErrConfig", kv[0], kv[1], err)
		}
	}
}
