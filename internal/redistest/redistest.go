// Package redistest gives tests a Redis: the real redis-server named by
// SNOWTOKEN_TEST_REDIS_URL when it is set (CI sets it), else an embedded
// miniredis. Tests that share a real Redis keep apart by key prefix, never by
// FLUSHDB.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the variable that points tests at a real Redis.
const EnvURL = "SNOWTOKEN_TEST_REDIS_URL"

// EnvRequireServer, when 1, makes a missing redis-server binary a failure of
// the tests that run a redis-server of their own (NewServer,
// NewDurableServer, NewConfiguredServer) instead of a skip or a miniredis;
// CI sets it. It is apart from EnvURL: a Redis at EnvURL may run in a
// container, on a machine with no redis-server binary.
const EnvRequireServer = "SNOWTOKEN_TEST_REQUIRE_REDIS_SERVER"

// Redis is a Redis for one test.
type Redis struct {
	Client redis.UniversalClient
	// Prefix is unique to this test; use it for every key.
	Prefix string
	// Mini is the embedded server, nil on a real Redis. Tests that move
	// time use it (FastForward) and skip the part on a real Redis.
	Mini *miniredis.Miniredis
}

// New returns a Redis for tb, closed when tb ends.
func New(tb testing.TB) *Redis {
	tb.Helper()
	r := &Redis{Prefix: "test:" + randomHex(tb) + ":"}
	if url := os.Getenv(EnvURL); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			tb.Fatalf("%s: %v", EnvURL, err)
		}
		r.Client = redis.NewClient(opt)
		// The server is shared and some keys never expire: delete this
		// test's keys when it ends.
		tb.Cleanup(func() {
			// A client of its own: the test may have closed r.Client.
			c := redis.NewClient(opt)
			defer c.Close()
			ctx := context.Background()
			iter := c.Scan(ctx, 0, r.Prefix+"*", 100).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			if err := iter.Err(); err != nil {
				tb.Errorf("deleting the test's keys: %v", err)
			}
		})
	} else {
		r.Mini = miniredis.RunT(tb)
		r.Client = redis.NewClient(&redis.Options{Addr: r.Mini.Addr()})
	}
	tb.Cleanup(func() { r.Client.Close() })
	return r
}

// Real reports whether the tests run against a real redis-server.
func Real() bool { return os.Getenv(EnvURL) != "" }

func randomHex(tb testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Server is a Redis a test may stop and start again, to see what the code
// does while Redis is down: a redis-server process of its own when the
// binary is installed, else a miniredis.
type Server struct {
	Addr    string
	tb      testing.TB
	cmd     *exec.Cmd
	mini    *miniredis.Miniredis
	dir     string
	durable bool     // append-only file, fsynced on every write
	args    []string // more redis-server arguments (NewConfiguredServer)
}

// NewServer starts a Server, stopped when tb ends.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb}
	if _, err := exec.LookPath("redis-server"); err == nil {
		s.dir = tb.TempDir()
		s.Addr = freeAddr(tb)
	} else {
		if os.Getenv(EnvRequireServer) == "1" {
			tb.Fatalf("%s=1 but redis-server is not on PATH", EnvRequireServer)
		}
		s.mini = miniredis.NewMiniRedis()
	}
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

// NewDurableServer starts a redis-server with an append-only file fsynced
// on every write (--appendonly yes --appendfsync always) in a directory of
// its own: every write Redis acknowledged survives Stop, and Start loads it
// again. It skips the test without the redis-server binary (and fails it
// when EnvRequireServer is 1).
func NewDurableServer(tb testing.TB) *Server {
	tb.Helper()
	return newRealServer(tb, &Server{durable: true})
}

// NewConfiguredServer starts a redis-server of the test's own with more
// arguments, such as "--maxmemory", "2mb", "--maxmemory-policy",
// "allkeys-lru": what a test of real eviction or a real configuration
// needs, which miniredis does not have. It skips the test without the
// redis-server binary (and fails it when EnvRequireServer is 1).
func NewConfiguredServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return newRealServer(tb, &Server{args: args})
}

// newRealServer starts s as a redis-server in a directory of its own, or
// skips the test without the binary (fails it when EnvRequireServer is 1).
func newRealServer(tb testing.TB, s *Server) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(EnvRequireServer) == "1" {
			tb.Fatalf("%s=1 but redis-server is not on PATH", EnvRequireServer)
		}
		tb.Skipf("needs redis-server on PATH (set %s=1 to make this a failure)", EnvRequireServer)
	}
	s.tb, s.dir, s.Addr = tb, tb.TempDir(), freeAddr(tb)
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start starts the server (again) on the same address; its data is gone,
// unless it is durable (NewDurableServer).
func (s *Server) Start() {
	s.tb.Helper()
	if s.mini != nil {
		if !s.durable {
			s.mini.FlushAll() // as a restarted redis-server without AOF: empty
		}
		addr := s.Addr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		if err := s.mini.StartAddr(addr); err != nil {
			s.tb.Fatal(err)
		}
		s.Addr = s.mini.Addr()
		return
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	aof := []string{"--appendonly", "no"}
	if s.durable {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	s.cmd = exec.Command("redis-server", append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")}, append(aof, s.args...)...)...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(s.tb.Context()).Err() != nil {
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on %s did not start", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server at once, as a crash would.
func (s *Server) Stop() {
	if s.mini != nil {
		s.mini.Close()
		return
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://%s/0", s.Addr) }

// Signal sends sig to the redis-server process: syscall.SIGSTOP freezes it
// as a stalled host would (connections stay open, nothing answers),
// SIGCONT lets it go on. It fails the test on a miniredis.
func (s *Server) Signal(sig os.Signal) {
	s.tb.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		s.tb.Fatal("redistest: Signal needs a running redis-server")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatal(err)
	}
}

// Dir is a redis-server's working directory (its snapshots and log); "" for a miniredis.
func (s *Server) Dir() string { return s.dir }

// Port is the server's TCP port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	s.tb.Cleanup(func() { c.Close() })
	return c
}
