package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/token/revlog"
)

// loadRevlog reads SNOWTOKEN_REVLOG_THRESHOLD and SNOWTOKEN_REVLOG_HEARTBEAT:
// the follower's threshold (unset: revlog.DefaultThreshold; off: no
// follower; 0s, which meant off, and a negative are errors; else 50ms to
// 10s) and the heartbeat period (unset: revlog.DefaultPeriod; 1ms or more,
// at most a quarter of the threshold).
func loadRevlog(getenv func(string) string, bad func(name, value string, err error)) (threshold, period time.Duration, off bool) {
	threshold, period = revlog.DefaultThreshold, revlog.DefaultPeriod
	switch v := getenv("SNOWTOKEN_REVLOG_THRESHOLD"); {
	case v == "":
	case strings.EqualFold(v, "off"):
		off = true
	default:
		n, err := time.ParseDuration(v)
		switch {
		case err != nil || n < 0:
			bad("SNOWTOKEN_REVLOG_THRESHOLD", v, errors.New("want off, or a duration such as 100ms"))
		case n == 0:
			// 0s meant off; refused, so that it does not silently become
			// the default and turn the follower on.
			bad("SNOWTOKEN_REVLOG_THRESHOLD", v, errors.New("0s no longer turns the follower off: write SNOWTOKEN_REVLOG_THRESHOLD=off, or leave it unset for the default"))
		case n < 50*time.Millisecond || n > 10*time.Second:
			bad("SNOWTOKEN_REVLOG_THRESHOLD", v, errors.New("want off, or 50ms to 10s"))
		default:
			threshold = n
		}
	}
	if v := getenv("SNOWTOKEN_REVLOG_HEARTBEAT"); v != "" {
		n, err := time.ParseDuration(v)
		switch {
		case err != nil || n < 0:
			bad("SNOWTOKEN_REVLOG_HEARTBEAT", v, errors.New("want a duration such as 100ms"))
		case n < time.Millisecond:
			bad("SNOWTOKEN_REVLOG_HEARTBEAT", v, errors.New("want 1ms or more"))
		default:
			period = n
		}
	}
	if !off && threshold < 4*period {
		bad("SNOWTOKEN_REVLOG_HEARTBEAT", period.String(), fmt.Errorf("want at most a quarter of SNOWTOKEN_REVLOG_THRESHOLD (%v): a heartbeat late by a period must not make replicas stale", threshold))
	}
	return threshold, period, off
}
