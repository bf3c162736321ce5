package clocktest

import (
	"context"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now: got %v, want %v", got, t0)
	}
	c.Add(-time.Second)
	if got, want := c.Now(), t0.Add(-time.Second); !got.Equal(want) {
		t.Fatalf("after Add(-1s): got %v, want %v", got, want)
	}
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Now(), t0.Add(time.Second); !got.Equal(want) {
		t.Fatalf("after Sleep(2s): got %v, want %v", got, want)
	}
	c.Set(t0)
	c.SetStep(time.Millisecond)
	c.Now()
	if got, want := c.Now(), t0.Add(time.Millisecond); !got.Equal(want) {
		t.Fatalf("with a 1 ms step, second reading: got %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Second); err == nil {
		t.Fatal("Sleep on a cancelled context returned nil")
	}
}
