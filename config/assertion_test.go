package config

import (
	"fmt"
	"strings"
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

// TestKeyFetchAllowNets: SNOWTOKEN_KEY_FETCH_ALLOW_NETS reads CIDRs and
// addresses, none by default, and refuses anything else.
func TestKeyFetchAllowNets(t *testing.T) {
	if c := mustLoad(t, nil); c.KeyFetchAllowNets != nil {
		t.Errorf("default: %v", c.KeyFetchAllowNets)
	}
	c := mustLoad(t, map[string]string{"SNOWTOKEN_KEY_FETCH_ALLOW_NETS": "10.96.0.0/12, 10.0.0.5,fd00::/8 ,10.1.2.3/8"})
	if got := fmt.Sprint(c.KeyFetchAllowNets); got != "[10.96.0.0/12 10.0.0.5/32 fd00::/8 10.0.0.0/8]" {
		t.Errorf("KeyFetchAllowNets %s", got)
	}
	for _, bad := range []string{"cluster", "10.0.0.0/33", "fe80::1%eth0"} {
		if _, err := LoadEnv(map[string]string{"SNOWTOKEN_KEY_FETCH_ALLOW_NETS": bad}); err == nil || !strings.Contains(err.Error(), "SNOWTOKEN_KEY_FETCH_ALLOW_NETS") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
