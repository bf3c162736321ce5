package token

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the Redis commands of concurrent requests together, as one
// pipeline per batch ("smart batching"): a sender takes the first command
// queued, adds every other one already waiting, and sends them at once. Nothing
// ever waits for a batch to fill, so a lone request costs one round trip as
// before, while under load many requests share one write, one read and one
// wake-up of Redis.
type batcher struct {
	rdb     redis.UniversalClient
	queue   chan *batchOp
	stop    chan struct{}
	timeout time.Duration

	// mu orders close after every enqueue: do holds it to read closed and
	// enqueue, so nothing is queued once the senders may have left.
	mu     sync.RWMutex
	closed bool
}

type batchOp struct {
	cmd  redis.Cmder
	done chan struct{}
}

const (
	batchSenders = 4   // pipelines in flight at once
	batchMax     = 128 // commands per pipeline at most
)

func newBatcher(rdb redis.UniversalClient, timeout time.Duration) *batcher {
	b := &batcher{rdb: rdb, queue: make(chan *batchOp, batchSenders*batchMax), stop: make(chan struct{}), timeout: timeout}
	for range batchSenders {
		go b.send()
	}
	return b
}

// do runs cmd in the next batch and waits for its result, or for ctx.
func (b *batcher) do(ctx context.Context, cmd redis.Cmder) error {
	op := &batchOp{cmd: cmd, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errStoreClosed
	}
	select {
	case b.queue <- op:
	case <-ctx.Done():
		b.mu.RUnlock()
		return ctx.Err()
	}
	b.mu.RUnlock()
	select {
	case <-op.done:
		return cmd.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the senders once the commands queued so far are sent.
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
}

func (b *batcher) send() {
	batch := make([]*batchOp, 0, batchMax)
	for {
		var op *batchOp
		select {
		case op = <-b.queue:
		case <-b.stop:
			select {
			case op = <-b.queue: // finish what was queued before close
			default:
				return
			}
		}
		batch = append(batch[:0], op)
	fill:
		for len(batch) < batchMax {
			select {
			case op := <-b.queue:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		pipe := b.rdb.Pipeline()
		for _, op := range batch {
			_ = pipe.Process(ctx, op.cmd)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		cancel()
		for _, op := range batch {
			close(op.done)
		}
	}
}
