package redistest

import "testing"

func TestServerStopsAndStarts(t *testing.T) {
	s := NewServer(t)
	r := New(t)
	if err := r.Client.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("ping answered while stopped")
	}
	s.Start()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestRedisAtURLNeedsNoBinary: a Redis named by EnvURL may run in a
// container, on a machine with no redis-server binary; only
// EnvRequireServer makes the missing binary a failure.
func TestRedisAtURLNeedsNoBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvURL, "redis://127.0.0.1:1/0")
	t.Setenv(EnvRequireServer, "")
	var skipped bool
	t.Run("configured", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		NewConfiguredServer(t, "--maxmemory", "2mb")
	})
	if !skipped {
		t.Error("NewConfiguredServer without redis-server on PATH did not skip")
	}
	t.Run("server", func(t *testing.T) {
		if s := NewServer(t); s.mini == nil {
			t.Error("NewServer without redis-server on PATH: no miniredis in its place")
		}
	})
}
