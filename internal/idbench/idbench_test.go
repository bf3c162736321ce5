package idbench

import "testing"

// TestMsCountsSplit: the milliseconds strictly between the first and the last
// with an ID are split into full, short and empty ones; counts merged from
// several goroutines add up; IDs before the base are not counted.
func TestMsCountsSplit(t *testing.T) {
	a, b := msCounts{base: 100}, msCounts{base: 100}
	for range 4096 {
		a.add(101) // the first: not counted
	}
	for range 2048 {
		a.add(102)
		b.add(102) // with a's, full
	}
	b.add(103) // short
	// 104 and 105 empty
	b.add(106) // short
	b.add(107) // the last: not counted
	b.add(99)  // before the base
	a.merge(&b)
	empty, short, ok := a.split(4096)
	if !ok || empty != 2.0/5 || short != 2.0/5 {
		t.Fatalf("split: %v empty, %v short, %v; want 0.4, 0.4, true", empty, short, ok)
	}
	if _, _, ok := (&msCounts{n: []int64{0, 5, 5}}).split(4096); ok {
		t.Error("two milliseconds: nothing between them, want ok false")
	}
}
