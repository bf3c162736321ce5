// Package idbench runs an ID generator under a Go benchmark the one way that
// snowflakealg's BenchmarkNextID and bench/'s BenchmarkIDs (snowflakealg beside
// bwmarrin/snowflake and sony/sonyflake, run by the load tool) share: one
// generator, used from 1 goroutine or from several at once, every ID checked
// to be larger than the one the same goroutine got before, and the rate
// reported as a fraction of the limit of one worker.
package idbench

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Limit12Bit is the most IDs one worker can issue per second with a 12-bit
// sequence and millisecond timestamps: 4096 × 1000.
const Limit12Bit = 4096 * 1000

// Goroutines are the goroutine counts the benchmarks share one generator
// between: one alone, and two levels of contention.
var Goroutines = []int{1, 8, 16}

// Name names the case of n goroutines: "1goroutine", "16goroutines".
func Name(n int) string {
	if n == 1 {
		return "1goroutine"
	}
	return fmt.Sprintf("%dgoroutines", n)
}

// MsOf22 returns the millisecond of an ID whose timestamp sits above 22 bits
// of worker and sequence: 41/10/12, snowtoken's and bwmarrin's default.
func MsOf22(id int64) int64 { return id >> 22 }

// Run issues b.N IDs with next from n goroutines (n = 1: the benchmark's own)
// and reports, besides ns/op and allocs/op:
//
//   - IDs/s: IDs issued per second of wall time (b.N / elapsed);
//   - frac_of_limit: IDs/s divided by Limit12Bit;
//   - frac_of_own_limit: IDs/s divided by own, the generator's own limit;
//   - with msOf (the millisecond of an ID; nil for none), where a rate below
//     the limit went, counting the IDs of each millisecond between the first
//     and the last: ms_empty, the fraction of milliseconds with no ID at all
//     (no goroutine issuing got a CPU in it, or it never saw it begin), and
//     ms_short, those with some IDs but fewer than own allows in one.
//
// n must be a multiple of GOMAXPROCS (b.SetParallelism counts per P); it says
// so in the log when it cannot be.
func Run(b *testing.B, n int, own float64, msOf func(int64) int64, next func() (int64, error)) {
	b.ReportAllocs()
	var all msCounts
	if msOf != nil {
		id, err := next()
		if err != nil {
			b.Fatal(err)
		}
		all.base = msOf(id)
	}
	if n == 1 {
		var last int64
		for b.Loop() {
			id, err := next()
			if err != nil {
				b.Fatal(err)
			}
			if id <= last {
				b.Fatalf("id %d after %d", id, last)
			}
			last = id
			if msOf != nil {
				all.add(msOf(id))
			}
		}
		report(b, own, &all)
		return
	}
	procs := runtime.GOMAXPROCS(0)
	p := (n + procs - 1) / procs
	if p*procs != n {
		b.Logf("GOMAXPROCS=%d: running %d goroutines, not %d", procs, p*procs, n)
	}
	var mu sync.Mutex
	b.SetParallelism(p)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := msCounts{base: all.base}
		defer func() {
			mu.Lock()
			all.merge(&mine)
			mu.Unlock()
		}()
		var last int64
		for pb.Next() {
			id, err := next()
			if err != nil {
				b.Error(err)
				return
			}
			if id <= last {
				b.Errorf("id %d after %d", id, last)
				return
			}
			last = id
			if msOf != nil {
				mine.add(msOf(id))
			}
		}
	})
	b.StopTimer()
	report(b, own, &all)
}

// msCounts counts IDs by millisecond, from base on.
type msCounts struct {
	base int64
	n    []int64
}

func (c *msCounts) add(ms int64) {
	i := int(ms - c.base)
	if i < 0 {
		return
	}
	if i >= len(c.n) {
		c.n = append(c.n, make([]int64, i+1-len(c.n))...)
	}
	c.n[i]++
}

func (c *msCounts) merge(o *msCounts) {
	if len(o.n) > len(c.n) {
		c.n = append(c.n, make([]int64, len(o.n)-len(c.n))...)
	}
	for i, k := range o.n {
		c.n[i] += k
	}
}

// split returns the fractions of the milliseconds strictly between the first
// and the last one with an ID that have none, and that have some but fewer
// than full; ok is false when there are none between.
func (c *msCounts) split(full int64) (empty, short float64, ok bool) {
	first := slices.IndexFunc(c.n, func(k int64) bool { return k > 0 })
	last := len(c.n) - 1
	for last >= 0 && c.n[last] == 0 {
		last--
	}
	if first < 0 || last-first < 2 {
		return 0, 0, false
	}
	var e, s int
	for _, k := range c.n[first+1 : last] {
		switch {
		case k == 0:
			e++
		case k < full:
			s++
		}
	}
	span := float64(last - first - 1)
	return float64(e) / span, float64(s) / span, true
}

func report(b *testing.B, own float64, ms *msCounts) {
	secs := b.Elapsed().Seconds()
	if secs <= 0 {
		return
	}
	rate := float64(b.N) / secs
	b.ReportMetric(rate, "IDs/s")
	b.ReportMetric(rate/Limit12Bit, "frac_of_limit")
	b.ReportMetric(rate/own, "frac_of_own_limit")
	if empty, short, ok := ms.split(int64(own / 1000)); ok {
		b.ReportMetric(empty, "ms_empty")
		b.ReportMetric(short, "ms_short")
	}
}
