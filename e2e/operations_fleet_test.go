package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// TestOperationsOnTwoReplicas runs an operator's everyday changes on
// two replicas that share one Redis, one keys directory and one clients
// file, with the commands an operator runs, while loads issue at one replica
// and validate at the other (and at a consumer verifying locally): a client
// is added, its secret rotated, the signing key rotated, the clients file
// broken on purpose and mended, and the client disabled. No valid token is
// ever refused; the disabled client's tokens are refused by both replicas.
func TestOperationsOnTwoReplicas(t *testing.T) {
	bin := fleetBinary(t)
	redisURL, _ := fleetRedis(t)
	creds := newFleetCreds(t, bin)
	keysDir := filepath.Join(t.TempDir(), "keys")
	fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir, "-adopt", creds.keyPath)
	redis := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}
	a := fleet{bin, creds}.launch(t, replica{name: "a", ip: "127.0.0.42", redis: redis, env: []string{"SNOWTOKEN_SIGNING_KEYS", keysDir}})
	b := fleet{bin, creds}.launch(t, replica{name: "b", ip: "127.0.0.43", redis: redis, env: []string{"SNOWTOKEN_SIGNING_KEYS", keysDir}})
	for _, p := range []*issuer{a, b} {
		waitReady(t, p.url("/readyz"), fleetWait)
	}
	replicas := []*issuer{a, b}

	var offset atomic.Int64 // the consumer's clock: real time moved forward
	consumer, err := client.New(client.Options{
		IssuerURL: "http://" + a.addr, Issuer: fleetIssuer, Mode: client.Local, RevocationCheck: client.Skip,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	loads := []*reloadLoad{
		{p: a, at: b, c: creds.svc, consumer: consumer, hc: hc},
		{p: b, at: a, c: creds.svc, consumer: consumer, hc: hc},
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, l := range loads {
		wg.Go(func() { l.run(ctx) })
	}
	underLoad := func() {
		t.Helper()
		for _, l := range loads {
			l.waitChecks(t, 30)
		}
	}
	underLoad()
	reloads := 0
	// step makes a change and waits until both replicas have loaded it.
	step := func(change func()) {
		t.Helper()
		change()
		reloads++
		for _, p := range replicas {
			p.waitEvents(t, "config.reloaded", reloads)
		}
		underLoad()
	}

	// 1. A new client, with the command an operator runs.
	var ops fleetClient
	step(func() {
		out := fleetCommand(t, bin, "client", "new", "-file", creds.clientsPath, "-id", "ops", "-scopes", "read")
		ops = fleetClient{id: "ops", secret: secretIn(t, out)}
	})
	opsLoad := &reloadLoad{p: a, at: b, c: ops, consumer: consumer, hc: hc}
	loads = append(loads, opsLoad)
	opsCtx, opsStop := context.WithCancel(ctx)
	var opsDone sync.WaitGroup
	opsDone.Go(func() { opsLoad.run(opsCtx) })
	defer func() { opsStop(); opsDone.Wait() }()
	underLoad()

	// 2. Its secret rotated: the old one keeps working on both replicas
	// while the load moves to the new one.
	var rotated fleetClient
	step(func() {
		out := fleetCommand(t, bin, "client", "rotate-secret", "-file", creds.clientsPath, "-id", "ops")
		rotated = fleetClient{id: "ops", secret: secretIn(t, out)}
	})
	opsLoad.setClient(rotated) // once every replica knows it
	underLoad()
	for _, p := range replicas {
		p.issue(t, ops, "") // the previous secret
	}

	// 3. The signing key rotated: a next key, the publish delay (simulated),
	// then the next key signs and the old one verifies.
	step(func() { fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir) })
	step(func() {
		backdate(t, keysDir, keyset.PublishDelay)
		offset.Add(int64(keyset.PublishDelay))
	})
	step(func() { fleetCommand(t, bin, "keys", "rotate", "-dir", keysDir) })

	// 4. The clients file broken on purpose: both replicas refuse it and
	// serve on with the set in force; then it is mended, which is the set in
	// force again: nothing to reload.
	good, err := os.ReadFile(creds.clientsPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Replace(creds.clientsPath, good[:len(good)/2]); err != nil {
		t.Fatal(err)
	}
	for _, p := range replicas {
		p.waitEvents(t, "config.reload_refused", 1)
	}
	underLoad()
	if err := atomicfile.Replace(creds.clientsPath, good); err != nil {
		t.Fatal(err)
	}
	underLoad()

	// 5. The client disabled: its load stops first (its refusals are
	// expected, not false), then its tokens are refused everywhere.
	opsStop()
	opsDone.Wait()
	loads = loads[:len(loads)-1] // waited for no more
	held := a.issue(t, opsLoad.c, "")
	for _, p := range replicas {
		if status, _ := p.validate(t, held); status != http.StatusOK {
			t.Fatalf("%s: the ops token before disable: %d", p.name, status)
		}
	}
	step(func() { fleetCommand(t, bin, "client", "disable", "-file", creds.clientsPath, "-id", "ops") })
	for _, p := range replicas {
		if status, _ := p.validate(t, held); status != http.StatusUnauthorized {
			t.Errorf("%s: a disabled client's token: %d, want 401", p.name, status)
		}
	}

	stop()
	wg.Wait()
	var checks int64
	for _, l := range append(loads, opsLoad) {
		checks += l.checks.Load()
		if len(l.faults) > 0 {
			t.Errorf("%d valid tokens rejected, the first:\n%s", len(l.faults), strings.Join(l.faults, "\n"))
		}
	}
	t.Logf("%d validations across two replicas under %d reloads each", checks, reloads)
}
