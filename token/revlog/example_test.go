package revlog_test

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/revlog"
)

// Example wires a writer and a follower next to a store (it needs a Redis
// 7.0 or later, so it does not run as a test). Every replica runs both; one
// writer at a time beats.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store, err := redisstore.New(rdb, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	w, _ := revlog.NewWriter(rdb, store.LogKey(), revlog.WriterOptions{})
	go w.Run(ctx)
	// The follower's client is its own: Run holds a connection in XREAD BLOCK.
	f, _ := revlog.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}), store.LogKey(), revlog.Options{})
	go f.Run(ctx)

	// Validation asks the follower first, and reads Redis only when it
	// cannot tell (token.Options.Revocations).
	// Here by hand: LogUnknown means read Redis.
	_ = f.Decide(time.Now(), token.LogQuery{JTI: "7250000000000000001", Subject: "alice", Client: "gateway", Issued: time.Now().UnixMilli()})
}
