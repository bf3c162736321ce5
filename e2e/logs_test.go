package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
)

// TestLogsJSONOnlyInRedisOutage runs the real issuer on a real redis-server
// at debug level, kills Redis while clients keep asking, long enough for the
// lease's renewals and go-redis's own dials to fail, starts it again, stops
// the issuer with SIGTERM, and then parses every line the process wrote to
// stdout and stderr as a JSON object: go-redis's lines included, and
// durations written as Go duration strings, not as integers of nanoseconds.
func TestLogsJSONOnlyInRedisOutage(t *testing.T) {
	srv := redistest.NewDurableServer(t)
	p := startIssuer(t, issuerOpts{redis: srv.URL(), env: []string{"SNOWTOKEN_WORKER_ID", "41", "SNOWTOKEN_LOG_LEVEL", "debug"}})
	creds := p.creds
	tok := p.issue(t, creds.svc, "")

	srv.Stop()
	// Past the lease's TTL (fleetLeaseTTL), so that its renewals fail too.
	for end := time.Now().Add(fleetLeaseTTL + time.Second); time.Now().Before(end); {
		if status, _, _ := fleetCall(t, http.MethodGet, p.url("/token/validate"), nil, tok.AccessToken, nil); status != http.StatusServiceUnavailable {
			t.Errorf("validate with Redis down: %d, want 503", status)
		}
		p.tryIssue(t, creds.svc, "")
		time.Sleep(20 * time.Millisecond)
	}
	srv.Start()
	waitReady(t, p.url("/readyz"), fleetWait)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.exited(t); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}

	msgs := map[string]map[string]any{}
	var notJSON int
	for line := range strings.Lines(p.out.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			if notJSON++; notJSON <= 5 {
				t.Errorf("not a JSON object: %q (%v)", line, err)
			}
			continue
		}
		if msg, _ := rec["msg"].(string); msgs[msg] == nil {
			msgs[msg] = rec
		}
	}
	if notJSON > 5 {
		t.Errorf("%d lines in all are not JSON objects", notJSON)
	}
	for _, msg := range []string{"redis client", "unavailable", "lease: renewal failed", "stopped"} {
		if msgs[msg] == nil {
			t.Errorf("no %q record: the outage did not make the lines the test is about", msg)
		}
	}
	drain, ok := msgs["shutting down: draining"]["drain"].(string)
	if _, err := time.ParseDuration(drain); !ok || err != nil {
		t.Errorf("drain %v in %v, want a Go duration string", msgs["shutting down: draining"]["drain"], msgs["shutting down: draining"])
	}
}
