package config

import (
	"testing"
	"time"
)

// TestAssertionLifetimes: the bounds of client assertions, their defaults
// as Vars documents them, and values past their bounds refused.
func TestAssertionLifetimes(t *testing.T) {
	c := mustLoad(t, nil)
	if c.AssertionMaxLifetime != 5*time.Minute || documented(t, "SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME") != "5m" {
		t.Errorf("AssertionMaxLifetime %v", c.AssertionMaxLifetime)
	}
	if c.WorkloadMaxLifetime != 24*time.Hour || documented(t, "SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME") != "24h" {
		t.Errorf("WorkloadMaxLifetime %v", c.WorkloadMaxLifetime)
	}
	c = mustLoad(t, map[string]string{"SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME": "1m", "SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME": "2h"})
	if c.AssertionMaxLifetime != time.Minute || c.WorkloadMaxLifetime != 2*time.Hour {
		t.Errorf("set: %v, %v", c.AssertionMaxLifetime, c.WorkloadMaxLifetime)
	}
	for name, v := range map[string]string{
		"SNOWTOKEN_CLIENT_ASSERTION_MAX_LIFETIME": "2h",
		"SNOWTOKEN_WORKLOAD_TOKEN_MAX_LIFETIME":   "169h",
	} {
		for _, bad := range []string{v, "0s", "soon"} {
			if _, err := LoadEnv(map[string]string{name: bad}); err == nil {
				t.Errorf("%s=%s: no error", name, bad)
			}
		}
	}
}
