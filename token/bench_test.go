package token_test

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	. "github.com/snowtoken/snowtoken/token"
)

func BenchmarkIssue(b *testing.B) {
	e := newEnv(b, Options{})
	c := e.clients["svc"]
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Issue(ctx, c, IssueRequest{ExpiresIn: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIssueOpaque is BenchmarkIssue for a client of token_format
// opaque: no signature, one script.
func BenchmarkIssueOpaque(b *testing.B) {
	e := newOpaqueEnv(b, Options{}, false)
	c := e.clients["osvc"]
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Issue(ctx, c, IssueRequest{ExpiresIn: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	e := newEnv(b, Options{})
	ctx := b.Context()
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = e.issue(b, e.svc, "svc", IssueRequest{ExpiresIn: 10 * time.Minute}).AccessToken
	}

	// hot: the same token again and again, so the signature check is cached.
	b.Run("hot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.svc.Validate(ctx, tokens[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	// opaque: distinct opaque tokens; there is nothing to verify and
	// nothing cached, every call reads the record, the marker and the
	// client key in one script.
	b.Run("opaque", func(b *testing.B) {
		e := newOpaqueEnv(b, Options{}, false)
		opaque := make([]string, 1000)
		for i := range opaque {
			opaque[i] = e.issue(b, e.svc, "osvc", IssueRequest{ExpiresIn: 10 * time.Minute}).AccessToken
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := e.svc.Validate(ctx, opaque[i%len(opaque)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	// cold: distinct tokens through a service without the cache, so every
	// call checks a signature.
	b.Run("cold", func(b *testing.B) {
		svc := e.newService(b, e.keys, e.ids, Options{CacheSize: CacheOff})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := svc.Validate(ctx, tokens[i%len(tokens)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// liveLog is a Revocations that says every token is live: the cost of
// validation itself when the log decides.
type liveLog struct{}

func (liveLog) Mark() LogMark                         { return 1 }
func (liveLog) Decide(time.Time, LogQuery) LogVerdict { return LogLive }

// BenchmarkValidateFromLog is BenchmarkValidate's hot token, JWT and
// opaque, decided from a log that says it is live (Options.Revocations):
// no Redis command at all.
func BenchmarkValidateFromLog(b *testing.B) {
	e := newEnv(b, Options{Revocations: liveLog{}})
	ctx := b.Context()
	for _, client := range []string{"svc", "osvc"} {
		raw := e.issue(b, e.svc, client, IssueRequest{ExpiresIn: 10 * time.Minute}).AccessToken
		name := map[string]string{"svc": "hot", "osvc": "hot opaque"}[client]
		b.Run(name, func(b *testing.B) {
			if _, err := e.svc.Validate(ctx, raw); err != nil { // an opaque token's first reads Redis
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.svc.Validate(ctx, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerdict is BenchmarkValidateFromLog's hot tokens through the
// whole verdict, presented as Bearer: the client's standing and the
// binding cost a map lookup and no allocation.
func BenchmarkVerdict(b *testing.B) {
	e := newEnv(b, Options{Revocations: liveLog{}})
	cs := verdictClients(b, false)
	ctx := b.Context()
	for _, client := range []string{"svc", "osvc"} {
		req := Request{Token: e.issue(b, e.svc, client, IssueRequest{ExpiresIn: 10 * time.Minute}).AccessToken, Scheme: Bearer}
		name := map[string]string{"svc": "hot", "osvc": "hot opaque"}[client]
		b.Run(name, func(b *testing.B) {
			if _, err := e.svc.Verdict(ctx, cs, req); err != nil { // an opaque token's first reads Redis
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.svc.Verdict(ctx, cs, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// usedMemory returns used_memory of INFO memory.
func usedMemory(tb testing.TB, r *redistest.Redis) int64 {
	tb.Helper()
	info, err := r.Client.Info(tb.Context(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// TestRedisMemoryPerSession measures what one session record costs a real
// Redis, for each token format: the used_memory delta of issuing 20,000
// tokens, divided. It is not timed. The keys carry the test's prefix, longer
// than the default "st:".
func TestRedisMemoryPerSession(t *testing.T) {
	if !redistest.Real() {
		t.Skipf("needs a real Redis: set %s", redistest.EnvURL)
	}
	for _, tc := range []struct {
		format, client string
		maxBytes       float64
	}{
		{FormatJWT, "gateway", 160},
		// The record holds the claims and the secret's hash besides the
		// marker: 240 bytes alone on a Redis, up to 27 more when the main
		// table's resize falls within the 20,000 (on a Redis other tests
		// fill as well).
		{FormatOpaque, "ogateway", 280},
	} {
		t.Run(tc.format, func(t *testing.T) {
			e := newOpaqueEnv(t, Options{}, false)
			measureSessions(t, e, tc.client, tc.maxBytes, func(sub string, id snowflakealg.ID) string {
				if tc.format == FormatOpaque {
					return e.opaqueKey(id)
				}
				return e.sessionKey(sub, id)
			})
		})
	}
}

// measureSessions issues 20,000 tokens of client for five subjects and
// fails tb if one costs Redis more than maxBytes; key names a token's record.
func measureSessions(t *testing.T, e *env, client string, maxBytes float64, key func(sub string, id snowflakealg.ID) string) {
	const sessions = 20_000
	subjects := []string{"alice", "bob", "carol", "dave", "erin"}
	c := e.clients[client]
	ctx := context.Background()

	// Warm up: load the script, open the connections.
	warm := e.issue(t, e.svc, client, IssueRequest{Subject: "warmup", ExpiresIn: time.Minute})
	keys := []string{key("warmup", warm.ID)}
	t.Cleanup(func() { deleteKeys(t, e.redis, keys) })

	before := usedMemory(t, e.redis)
	const workers = 8
	issued := make([][]string, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sessions; i += workers {
				sub := subjects[i%len(subjects)]
				iss, err := e.svc.Issue(ctx, c, IssueRequest{Subject: sub, ExpiresIn: 10 * time.Minute})
				if err != nil {
					errs <- err
					return
				}
				issued[w] = append(issued[w], key(sub, iss.ID))
			}
		})
	}
	wg.Wait()
	close(errs)
	for _, k := range issued {
		keys = append(keys, k...)
	}
	for err := range errs {
		t.Fatal(err)
	}
	after := usedMemory(t, e.redis)

	perSession := float64(after-before) / sessions
	sample := keys[len(keys)/2]
	usage, err := e.redis.Client.MemoryUsage(ctx, sample).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Redis memory per session: %.1f bytes (used_memory %d -> %d over %d sessions); MEMORY USAGE of %q (%d bytes long) = %d",
		perSession, before, after, sessions, sample, len(sample), usage)
	if perSession > maxBytes {
		t.Errorf("a session record costs %.1f bytes of Redis memory, want at most %.0f", perSession, maxBytes)
	}
}

// deleteKeys removes keys in batches.
func deleteKeys(tb testing.TB, r *redistest.Redis, keys []string) {
	tb.Helper()
	ctx := context.Background()
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := r.Client.Del(ctx, keys[:n]...).Err(); err != nil {
			tb.Error(fmt.Errorf("cleaning up: %w", err))
			return
		}
		keys = keys[n:]
	}
}

// TestRedisMemoryPerLogEntry measures what one entry of the revocation log
// costs a real Redis: 20,000 revocations of tokens through RevokeToken, as
// MEMORY USAGE of the Stream (SAMPLES 0: every node), and what a token's
// revocation costs with its dedupe key (which lives until the token's exp
// and three leeways) as the used_memory delta, with the revoked records
// written again so that only the log and the dedupe keys differ.
// docs/redis.md quotes the figures.
func TestRedisMemoryPerLogEntry(t *testing.T) {
	if !redistest.Real() {
		t.Skipf("needs a real Redis: set %s", redistest.EnvURL)
	}
	const entries, maxBytes, maxWithDedupe = 20_000, 40, 230
	e := newEnv(t, Options{})
	ctx := context.Background()
	exp := e.clock.Now().Add(time.Hour).Unix()
	keys, jtis := make([]string, entries), make([]string, entries)
	for i := range entries {
		id, err := e.ids.NextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		jtis[i] = id.String()
		keys[i] = e.opaqueKey(id)
	}
	t.Cleanup(func() {
		deleteKeys(t, e.redis, keys)
		seen := make([]string, len(jtis))
		for i, jti := range jtis {
			seen[i] = e.seenKey(jti)
		}
		deleteKeys(t, e.redis, seen)
	})
	records := func() {
		pipe := e.redis.Client.Pipeline()
		for _, k := range keys {
			pipe.Set(ctx, k, "1", time.Hour)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	records()
	if err := e.store.RevokeOpaque(ctx, jtis[0], exp); err != nil { // load the script
		t.Fatal(err)
	}
	records()
	if err := e.redis.Client.Del(ctx, e.store.LogKey(), e.seenKey(jtis[0])).Err(); err != nil {
		t.Fatal(err)
	}
	before := usedMemory(t, e.redis)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < entries; i += workers {
				if err := e.store.RevokeOpaque(ctx, jtis[i], exp); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	records()
	after := usedMemory(t, e.redis)
	n, err := e.redis.Client.XLen(ctx, e.store.LogKey()).Result()
	if err != nil || n != entries {
		t.Fatalf("XLEN %d, %v; want %d", n, err, entries)
	}
	usage, err := e.redis.Client.MemoryUsage(ctx, e.store.LogKey(), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	seen, err := e.redis.Client.MemoryUsage(ctx, e.seenKey(jtis[1])).Result()
	if err != nil {
		t.Fatal(err)
	}
	perEntry, perDelta := float64(usage)/entries, float64(after-before)/entries
	t.Logf("Redis memory per revocation log entry: MEMORY USAGE %s SAMPLES 0 = %d over %d entries: %.1f bytes; "+
		"with the dedupe key (MEMORY USAGE %d, %d bytes long), used_memory %d -> %d: %.1f bytes",
		e.store.LogKey(), usage, entries, perEntry, seen, len(e.seenKey(jtis[1])), before, after, perDelta)
	if perEntry > maxBytes {
		t.Errorf("a log entry costs %.1f bytes of Redis memory, want at most %d", perEntry, maxBytes)
	}
	if perDelta > maxWithDedupe {
		t.Errorf("a token's revocation costs %.1f bytes of Redis memory with its dedupe key, want at most %d", perDelta, maxWithDedupe)
	}
}
