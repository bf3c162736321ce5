package server

import (
	"io"
	"log/slog"

	"github.com/snowtoken/snowtoken/internal/logsum"
)

// newLogger is the issuer's log: JSON lines on w, and nothing else writes
// there (go-redis's lines come through redisLog, net/http's through the
// servers' ErrorLog). Failures that repeat (every request while Redis is
// down, every retry of the lease, every accept error) are logged once per
// kind and interval, with a count; the metrics count every failed request.
func newLogger(w io.Writer, level slog.Leveler) (*slog.Logger, error) {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString})
	sum, err := logsum.New(h, logsum.Options{})
	if err != nil {
		return nil, err
	}
	return slog.New(sum), nil
}

// durationString writes a time.Duration as Go writes it ("1.5s"), not as
// slog's JSON handler does: an integer of nanoseconds, which reads as a
// count of nothing in particular.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
