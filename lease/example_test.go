package lease_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	// The miniredis is this example's own, so a worker with no mark was
	// never used. On a shared Redis leave PrivateStore false: a first claim
	// then waits one TTL before it issues, in case the state was lost.
	opts := lease.Options{Candidate: 7, Logger: quiet, PrivateStore: true}

	// Two replicas prefer worker 7; the second gets the lowest free ID.
	a, _ := lease.Acquire(ctx, rdb, opts)
	b, _ := lease.Acquire(ctx, rdb, opts)
	fmt.Println("a:", a.WorkerID(), "b:", b.WorkerID())

	// a issues IDs under its worker, starting after the saved mark.
	clock := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	gen, _ := snowflakealg.New(snowflakealg.Settings{
		WorkerID:   a.WorkerID(),
		StartAfter: a.HighWater(),
		Now:        func() time.Time { return clock },
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(runCtx, gen.HighWater)
	}()
	if a.Valid() {
		id, _ := gen.NextID(ctx)
		p, _ := gen.Decompose(id)
		fmt.Println("issued by worker", p.Worker)
	}

	// Shutdown: stop issuing, stop renewing, save the final mark.
	stop()
	<-done
	_ = a.Release(ctx, gen.HighWater())

	// The next holder of worker 7 starts after a's last millisecond.
	c, _ := lease.Acquire(ctx, rdb, opts)
	fmt.Println("c:", c.WorkerID(), "starts after", c.HighWater())
	// Output:
	// a: 7 b: 0
	// issued by worker 7
	// c: 7 starts after 2026-06-01 12:00:00 +0000 UTC
}
