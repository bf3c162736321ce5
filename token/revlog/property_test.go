package revlog

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// TestPropertyNoLiveAfterThreshold drives random interleavings of
// revocations of the three kinds, Redis checks, faults (a killed
// connection, a loss of entries with the epoch kept, FLUSHALL) and
// decisions on three followers of one real Redis, and checks the rule of
// the package: once a revocation answered at t, no follower says LogLive
// for a token it covers at any time after t + Threshold, whatever mark the
// token was checked at before it. And each follower is fresh again once the
// faults stop. The followers' clocks are 10 s apart (one ahead, one
// behind): freshness is each one's own. The seed is in the log of a
// failure.
func TestPropertyNoLiveAfterThreshold(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of random steps")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	rg, _ := serverRig(t, Options{}) // its own redis-server: FLUSHALL
	ctx := t.Context()
	followers := []*Follower{rg.f}
	skew := []time.Duration{0, 10 * time.Second, -10 * time.Second}
	for _, d := range skew[1:] {
		f, err := New(rg.client(), rg.store.LogKey(), Options{Now: func() time.Time { return time.Now().Add(d) }})
		if err != nil {
			t.Fatal(err)
		}
		followers = append(followers, f)
	}
	rg.stopW = rg.runWriter()
	for _, f := range followers {
		goRun(t, f.Run)
	}
	for _, f := range followers {
		eventually(t, 5*time.Second, "fresh", func() bool { return f.Fresh(f.opts.Now()) })
	}

	// tok is a token: its query, with the mark of a Redis check made
	// before any revocation of it (the most a validator can hold).
	type tok struct {
		q       token.LogQuery
		revoked time.Time // when a revocation covering it answered; zero: none
	}
	var toks []*tok
	newTok := func() *tok {
		n := len(toks)
		tk := &tok{q: token.LogQuery{JTI: strconv.Itoa(1000 + n), Subject: "s" + strconv.Itoa(n%7),
			Client: "c" + strconv.Itoa(n%5), Issued: time.Now().UnixMilli(), Checked: followers[rnd.IntN(3)].Mark()}}
		toks = append(toks, tk)
		return tk
	}
	revoked := func(match func(*tok) bool) {
		at := time.Now()
		for _, tk := range toks {
			if match(tk) && tk.revoked.IsZero() {
				tk.revoked = at
			}
		}
	}
	check := func(step string) {
		now := time.Now()
		for _, tk := range toks {
			if tk.revoked.IsZero() || now.Sub(tk.revoked) <= DefaultThreshold {
				continue
			}
			for i, f := range followers {
				if v := f.Decide(f.opts.Now(), tk.q); v == token.LogLive {
					t.Fatalf("seed %d, after %s: follower %d says LogLive for %+v, revoked %v ago", seed, step, i, tk.q, now.Sub(tk.revoked))
				}
			}
		}
	}
	for i := range 300 {
		var step string
		switch r := rnd.IntN(100); {
		case r < 30:
			step = "issue"
			newTok()
		case r < 55 && len(toks) > 0:
			tk := toks[rnd.IntN(len(toks))]
			step = "revoke token " + tk.q.JTI
			rg.revokeToken(t, tk.q.Subject, tk.q.JTI, time.Now().Add(time.Hour).Unix())
			revoked(func(x *tok) bool { return x == tk })
		case r < 70 && len(toks) > 0:
			sub := toks[rnd.IntN(len(toks))].q.Subject
			step = "revoke subject " + sub
			rg.revokeSubject(t, sub)
			revoked(func(x *tok) bool { return x.q.Subject == sub })
		case r < 80 && len(toks) > 0:
			c := toks[rnd.IntN(len(toks))].q.Client
			step = "revoke client " + c
			if err := rg.store.RevokeClient(ctx, c, time.Now().Add(token.DefaultLeeway)); err != nil {
				t.Fatal(err)
			}
			revoked(func(x *tok) bool { return x.q.Client == c })
		case r < 90:
			step = "wait"
			time.Sleep(time.Duration(rnd.IntN(150)) * time.Millisecond)
		case r < 95:
			step = "client kill"
			if err := rg.rdb.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err != nil {
				t.Fatal(err)
			}
		case r < 98:
			step = "entries lost"
			dump, err := rg.rdb.Dump(ctx, rg.store.LogKey()).Result()
			if err != nil {
				continue // no log yet
			}
			if len(toks) > 0 {
				tk := toks[rnd.IntN(len(toks))]
				rg.revokeToken(t, tk.q.Subject, tk.q.JTI, time.Now().Add(time.Hour).Unix())
				revoked(func(x *tok) bool { return x == tk })
			}
			time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond)
			if err := rg.rdb.RestoreReplace(ctx, rg.store.LogKey(), 0, dump).Err(); err != nil {
				t.Fatal(err)
			}
		default:
			step = "flushall"
			if err := rg.rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprintf("step %d (%s)", i, step))
		time.Sleep(time.Duration(rnd.IntN(5)) * time.Millisecond)
		check(fmt.Sprintf("step %d (%s) + a moment", i, step))
	}
	time.Sleep(2 * DefaultThreshold)
	check("the end")
	for i, f := range followers {
		eventually(t, 10*time.Second, fmt.Sprintf("follower %d fresh again", i), func() bool { return f.Fresh(f.opts.Now()) })
	}
}
