package main

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// A row's floor is the least server CPU per request that its work needs,
// measured on this machine in the same round (issue 16): the bare handler's
// server CPU per request, plus one Ed25519 signature for a JWT issued, or
// one verification for a JWT never seen before. Redis's own CPU is not in
// it (each table shows Redis CPU per request beside it).
const (
	floorBare   = "bare"
	floorSign   = "bare + sign"
	floorVerify = "bare + verify"
)

// floors are the floors of one round, by name, from its bare handler's
// server CPU per request and its Ed25519 costs (ed25519Cost).
func floors(bare, sign, verify time.Duration) map[string]time.Duration {
	return map[string]time.Duration{floorBare: bare, floorSign: bare + sign, floorVerify: bare + verify}
}

// vsFloor is server CPU per request ÷ floor, with issue 16's target for
// the row beside it, as "1.52× (≤1.6)"; target 0 means none.
func vsFloor(cpu, floor time.Duration, target float64) string {
	s := fmt.Sprintf("%.2f×", float64(cpu)/float64(floor))
	if target > 0 {
		s += fmt.Sprintf(" (≤%g)", target)
	}
	return s
}

// us formats d in microseconds, as every table prints CPU per request.
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", micros(d)) }

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ed25519Cost is the CPU time of one Ed25519 signature and one verification
// of a message the size of a token's signing input, on a thread of this
// process (getrusage RUSAGE_THREAD, Linux).
func ed25519Cost() (sign, verify time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := make([]byte, 300)
	rand.Read(msg)
	sig := ed25519.Sign(priv, msg)
	const n = 2000
	measure := func(f func()) time.Duration {
		before := threadCPU()
		for range n {
			f()
		}
		return (threadCPU() - before) / n
	}
	sign = measure(func() { ed25519.Sign(priv, msg) })
	verify = measure(func() {
		if !ed25519.Verify(pub, msg, sig) {
			panic("ed25519: own signature did not verify")
		}
	})
	return sign, verify
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, Linux
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// median is the middle of xs; it sorts xs.
func median[T cmp.Ordered](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// roundsBy is the rounds 0 to n-1 in the order of compare: its middle is the
// median round.
func roundsBy(n int, compare func(a, b int) int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, compare)
	return order
}
