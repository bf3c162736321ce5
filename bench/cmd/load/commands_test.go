package main

import (
	"maps"
	"testing"
)

// commandStatsInfo is INFO commandstats of Redis 7.0, with its CRLFs.
const commandStatsInfo = "# Commandstats\r\n" +
	"cmdstat_get:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|list:calls=1,usec=19,usec_per_call=19.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=3,usec=68,usec_per_call=22.67,rejected_calls=1,failed_calls=0\r\n" +
	"cmdstat_info:calls=2,usec=110,usec_per_call=55.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseCommandStats(t *testing.T) {
	got, err := parseCommandStats([]byte(commandStatsInfo))
	want := commandCalls{"get": 12, "client|list": 1, "evalsha": 3, "info": 2}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("parseCommandStats = %v, %v, want %v", got, err, want)
	}
	if got, err := parseCommandStats([]byte("# Commandstats\r\n")); err != nil || len(got) != 0 {
		t.Errorf("parseCommandStats(no commands) = %v, %v, want none", got, err)
	}
	for _, bad := range []string{
		"cmdstat_get:usec=30,usec_per_call=2.50\r\n",            // no calls
		"cmdstat_get:calls=lots,usec=30\r\n",                    // not a number
		"cmdstat_get:calls=-1,usec=30\r\n",                      // negative
		"cmdstat_get\r\n",                                       // no fields
		"cmdstat_:calls=1\r\n",                                  // no name
		"used_memory:1000\r\n",                                  // another section's
		"cmdstat_get:calls=1,usec=1\r\ncmdstat_get:calls=2\r\n", // twice
	} {
		if got, err := parseCommandStats([]byte(bad)); err == nil {
			t.Errorf("parseCommandStats(%q) = %v, want an error", bad, got)
		}
	}
}

func TestCommandCallsSince(t *testing.T) {
	before := commandCalls{"get": 10, "info": 4, "set": 2}
	after := commandCalls{"get": 30, "info": 5, "set": 2, "xadd": 1}
	got, err := after.since(before)
	// info: the one INFO of the tool inside the window is not counted; set
	// was not called.
	want := commandCalls{"get": 20, "xadd": 1}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("since = %v, %v, want %v", got, err, want)
	}
	if got, err := (commandCalls{"get": 3, "info": 1}).since(before); err == nil {
		t.Errorf("since after a reset = %v, want an error", got)
	}
	total, top := want.perRequest(1000)
	if total != 0.021 || top != "get 0.020, xadd 0.001" {
		t.Errorf("perRequest(1000) = %v, %q, want 0.021, %q", total, top, "get 0.020, xadd 0.001")
	}
	if _, top := want.perRequest(2000); top != "get 0.010" {
		t.Errorf("perRequest(2000) top = %q, want %q (xadd under 0.001)", top, "get 0.010")
	}
}
