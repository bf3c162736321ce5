// Package bench measures how fast snowtoken's ID engine (snowflakealg) issues
// IDs, side by side with two well-known Go Snowflake generators, in one
// `go test -bench` run:
//
//   - snowtoken: snowflakealg.New(snowflakealg.Settings{}), layout 41/10/12,
//     lock-free (one compare-and-swap per ID);
//   - bwmarrin: github.com/bwmarrin/snowflake v0.3.0, snowflake.NewNode(1),
//     layout 41/10/12, a mutex per ID;
//   - sonyflake: github.com/sony/sonyflake v1.2.0, a fixed machine ID, layout
//     39/8/16 in 10 ms units, a mutex per ID.
//
// Each generator is benchmarked from 1 goroutine and from 8 goroutines sharing
// one generator (b.SetParallelism so that parallelism × GOMAXPROCS = 8; on a
// 2-core machine that is SetParallelism(4)). One generator is one worker, so
// the goroutine count does not raise the limit: it only adds contention.
//
// Besides ns/op and allocs/op every case reports:
//
//   - IDs/s: IDs issued per second of wall time (b.N / elapsed);
//   - frac_of_limit: IDs/s divided by 4,096,000, the physical limit of one
//     worker with a 12-bit sequence (4096 IDs per millisecond, 244.14 ns per ID);
//   - frac_of_own_limit: IDs/s divided by the generator's own limit. For
//     snowtoken and bwmarrin that is the same 4,096,000/s. Sonyflake's limit is
//     different: an 8-bit sequence per 10 ms unit is 25,600 IDs/s (39.06 µs per
//     ID), so its frac_of_limit is necessarily tiny and frac_of_own_limit is the
//     figure that says whether it reaches what its design allows.
//
// All three generators read the real clock, so a generator that is faster than
// its limit is throttled to it: at the limit, ns/op measures the layout, not the
// code. Every ID is checked to be larger than the one the same goroutine got
// before, which also keeps the calls from being optimised away.
//
// Run it from this directory:
//
//	go test -run '^$' -bench BenchmarkIDs -benchtime 2s -count 3
package bench

import (
	"context"
	"runtime"
	"testing"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	"github.com/snowtoken/snowtoken/snowflakealg"
)

const (
	// limit12Bit is the most IDs one worker can issue per second with a 12-bit
	// sequence and millisecond timestamps: 4096 × 1000.
	limit12Bit = 4096 * 1000
	// limitSony is sonyflake's own limit: an 8-bit sequence per 10 ms unit, 256 × 100.
	limitSony = 256 * 100
	// goroutines is the goroutine count of the parallel cases.
	goroutines = 8
)

// generator is one library under test.
type generator struct {
	name  string
	limit float64 // the library's own IDs/s limit for one worker
	// open returns a fresh generator's next-ID function.
	open func(b *testing.B) func() (int64, error)
}

var generators = []generator{
	{"snowtoken", limit12Bit, func(b *testing.B) func() (int64, error) {
		g, err := snowflakealg.New(snowflakealg.Settings{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		return func() (int64, error) {
			id, err := g.NextID(ctx)
			return int64(id), err
		}
	}},
	{"bwmarrin", limit12Bit, func(b *testing.B) func() (int64, error) {
		n, err := snowflake.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		return func() (int64, error) { return n.Generate().Int64(), nil }
	}},
	{"sonyflake", limitSony, func(b *testing.B) func() (int64, error) {
		// A fixed machine ID: without one, sonyflake reads the machine's
		// private IPv4 addresses.
		sf, err := sonyflake.New(sonyflake.Settings{
			MachineID: func() (uint16, error) { return 1, nil },
		})
		if err != nil {
			b.Fatal(err)
		}
		return func() (int64, error) {
			id, err := sf.NextID()
			return int64(id), err
		}
	}},
}

// BenchmarkIDs issues IDs from each generator, from 1 goroutine and from 8.
func BenchmarkIDs(b *testing.B) {
	for _, g := range generators {
		b.Run(g.name+"/1goroutine", func(b *testing.B) {
			next := g.open(b)
			b.ReportAllocs()
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
			report(b, g.limit)
		})
		b.Run(g.name+"/8goroutines", func(b *testing.B) {
			procs := runtime.GOMAXPROCS(0)
			p := (goroutines + procs - 1) / procs
			if p*procs != goroutines {
				b.Logf("GOMAXPROCS=%d: running %d goroutines, not %d", procs, p*procs, goroutines)
			}
			next := g.open(b)
			b.ReportAllocs()
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
			report(b, g.limit)
		})
	}
}

// report adds IDs/s and the fractions of the 12-bit limit and of the
// generator's own limit.
func report(b *testing.B, own float64) {
	secs := b.Elapsed().Seconds()
	if secs <= 0 {
		return
	}
	rate := float64(b.N) / secs
	b.ReportMetric(rate, "IDs/s")
	b.ReportMetric(rate/limit12Bit, "frac_of_limit")
	b.ReportMetric(rate/own, "frac_of_own_limit")
}
