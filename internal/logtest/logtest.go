// Package logtest collects what a test's code under test writes (a
// process's output, a slog handler's JSON lines) safely from any goroutine,
// and reads back the JSON log records.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer safe for concurrent use. The zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Records returns every JSON log record written so far. A line that is not
// a JSON object fails tb: the log is JSON only.
func (l *Buffer) Records(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			tb.Fatalf("log line %q is not a JSON object: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// Events returns the JSON log records written so far whose "event" is
// name. A line that is not a JSON object fails tb.
func (l *Buffer) Events(tb testing.TB, name string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, rec := range l.Records(tb) {
		if rec["event"] == name {
			out = append(out, rec)
		}
	}
	return out
}
