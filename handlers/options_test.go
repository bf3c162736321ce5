package handlers_test

import (
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/handlers"
)

// TestNegativeOptions: a negative bound is an error, never "none" or the
// default (zero is the default).
func TestNegativeOptions(t *testing.T) {
	e := newEnv(t)
	for name, o := range map[string]handlers.Options{
		"MaxBodyBytes": {MaxBodyBytes: -1},
		"ReadyTimeout": {ReadyTimeout: -time.Second},
	} {
		o.Service, o.Clients, o.IDs = e.Svc, e.Clients, e.IDs
		if _, err := handlers.NewServer(o); !errors.Is(err, handlers.ErrOptions) {
			t.Errorf("%s negative: %v, want ErrOptions", name, err)
		}
	}
	if _, err := handlers.NewServer(handlers.Options{Service: e.Svc, Clients: e.Clients, IDs: e.IDs}); err != nil {
		t.Errorf("zero options (the defaults): %v", err)
	}
}
