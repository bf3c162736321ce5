package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// pipelineWatch is a go-redis hook that records the pipelines of SETs a
// client sends: how many are out at once, their sizes, and, while hold is set, it
// keeps the first pipeline from going out until release is closed.
type pipelineWatch struct {
	out, maxOut atomic.Int64
	mu          sync.Mutex
	sizes       []int
	hold        bool
	held        chan struct{} // closed when the first pipeline is held
	release     chan struct{}
	first       atomic.Bool
}

func (w *pipelineWatch) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (w *pipelineWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (w *pipelineWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "set" { // a new connection's handshake
			return next(ctx, cmds)
		}
		n := w.out.Add(1)
		defer w.out.Add(-1)
		for m := w.maxOut.Load(); n > m && !w.maxOut.CompareAndSwap(m, n); m = w.maxOut.Load() {
		}
		w.mu.Lock()
		w.sizes = append(w.sizes, len(cmds))
		w.mu.Unlock()
		if w.hold && w.first.CompareAndSwap(false, true) {
			close(w.held)
			<-w.release
		}
		return next(ctx, cmds)
	}
}

// runOps sends n SETs through b from n goroutines at once and fails the
// test on any error or missing key.
func runOps(t *testing.T, r *redistest.Redis, b *batcher, n int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- b.do(t.Context(), redis.NewStatusCmd(t.Context(), "set", fmt.Sprintf("%s%s:%d", r.Prefix, tag, i), i))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Client.Exists(t.Context(), fmt.Sprintf("%s%s:%d", r.Prefix, tag, n-1)).Val(); got != 1 {
		t.Fatalf("the last command's key is missing")
	}
}

// TestBatcherOnePipelineAtATime: while Redis answers, one pipeline is out at a
// time and the commands that arrive meanwhile share the next one.
func TestBatcherOnePipelineAtATime(t *testing.T) {
	r := redistest.New(t)
	w := &pipelineWatch{}
	r.Client.AddHook(w)
	b := newBatcher(r.Client, 5*time.Second, time.Hour) // never overlap
	defer b.close()

	const n = 500
	runOps(t, r, b, n, "one")
	if got := w.maxOut.Load(); got != 1 {
		t.Errorf("%d pipelines out at once, want 1", got)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sizes) >= n/2 {
		t.Errorf("%d commands went out in %d pipelines; they were not batched", n, len(w.sizes))
	}
	t.Logf("%d commands in %d pipelines", n, len(w.sizes))
}

// TestBatcherStuckPipeline: a pipeline that does not come back does not hold
// the commands behind it; they go out in other pipelines, at most
// batchSenders at once.
func TestBatcherStuckPipeline(t *testing.T) {
	r := redistest.New(t)
	w := &pipelineWatch{hold: true, held: make(chan struct{}), release: make(chan struct{})}
	r.Client.AddHook(w)
	b := newBatcher(r.Client, 5*time.Second, 10*time.Millisecond)
	defer b.close()

	stuck := make(chan error, 1)
	go func() { stuck <- b.do(t.Context(), redis.NewStatusCmd(t.Context(), "set", r.Prefix+"stuck", 1)) }()
	<-w.held

	done := make(chan struct{})
	go func() { defer close(done); runOps(t, r, b, 200, "behind") }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the commands behind a stuck pipeline did not finish")
	}
	select {
	case err := <-stuck:
		t.Fatalf("the stuck command finished while held: %v", err)
	default:
	}
	close(w.release)
	if err := <-stuck; err != nil {
		t.Fatal(err)
	}
	if got := w.maxOut.Load(); got < 2 || got > batchSenders {
		t.Errorf("%d pipelines out at once, want 2 to %d", got, batchSenders)
	}
}
