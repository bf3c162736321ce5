package snowflakealg

import (
	"math"
	"time"
)

// Time arithmetic on the timestamp field. A time.Duration counts nanoseconds
// in an int64 and ends at about 292 years, which a 44-bit field (557 years)
// already exceeds and a 61-bit one (73 million years) far exceeds; so
// milliseconds since the epoch never pass through a time.Duration. Whole
// seconds go through Unix time, which holds every int64 count of milliseconds.

// addMillis returns t plus ms milliseconds, in t's location.
func addMillis(t time.Time, ms int64) time.Time {
	sec, rest := ms/1000, ms%1000
	return time.Unix(t.Unix()+sec, int64(t.Nanosecond())+rest*int64(time.Millisecond)).In(t.Location())
}

// sinceEpoch returns the time from epoch to t as whole milliseconds, rounded
// down, and the rest, in [0, 1ms). A span too long for an int64 of
// milliseconds saturates at math.MaxInt64 or math.MinInt64.
func sinceEpoch(epoch, t time.Time) (ms int64, rest time.Duration) {
	const maxSec = math.MaxInt64/1000 - 1
	sec := t.Unix() - epoch.Unix()
	switch {
	case sec > maxSec:
		return math.MaxInt64, 0
	case sec < -maxSec:
		return math.MinInt64, 0
	}
	ns := int64(t.Nanosecond() - epoch.Nanosecond()) // in (-1s, 1s)
	msPart := floorDiv(ns, int64(time.Millisecond))
	return sec*1000 + msPart, time.Duration(ns - msPart*int64(time.Millisecond))
}

// floorDiv returns a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
