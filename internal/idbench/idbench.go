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

// Run issues b.N IDs with next from n goroutines (n = 1: the benchmark's own)
// and reports, besides ns/op and allocs/op:
//
//   - IDs/s: IDs issued per second of wall time (b.N / elapsed);
//   - frac_of_limit: IDs/s divided by Limit12Bit;
//   - frac_of_own_limit: IDs/s divided by own, the generator's own limit.
//
// n must be a multiple of GOMAXPROCS (b.SetParallelism counts per P); it says
// so in the log when it cannot be.
func Run(b *testing.B, n int, own float64, next func() (int64, error)) {
	b.ReportAllocs()
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
		}
		report(b, own)
		return
	}
	procs := runtime.GOMAXPROCS(0)
	p := (n + procs - 1) / procs
	if p*procs != n {
		b.Logf("GOMAXPROCS=%d: running %d goroutines, not %d", procs, p*procs, n)
	}
	b.SetParallelism(p)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
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
		}
	})
	b.StopTimer()
	report(b, own)
}

func report(b *testing.B, own float64) {
	secs := b.Elapsed().Seconds()
	if secs <= 0 {
		return
	}
	rate := float64(b.N) / secs
	b.ReportMetric(rate, "IDs/s")
	b.ReportMetric(rate/Limit12Bit, "frac_of_limit")
	b.ReportMetric(rate/own, "frac_of_own_limit")
}
