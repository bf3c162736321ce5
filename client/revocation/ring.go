package revocation

import (
	"slices"
)

// RingSize is how many recent events a Ring resumes from, at least (up to
// twice as many are kept).
const RingSize = 4096

// Ring keeps the latest events applied to a state, oldest first, so that
// a consumer that lost its connection resumes from its last ID (Since).
// The zero Ring is empty. Like State, its holder locks it.
type Ring struct {
	events []Event
	ids    []StreamID
	from   StreamID // every event after it is kept
}

// Record keeps ev, whose stream ID is id, dropping the oldest half when
// twice RingSize are kept.
func (r *Ring) Record(ev Event, id StreamID) {
	if len(r.events) >= 2*RingSize {
		n := len(r.events) - RingSize
		r.from = r.ids[n-1]
		r.events = append([]Event(nil), r.events[n:]...)
		r.ids = append([]StreamID(nil), r.ids[n:]...)
	}
	r.events, r.ids = append(r.events, ev), append(r.ids, id)
}

// Since returns up to max events after the event after, oldest first, of
// a state at last; ok is false when it cannot resume from after: another
// epoch, an ID past last, or one older than the events it keeps.
func (r *Ring) Since(after, last EventID, max int) (evs []Event, ok bool) {
	if !after.SameEpoch(last) || last.Less(after.StreamID) || after.Less(r.from) {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(r.ids, after.StreamID, StreamID.Compare)
	for ; i < len(r.ids) && !after.Less(r.ids[i]); i++ {
	}
	end := min(len(r.events), i+max)
	return slices.Clone(r.events[i:end]), true
}

// After returns the events kept whose stream ID is after id, oldest first.
func (r *Ring) After(id StreamID) []Event {
	i, _ := slices.BinarySearchFunc(r.ids, id, StreamID.Compare)
	for ; i < len(r.ids) && !id.Less(r.ids[i]); i++ {
	}
	return slices.Clone(r.events[i:])
}
