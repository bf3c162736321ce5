package logsum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/clocktest"
)

// logged is one line the wrapped handler wrote.
type logged struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Err        string `json:"err"`
	Suppressed int64  `json:"suppressed"`
}

func (l logged) String() string {
	return fmt.Sprintf("%s %q err=%q suppressed=%d", l.Level, l.Msg, l.Err, l.Suppressed)
}

// newTest returns a Handler over a JSON handler, the clock it reads and a
// function returning the lines written so far.
func newTest(tb testing.TB, opts Options) (*Handler, *clocktest.Clock, func() []logged) {
	tb.Helper()
	var buf bytes.Buffer
	clock := clocktest.New(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	opts.Now = clock.Now
	h, err := New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return h, clock, func() []logged {
		var out []logged
		for line := range strings.Lines(buf.String()) {
			var l logged
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				tb.Fatalf("line %q: %v", line, err)
			}
			out = append(out, l)
		}
		return out
	}
}

// step is one record to log, after moving the clock by wait.
type step struct {
	wait  time.Duration
	level slog.Level
	msg   string
	err   error
}

func TestHandler(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	warn := func(msg string, err error) step { return step{level: slog.LevelWarn, msg: msg, err: err} }
	later := func(d time.Duration, s step) step { s.wait = d; return s }
	repeat := func(n int, s step) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name  string
		opts  Options
		steps []step
		want  []logged
	}{
		{
			name: "first logged, repeats counted, the next after the interval carries the count",
			steps: append(repeat(5, warn("unavailable", refused)),
				later(9*time.Second, warn("unavailable", refused)),
				later(time.Second, warn("unavailable", refused)),
				warn("unavailable", refused),
				later(10*time.Second, warn("unavailable", refused))),
			want: []logged{
				{"WARN", "unavailable", refused.Error(), 0},
				{"WARN", "unavailable", refused.Error(), 5},
				{"WARN", "unavailable", refused.Error(), 1},
			},
		},
		{
			name: "nothing repeated: no count",
			steps: []step{
				warn("unavailable", refused),
				later(DefaultInterval, warn("unavailable", refused)),
			},
			want: []logged{{"WARN", "unavailable", refused.Error(), 0}, {"WARN", "unavailable", refused.Error(), 0}},
		},
		{
			name: "digits do not make a kind: ports, addresses, durations",
			steps: []step{
				warn("unavailable", errors.New("read tcp 127.0.0.1:51234->127.0.0.1:6379: connection reset by peer")),
				warn("unavailable", errors.New("read tcp 127.0.0.1:40022->127.0.0.1:6379: connection reset by peer")),
				warn("http: Accept error: too many open files; retrying in 5ms", nil),
				warn("http: Accept error: too many open files; retrying in 10ms", nil),
				later(DefaultInterval, warn("unavailable", errors.New("read tcp 10.0.0.9:1->10.0.0.1:7000: connection reset by peer"))),
			},
			want: []logged{
				{"WARN", "unavailable", "read tcp 127.0.0.1:51234->127.0.0.1:6379: connection reset by peer", 0},
				{"WARN", "http: Accept error: too many open files; retrying in 5ms", "", 0},
				{"WARN", "unavailable", "read tcp 10.0.0.9:1->10.0.0.1:7000: connection reset by peer", 1},
			},
		},
		{
			name: "level, message and error text each make a kind",
			steps: []step{
				warn("unavailable", refused),
				warn("unavailable", errors.New("i/o timeout")),
				warn("not ready", refused),
				{level: slog.LevelError, msg: "unavailable", err: refused},
				warn("unavailable", refused),
			},
			want: []logged{
				{"WARN", "unavailable", refused.Error(), 0},
				{"WARN", "unavailable", "i/o timeout", 0},
				{"WARN", "not ready", refused.Error(), 0},
				{"ERROR", "unavailable", refused.Error(), 0},
			},
		},
		{
			name:  "below the level every record passes",
			steps: repeat(3, step{level: slog.LevelInfo, msg: "claimed"}),
			want:  []logged{{"INFO", "claimed", "", 0}, {"INFO", "claimed", "", 0}, {"INFO", "claimed", "", 0}},
		},
		{
			name:  "the level is an option",
			opts:  Options{Level: slog.LevelInfo, Interval: time.Minute},
			steps: append(repeat(3, step{level: slog.LevelInfo, msg: "claimed"}), later(time.Minute, step{level: slog.LevelInfo, msg: "claimed"})),
			want:  []logged{{"INFO", "claimed", "", 0}, {"INFO", "claimed", "", 2}},
		},
		{
			name: "past MaxKinds new kinds count as one until a kind's interval ends",
			opts: Options{MaxKinds: 2},
			steps: []step{
				warn("a", nil), warn("b", nil),
				warn("c", nil),                         // full: c opens the overflow kind
				warn("d", nil),                         // counted with c
				warn("a", nil),                         // counted with a
				later(DefaultInterval, warn("e", nil)), // a and b (and a's count) are forgotten: room for e
				warn("c", nil),                         // full again: the overflow kind's interval has ended
				warn("a", nil),                         // counted with the overflow kind
			},
			want: []logged{
				{"WARN", "a", "", 0}, {"WARN", "b", "", 0},
				{"WARN", "c", "", 0},
				{"WARN", "e", "", 0},
				{"WARN", "c", "", 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, clock, lines := newTest(t, tt.opts)
			log := slog.New(h)
			for _, s := range tt.steps {
				clock.Add(s.wait)
				var args []any
				if s.err != nil {
					args = append(args, "err", s.err)
				}
				log.Log(t.Context(), s.level, s.msg, args...)
			}
			got := lines()
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("lines:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestHandlerDerivedShareCounts checks that the loggers of With share the
// counts: a failure logged by several components is still one kind.
func TestHandlerDerivedShareCounts(t *testing.T) {
	h, clock, lines := newTest(t, Options{})
	base := slog.New(h)
	a, b := base.With("route", "/token"), base.With("route", "/token/validate")
	a.Warn("unavailable", "err", errors.New("refused"))
	b.Warn("unavailable", "err", errors.New("refused"))
	base.Warn("unavailable", "err", errors.New("refused"))
	clock.Add(DefaultInterval)
	b.Warn("unavailable", "err", errors.New("refused"))
	got := lines()
	if len(got) != 2 || got[0].Suppressed != 0 || got[1].Suppressed != 2 {
		t.Errorf("lines: got %v, want the first and one with suppressed=2", got)
	}
}

// TestHandlerCountsEveryRecord logs from many goroutines at once, the clock
// moving on, and checks that every record is either logged or counted in a
// line that was.
func TestHandlerCountsEveryRecord(t *testing.T) {
	const (
		goroutines = 16
		each       = 500
	)
	h, clock, lines := newTest(t, Options{Interval: time.Second})
	clock.SetStep(time.Millisecond)
	log := slog.New(h)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				log.Warn("unavailable", "err", fmt.Errorf("attempt %d: refused", g*each+i))
			}
		})
	}
	wg.Wait()
	clock.Add(time.Second)
	log.Warn("unavailable", "err", errors.New("attempt 0: refused"))
	got := lines()
	total := int64(0)
	for _, l := range got {
		total += 1 + l.Suppressed
	}
	if want := int64(goroutines*each + 1); total != want {
		t.Errorf("%d lines with %d records between them, want %d", len(got), total, want)
	}
	if max := goroutines*each/1000 + 2; len(got) > max {
		t.Errorf("%d lines over %v of clock, want at most %d", len(got), goroutines*each*time.Millisecond, max)
	}
}

// TestNegativeOptions: a negative bound is an error, never "none".
func TestNegativeOptions(t *testing.T) {
	for _, o := range []Options{{Interval: -time.Second}, {MaxKinds: -1}} {
		if _, err := New(slog.DiscardHandler, o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v): %v, want ErrOptions", o, err)
		}
	}
}

func TestHandlerEnabled(t *testing.T) {
	h, err := New(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelWarn, true}, {slog.LevelError, true}} {
		if got := h.Enabled(context.Background(), tt.level); got != tt.want {
			t.Errorf("Enabled(%v): got %v, want %v", tt.level, got, tt.want)
		}
	}
}
