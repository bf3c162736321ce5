package snowflakealg

import (
	"context"
	"testing"

	"github.com/snowtoken/snowtoken/internal/idbench"
)

// BenchmarkNextID issues IDs from one generator shared by 1, 8 and 16
// goroutines and reports IDs/s and the fraction of the physical limit of a
// 12-bit sequence, 4,096,000 IDs/s (244.14 ns/op). bench/ runs the same cases
// beside bwmarrin/snowflake and sony/sonyflake; this one is for profiling the
// generator alone:
//
//	go test ./snowflakealg -run '^$' -bench 'NextID/16' -benchtime 2s -cpuprofile cpu.out
func BenchmarkNextID(b *testing.B) {
	for _, n := range idbench.Goroutines {
		b.Run(idbench.Name(n), func(b *testing.B) {
			g, err := New(Settings{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			idbench.Run(b, n, idbench.Limit12Bit, idbench.MsOf22, func() (int64, error) {
				id, err := g.NextID(ctx)
				return int64(id), err
			})
		})
	}
}
