package revocation

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// MaxEventIDLen bounds an event ID: an epoch (32 hex digits, ".", Unix ms)
// and a stream ID (two uint64).
const MaxEventIDLen = 80

// StreamID is the ID of a Redis stream entry, <ms>-<seq>: the position of
// an entry in the revocation log, and the time (ms, on Redis's clock) it
// was appended.
type StreamID struct{ MS, Seq uint64 }

// ParseStreamID parses <ms>-<seq>, each a decimal uint64 as Redis writes
// it: no sign, no leading zero, so that an ID has one spelling.
func ParseStreamID(s string) (StreamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, ok1 := parseDecimal(ms)
	b, ok2 := parseDecimal(seq)
	if !ok || !ok1 || !ok2 {
		return StreamID{}, fmt.Errorf("%w: stream id %.80q", ErrEventID, s)
	}
	return StreamID{a, b}, nil
}

// parseDecimal parses a uint64 of decimal digits without a leading zero.
func parseDecimal(s string) (uint64, bool) {
	if len(s) > 1 && s[0] == '0' || s != "" && (s[0] < '0' || s[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// String is <ms>-<seq>.
func (a StreamID) String() string {
	return strconv.FormatUint(a.MS, 10) + "-" + strconv.FormatUint(a.Seq, 10)
}

// Compare is -1, 0 or +1 as a is before, at or after b in the log.
func (a StreamID) Compare(b StreamID) int {
	if c := cmp.Compare(a.MS, b.MS); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// Less reports whether a is before b.
func (a StreamID) Less(b StreamID) bool { return a.Compare(b) < 0 }

// EventID is the ID of an event of the feed, <epoch>-<ms>-<seq>: the epoch
// of the log (32 hex digits, ".", the Unix ms it began) and the entry's
// stream ID. IDs of one epoch are ordered by their stream IDs; IDs of two
// epochs are not ordered at all.
type EventID struct {
	Epoch string
	StreamID
}

// ParseEventID parses an event ID strictly: at most MaxEventIDLen bytes, an
// epoch of lower-case hex digits and dots, "-", and a stream ID.
func ParseEventID(s string) (EventID, error) {
	epoch, sid, ok := strings.Cut(s, "-")
	if !ok || len(s) > MaxEventIDLen || epoch == "" || strings.Trim(epoch, "0123456789abcdef.") != "" {
		return EventID{}, fmt.Errorf("%w: event id %.80q", ErrEventID, s)
	}
	id, err := ParseStreamID(sid)
	if err != nil {
		return EventID{}, fmt.Errorf("%w: event id %.80q", ErrEventID, s)
	}
	return EventID{epoch, id}, nil
}

// String is <epoch>-<ms>-<seq>.
func (e EventID) String() string { return e.Epoch + "-" + e.StreamID.String() }

// SameEpoch reports whether e and b are IDs of one epoch, so that they
// are ordered.
func (e EventID) SameEpoch(b EventID) bool { return e.Epoch == b.Epoch }
