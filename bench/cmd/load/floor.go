package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"runtime"
	"syscall"
	"time"
)

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
