package bitsalloc

import (
	"errors"
	"fmt"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		ts, w, s int
		want     error
	}{
		{41, 10, 12, nil},
		{1, 1, 61, nil},
		{61, 1, 1, nil},
		{39, 12, 12, nil},
		{0, 21, 42, ErrWidth},
		{41, 0, 22, ErrWidth},
		{41, 22, 0, ErrWidth},
		{-1, 32, 32, ErrWidth},
		{41, 10, 13, ErrLayout},
		{41, 10, 11, ErrLayout},
		{42, 10, 12, ErrLayout},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d/%d", tt.ts, tt.w, tt.s), func(t *testing.T) {
			a, err := New(tt.ts, tt.w, tt.s)
			if !errors.Is(err, tt.want) {
				t.Fatalf("New: got error %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			if got, want := a.MaxDelta(), int64(1)<<tt.ts-1; got != want {
				t.Errorf("MaxDelta: got %d, want %d", got, want)
			}
			if got, want := a.MaxWorker(), int64(1)<<tt.w-1; got != want {
				t.Errorf("MaxWorker: got %d, want %d", got, want)
			}
			if got, want := a.MaxSequence(), int64(1)<<tt.s-1; got != want {
				t.Errorf("MaxSequence: got %d, want %d", got, want)
			}
			id, err := a.Allocate(a.MaxDelta(), a.MaxWorker(), a.MaxSequence())
			if err != nil {
				t.Fatal(err)
			}
			if id != 1<<63-1 {
				t.Errorf("all fields at max: got %#x, want the largest int64", id)
			}
		})
	}
}

func TestDefaultLayout(t *testing.T) {
	a := Default()
	if got, want := a.String(), "41/10/12"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	id, err := a.Allocate(1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1<<22 | 1<<12 | 1); id != want {
		t.Errorf("Allocate(1,1,1): got %#x, want %#x", id, want)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"41/10/12", nil},
		{"39/12/12", nil},
		{"41/10", ErrSyntax},
		{"41/10/12/0", ErrSyntax},
		{"a/10/12", ErrSyntax},
		{"", ErrSyntax},
		{"41/10/13", ErrLayout},
		{"63/0/0", ErrWidth},
	}
	for _, tt := range tests {
		a, err := Parse(tt.in)
		if !errors.Is(err, tt.want) {
			t.Errorf("Parse(%q): got error %v, want %v", tt.in, err, tt.want)
			continue
		}
		if err == nil && a.String() != tt.in {
			t.Errorf("Parse(%q).String() = %q", tt.in, a.String())
		}
	}
}

func TestAllocateRejectsOutOfRange(t *testing.T) {
	a := Default()
	tests := []struct {
		name               string
		delta, worker, seq int64
		want               error
	}{
		{"delta too big", a.MaxDelta() + 1, 0, 0, ErrDeltaRange},
		{"delta negative", -1, 0, 0, ErrDeltaRange},
		{"worker too big", 0, a.MaxWorker() + 1, 0, ErrWorkerRange},
		{"worker negative", 0, -1, 0, ErrWorkerRange},
		{"sequence too big", 0, 0, a.MaxSequence() + 1, ErrSequenceRange},
		{"sequence negative", 0, 0, -1, ErrSequenceRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := a.Allocate(tt.delta, tt.worker, tt.seq); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if err := a.CheckWorker(1024); !errors.Is(err, ErrWorkerRange) {
		t.Errorf("CheckWorker(1024): got %v", err)
	}
	if err := a.CheckWorker(1023); err != nil {
		t.Errorf("CheckWorker(1023): got %v", err)
	}
}

// TestNoCrossFieldCollision is the Baidu uid-generator bug: a worker one past its
// maximum must not turn into a timestamp bit and collide with another ID.
func TestNoCrossFieldCollision(t *testing.T) {
	a := Default()
	legit, err := a.Allocate(1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Allocate(0, a.MaxWorker()+1, 0); err == nil {
		t.Fatalf("worker overflow accepted as %#x (collides with %#x)", id, legit)
	}
}

func TestDecompose(t *testing.T) {
	a := Default()
	if _, _, _, err := a.Decompose(-1); !errors.Is(err, ErrNegativeID) {
		t.Fatalf("Decompose(-1): got %v", err)
	}
	d, w, s, err := a.Decompose(1<<22 | 5<<12 | 7)
	if err != nil || d != 1 || w != 5 || s != 7 {
		t.Fatalf("got %d %d %d %v, want 1 5 7", d, w, s, err)
	}
}

func TestAllocateDoesNotAllocate(t *testing.T) {
	a := Default()
	allocs := testing.AllocsPerRun(1000, func() {
		id, _ := a.Allocate(12345, 67, 89)
		_, _, _, _ = a.Decompose(id)
	})
	if allocs != 0 {
		t.Fatalf("got %v allocations per call, want 0", allocs)
	}
}

func FuzzAllocateDecompose(f *testing.F) {
	f.Add(uint8(41), uint8(10), int64(0), int64(0), int64(0))
	f.Add(uint8(41), uint8(10), int64(1<<41-1), int64(1023), int64(4095))
	f.Add(uint8(1), uint8(1), int64(1), int64(1), int64(1<<61-1))
	f.Add(uint8(30), uint8(3), int64(-5), int64(9), int64(1<<40))
	f.Fuzz(func(t *testing.T, tsBits, wBits uint8, delta, worker, seq int64) {
		ts, w := int(tsBits%62)+1, int(wBits%62)+1
		s := TotalBits - ts - w
		a, err := New(ts, w, s)
		if s < 1 {
			if err == nil {
				t.Fatalf("New(%d,%d,%d) accepted a zero-width field", ts, w, s)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		id, err := a.Allocate(delta, worker, seq)
		valid := delta >= 0 && delta <= a.MaxDelta() && worker >= 0 && worker <= a.MaxWorker() &&
			seq >= 0 && seq <= a.MaxSequence()
		if valid != (err == nil) {
			t.Fatalf("Allocate(%d,%d,%d) on %s: err=%v, valid=%v", delta, worker, seq, a, err, valid)
		}
		if !valid {
			return
		}
		if id < 0 {
			t.Fatalf("negative id %d", id)
		}
		gd, gw, gs, err := a.Decompose(id)
		if err != nil || gd != delta || gw != worker || gs != seq {
			t.Fatalf("round trip on %s: got %d/%d/%d %v, want %d/%d/%d", a, gd, gw, gs, err, delta, worker, seq)
		}
	})
}

func ExampleBitsAllocator_Allocate() {
	a := Default()
	id, _ := a.Allocate(1000, 7, 3)
	delta, worker, seq, _ := a.Decompose(id)
	fmt.Println(id, delta, worker, seq)
	// Output: 4194332675 1000 7 3
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"1", 1, false},
		{"9223372036854775807", 1<<63 - 1, false},
		{"123456789012345678", 123456789012345678, false},
		{"0", 0, false},
		{"", 0, true},
		{"9223372036854775808", 0, true},
		{"-1", 0, true},
		{"+1", 0, true},
		{"01", 0, true},
		{" 1", 0, true},
		{"1 ", 0, true},
		{"1e3", 0, true},
		{"0x10", 0, true},
		{"12345678901234567890", 0, true},
		{"１", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseID(tt.in)
		if tt.err {
			if !errors.Is(err, ErrIDSyntax) {
				t.Errorf("ParseID(%q): got %v, %v; want ErrIDSyntax", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseID(%q): got %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}
