// Package bench measures how fast snowtoken's ID engine (snowflakealg) issues
// IDs, side by side with two well-known Go Snowflake generators, in one
// `go test -bench` run:
//
//   - snowtoken: snowflakealg.New(snowflakealg.Settings{}), layout 41/10/12,
//     lock-free (one compare-and-swap per ID; when a millisecond is used up,
//     one caller spins on the clock and the others wait parked on a mutex);
//   - bwmarrin: github.com/bwmarrin/snowflake v0.3.0, snowflake.NewNode(1),
//     layout 41/10/12, a mutex per ID;
//   - sonyflake: github.com/sony/sonyflake v1.2.0, a fixed machine ID, layout
//     39/8/16 in 10 ms units, a mutex per ID.
//
// Each generator is benchmarked from 1 goroutine and from 8 and 16 goroutines
// sharing one generator (b.SetParallelism so that parallelism × GOMAXPROCS is
// the count; on a 2-core machine SetParallelism(4) and (8)), the three
// generators in turn at each count (internal/idbench). One generator is one
// worker, so the goroutine count does not raise the limit: it only adds
// contention.
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
//
// or through the load tool, which runs every case once a round, several
// rounds, and prints each case's median beside its peers':
//
//	go run ./cmd/load -ids-only
package bench

import (
	"context"
	"testing"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/idbench"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// limitSony is sonyflake's own limit: an 8-bit sequence per 10 ms unit, 256 × 100.
const limitSony = 256 * 100

// generator is one library under test.
type generator struct {
	name  string
	limit float64           // the library's own IDs/s limit for one worker
	msOf  func(int64) int64 // the millisecond of an ID; nil: not in milliseconds
	// open returns a fresh generator's next-ID function.
	open func(b *testing.B) func() (int64, error)
}

var generators = []generator{
	{"snowtoken", idbench.Limit12Bit, idbench.MsOf22, func(b *testing.B) func() (int64, error) {
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
	{"bwmarrin", idbench.Limit12Bit, idbench.MsOf22, func(b *testing.B) func() (int64, error) {
		n, err := snowflake.NewNode(1)
		if err != nil {
			b.Fatal(err)
		}
		return func() (int64, error) { return n.Generate().Int64(), nil }
	}},
	{"sonyflake", limitSony, nil, func(b *testing.B) func() (int64, error) {
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

// BenchmarkIDs issues IDs from each generator shared by 1, 8 and 16
// goroutines. The generators take turns within each goroutine count, so that
// the cases compared sit next to each other in time on a shared machine.
func BenchmarkIDs(b *testing.B) {
	for _, n := range idbench.Goroutines {
		for _, g := range generators {
			b.Run(g.name+"/"+idbench.Name(n), func(b *testing.B) {
				idbench.Run(b, n, g.limit, g.msOf, g.open(b))
			})
		}
	}
}

// BenchmarkUnthrottledIDs measures the code rather than the layout: snowtoken
// and bwmarrin with a 21-bit sequence (41/1/21, 2,097,152 IDs per
// millisecond), which the clock never runs out of, shared by 1, 8 and 16
// goroutines. Its frac_of_limit is then the headroom: how many times the
// 4,096,000 IDs/s of the 12-bit layout the code could issue; the smaller it
// is, the more of each millisecond a 12-bit generator spends issuing its 4096
// IDs rather than waiting for the next one.
func BenchmarkUnthrottledIDs(b *testing.B) {
	alloc, err := bitsalloc.New(41, 1, 21)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range idbench.Goroutines {
		b.Run("snowtoken/"+idbench.Name(n), func(b *testing.B) {
			g, err := snowflakealg.New(snowflakealg.Settings{Allocator: alloc})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			idbench.Run(b, n, idbench.Limit12Bit, nil, func() (int64, error) {
				id, err := g.NextID(ctx)
				return int64(id), err
			})
		})
		b.Run("bwmarrin/"+idbench.Name(n), func(b *testing.B) {
			// bwmarrin's layout is package state, read by NewNode.
			node, step := snowflake.NodeBits, snowflake.StepBits
			snowflake.NodeBits, snowflake.StepBits = 1, 21
			nd, err := snowflake.NewNode(1)
			snowflake.NodeBits, snowflake.StepBits = node, step
			if err != nil {
				b.Fatal(err)
			}
			idbench.Run(b, n, idbench.Limit12Bit, nil, func() (int64, error) { return nd.Generate().Int64(), nil })
		})
	}
}
