package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/snowtoken/snowtoken/token"
)

func TestTuneGC(t *testing.T) {
	// Restore the test binary's own settings afterwards.
	origPercent := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(origPercent); debug.SetMemoryLimit(origLimit) })

	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	unreadable := func() (uint64, error) { return 0, errors.New("no cgroup file system") }
	container256M := memlimit.Limit(256 << 20)
	const untouchedPercent, untouchedLimit = 123, 1 << 40
	for _, tc := range []struct {
		name        string
		env         map[string]string
		container   memlimit.Provider
		wantPercent int
		want        memLimit
	}{
		{"outside a container", nil, noLimit, defaultGOGC, memLimit{defaultMemLimit, limitFromDefault}},
		{"cgroup unreadable", nil, unreadable, defaultGOGC, memLimit{defaultMemLimit, limitFromDefault}},
		// Compose's issuer: memory 256M. The soft limit under it, not at it,
		// where a full cache would grow the process to the OOM killer.
		{"container of 256M", nil, container256M, defaultGOGC, memLimit{241591910, limitFromContainer}},
		{"container of 8G", nil, memlimit.Limit(8 << 30), defaultGOGC, memLimit{7730941132, limitFromContainer}},
		{"GOGC set", map[string]string{"GOGC": "150"}, noLimit, untouchedPercent, memLimit{defaultMemLimit, limitFromDefault}},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, container256M, defaultGOGC, memLimit{untouchedLimit, limitFromEnv}},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, container256M, untouchedPercent, memLimit{untouchedLimit, limitFromEnv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(untouchedPercent)
			debug.SetMemoryLimit(untouchedLimit)
			got := tuneGC(tc.env, tc.container)
			if got != tc.want {
				t.Errorf("tuneGC = %+v, want %+v", got, tc.want)
			}
			if p := debug.SetGCPercent(untouchedPercent); p != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", p, tc.wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != tc.want.bytes {
				t.Errorf("memory limit in force %d, want %d", l, tc.want.bytes)
			}
		})
	}
}

// TestCacheFitsMemoryLimit: a verified-token cache that could not fit
// under the soft memory limit is refused at start, naming both settings; one
// that takes over half of it is a warning; the defaults fit the Compose
// stack's and the Kubernetes manifests' 256M containers.
func TestCacheFitsMemoryLimit(t *testing.T) {
	inContainer := func(n int64) memLimit { return memLimit{int64(float64(n) * containerMemRatio), limitFromContainer} }
	for _, tc := range []struct {
		name    string
		entries int
		limit   memLimit
		refused bool
		warned  bool
	}{
		{"defaults, no container", token.DefaultCacheSize, memLimit{defaultMemLimit, limitFromDefault}, false, false},
		{"defaults, 256M container", token.DefaultCacheSize, inContainer(256 << 20), false, false},
		{"defaults, 128M container", token.DefaultCacheSize, inContainer(128 << 20), false, true},
		{"defaults, 64M container", token.DefaultCacheSize, inContainer(64 << 20), true, false},
		{"a million entries, default limit", 1_000_000, memLimit{defaultMemLimit, limitFromDefault}, true, false},
		{"a million entries, GOMEMLIMIT 2GiB", 1_000_000, memLimit{2 << 30, limitFromEnv}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := checkCacheFits(tc.entries, tc.limit, slog.New(slog.NewJSONHandler(&logs, nil)))
			if refused := err != nil; refused != tc.refused {
				t.Fatalf("checkCacheFits: %v; want refused %t", err, tc.refused)
			}
			if err != nil {
				if !errors.Is(err, errCacheTooBig) {
					t.Errorf("%v is not errCacheTooBig", err)
				}
				for _, want := range []string{"SNOWTOKEN_CACHE_SIZE", "GOMEMLIMIT", "MiB"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal %q does not name %s", err, want)
					}
				}
			}
			if warned := logs.Len() > 0; warned != tc.warned {
				t.Fatalf("warned %t, want %t: %s", warned, tc.warned, logs.String())
			}
			if tc.warned {
				var line map[string]any
				if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line["level"] != "WARN" || line["memory_limit_from"] != limitFromContainer {
					t.Errorf("the warning is not one JSON line naming the limit's source: %s (%v)", logs.String(), err)
				}
			}
		})
	}
}
