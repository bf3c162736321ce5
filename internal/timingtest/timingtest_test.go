package timingtest

import (
	"testing"
	"time"
)

// recorder is a testing.TB that notes whether an error was reported.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		enforced bool
		took     time.Duration
		fails    bool
	}{
		{"under the bound", false, 50 * time.Millisecond, false},
		{"under the bound, timing group", true, 50 * time.Millisecond, false},
		{"over the bound", false, 150 * time.Millisecond, false},
		{"over the bound, timing group", true, 150 * time.Millisecond, true},
		{"a hang", false, 1001 * time.Millisecond, true},
		{"a hang, timing group", true, 1001 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.enforced {
				t.Setenv(EnvTiming, "1")
			} else {
				t.Setenv(EnvTiming, "")
			}
			r := &recorder{TB: t}
			Within(r, "x", tc.took, 100*time.Millisecond)
			if r.failed != tc.fails {
				t.Errorf("Within(%v, bound 100ms) failed = %t, want %t", tc.took, r.failed, tc.fails)
			}
		})
	}
}
