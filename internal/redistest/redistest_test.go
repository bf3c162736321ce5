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
