package revfeed

import (
	"strconv"
	"strings"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

// maxIDLen bounds a Last-Event-ID or an ack: an epoch (32 hex digits) and
// a stream ID (two uint64).
const maxIDLen = 80

// CheckID reports whether id has an event ID's shape: an epoch of hex
// digits, a "-", and a stream ID (ms-seq). Which epoch, and whether it can
// be resumed from, is the Source's to say.
func CheckID(id string) error {
	epoch, sid, ok := strings.Cut(id, "-")
	ms, seq, ok2 := strings.Cut(sid, "-")
	// An epoch is revlog's: 32 hex digits, a ".", the Unix ms it began.
	if !ok || !ok2 || len(id) > maxIDLen || epoch == "" || strings.Trim(epoch, "0123456789abcdef.") != "" {
		return refusal.New(token.ErrInvalidRequest, "an event ID is <epoch>-<ms>-<seq>")
	}
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return refusal.New(token.ErrInvalidRequest, "an event ID is <epoch>-<ms>-<seq>")
	}
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		return refusal.New(token.ErrInvalidRequest, "an event ID is <epoch>-<ms>-<seq>")
	}
	return nil
}

// sameEpoch reports whether two event IDs are of one epoch.
func sameEpoch(a, b string) bool {
	ea, _, _ := strings.Cut(a, "-")
	eb, _, _ := strings.Cut(b, "-")
	return ea == eb
}

// streamPos is an event ID parsed (CheckID has passed).
type streamPos struct {
	epoch   string
	ms, seq uint64
}

func parsePos(id string) streamPos {
	epoch, sid, _ := strings.Cut(id, "-")
	ms, seq, _ := strings.Cut(sid, "-")
	a, _ := strconv.ParseUint(ms, 10, 64)
	b, _ := strconv.ParseUint(seq, 10, 64)
	return streamPos{epoch, a, b}
}

func (a streamPos) before(b streamPos) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }
