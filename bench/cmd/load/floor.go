package main

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// A row's floor is the least server CPU per request that its work needs,
// measured on this machine in the same round: the bare handler's
// server CPU per request, plus one Ed25519 signature for a JWT issued, or
// one verification for a JWT never seen before, or one verification of a
// DPoP proof's algorithm, Ed25519 or ECDSA P-256, and both a
// signature and a verification for a token issued against a DPoP proof.
// A private_key_jwt issue's floor is the secret-based JWT issue row's
// server CPU per request in the same round, plus one Ed25519 verification
// (of the client assertion). Redis's own CPU is not in it (each
// table shows Redis CPU per request beside it).
const (
	floorBare         = "bare"
	floorSign         = "bare + sign"
	floorVerify       = "bare + verify"
	floorVerifyES256  = "bare + ES256 verify"
	floorSignAndProof = "bare + sign + verify"
	floorIssueVerify  = "secret issue + verify"
)

// sigCosts are the CPU times of one signature operation of each kind that a
// floor counts, measured in this process (signatureCosts).
type sigCosts struct {
	sign, verify time.Duration // Ed25519
	verifyES256  time.Duration // ECDSA P-256 with SHA-256, as a JWS ES256
}

// floors are the floors of one round, by name, from its bare handler's
// server CPU per request, the secret-based JWT issue row's (jwtIssueName;
// 0: the round has none, nor floorIssueVerify) and its signature costs
// (signatureCosts).
func floors(bare, secretIssue time.Duration, c sigCosts) map[string]time.Duration {
	fl := map[string]time.Duration{floorBare: bare, floorSign: bare + c.sign, floorVerify: bare + c.verify,
		floorVerifyES256: bare + c.verifyES256, floorSignAndProof: bare + c.sign + c.verify}
	if secretIssue > 0 {
		fl[floorIssueVerify] = secretIssue + c.verify
	}
	return fl
}

// floorOf is floor's value among fl (floors); a floor the round lacks,
// such as floorIssueVerify in a round with no secret-based issue row, is
// an error, not a floor of zero.
func floorOf(fl map[string]time.Duration, name, floor string) (time.Duration, error) {
	f, ok := fl[floor]
	if !ok {
		return 0, fmt.Errorf("%s: its floor %q has no row to measure it from in this round", name, floor)
	}
	return f, nil
}

// roundFloors is the floor of each of n rows in one round, from its rows
// (row(i): name, floor name and server CPU per request in the round), the
// bare handler's first, and the round's signature costs c.
func roundFloors(n int, row func(i int) (name, floor string, cpu time.Duration), c sigCosts) ([]time.Duration, error) {
	var bare, secretIssue time.Duration
	for i := range n {
		name, _, cpu := row(i)
		if i == 0 {
			bare = cpu
		}
		if name == jwtIssueName {
			secretIssue = cpu
		}
	}
	fl := floors(bare, secretIssue, c)
	out := make([]time.Duration, n)
	for i := range n {
		name, floor, _ := row(i)
		f, err := floorOf(fl, name, floor)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// medianCosts is each cost's median over rounds, cost by cost.
func medianCosts(rounds []sigCosts) sigCosts {
	pick := func(f func(sigCosts) time.Duration) time.Duration {
		xs := make([]time.Duration, len(rounds))
		for i, c := range rounds {
			xs[i] = f(c)
		}
		return median(xs)
	}
	return sigCosts{sign: pick(func(c sigCosts) time.Duration { return c.sign }),
		verify:      pick(func(c sigCosts) time.Duration { return c.verify }),
		verifyES256: pick(func(c sigCosts) time.Duration { return c.verifyES256 })}
}

// String is the costs as the tables' headings print them.
func (c sigCosts) String() string {
	return fmt.Sprintf("Ed25519 signature %s, verification %s; ES256 verification %s", us(c.sign), us(c.verify), us(c.verifyES256))
}

// vsFloor is server CPU per request ÷ floor, with the target for
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

// signatureCosts is the CPU time of one Ed25519 signature and one
// verification, and of one ES256 verification (the SHA-256 of the input and
// ecdsa.Verify, as client/dpop checks a proof), of a message the size of a
// token's or a proof's signing input, on a thread of this process
// (getrusage RUSAGE_THREAD, Linux).
func signatureCosts() sigCosts {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	msg := make([]byte, 300)
	rand.Read(msg)
	sig := ed25519.Sign(priv, msg)
	h := sha256.Sum256(msg)
	r, s, _ := ecdsa.Sign(rand.Reader, ec, h[:])
	const n = 2000
	measure := func(f func()) time.Duration {
		before := threadCPU()
		for range n {
			f()
		}
		return (threadCPU() - before) / n
	}
	var c sigCosts
	c.sign = measure(func() { ed25519.Sign(priv, msg) })
	c.verify = measure(func() {
		if !ed25519.Verify(pub, msg, sig) {
			panic("ed25519: own signature did not verify")
		}
	})
	c.verifyES256 = measure(func() {
		h := sha256.Sum256(msg)
		if !ecdsa.Verify(&ec.PublicKey, h[:], r, s) {
			panic("ecdsa: own signature did not verify")
		}
	})
	return c
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
