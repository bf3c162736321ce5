package main

import (
	"strings"
	"testing"
)

// TestAddIDRound: each case's fractions (and its millisecond figures where it
// has them) are collected round by round under its name without the
// GOMAXPROCS suffix, in the order the cases ran; output without results, or a
// result without the fractions of the limit, is an error.
func TestAddIDRound(t *testing.T) {
	round := func(own, bw string) []byte {
		return []byte(`goos: linux
BenchmarkIDs/snowtoken/16goroutines-2   	 9832299	  244.5 ns/op	 4089000 IDs/s	 ` + own + ` frac_of_limit	 ` + own + ` frac_of_own_limit	 0.02 ms_empty	 0.001 ms_short	 0 B/op	 0 allocs/op
BenchmarkIDs/bwmarrin/16goroutines-2    	 9832299	  244.5 ns/op	 4089000 IDs/s	 ` + bw + ` frac_of_limit	 ` + bw + ` frac_of_own_limit	 0 B/op	 0 allocs/op
BenchmarkIDs/sonyflake/16goroutines-2   	   51000	  38955 ns/op	   25670 IDs/s	 0.0063 frac_of_limit	 1.003 frac_of_own_limit	 0 B/op	 0 allocs/op
PASS
`)
	}
	cases, err := addIDRound(nil, round("0.9990", "0.9950"))
	if err != nil {
		t.Fatal(err)
	}
	if cases, err = addIDRound(cases, round("0.8780", "0.9980")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		got = append(got, c.name)
	}
	if want := "snowtoken/16goroutines bwmarrin/16goroutines sonyflake/16goroutines"; strings.Join(got, " ") != want {
		t.Fatalf("cases %q, want %q", got, want)
	}
	if c := cases[0]; len(c.ofLimit) != 2 || c.ofLimit[0] != 0.999 || c.ofLimit[1] != 0.878 {
		t.Errorf("snowtoken: %v", c.ofLimit)
	}
	if c := cases[0]; len(c.msEmpty) != 2 || c.msEmpty[1] != 0.02 || c.msShort[0] != 0.001 {
		t.Errorf("snowtoken: ms empty %v, short %v", c.msEmpty, c.msShort)
	}
	if c := cases[2]; c.ofLimit[0] != 0.0063 || c.ofOwnLimit[1] != 1.003 || c.msEmpty != nil {
		t.Errorf("sonyflake: %v of the limit, %v of its own, ms empty %v", c.ofLimit, c.ofOwnLimit, c.msEmpty)
	}
	if got := percent(cases[0].msEmpty); got != "2.00%" {
		t.Errorf("percent: %q", got)
	}
	if _, err := addIDRound(nil, []byte("PASS\n")); err == nil {
		t.Error("output without results: no error")
	}
	if _, err := addIDRound(nil, []byte("BenchmarkIDs/snowtoken/1goroutine-2 100 244 ns/op\n")); err == nil {
		t.Error("a result without fractions: no error")
	}
}
