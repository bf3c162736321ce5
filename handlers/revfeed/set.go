package revfeed

import (
	"fmt"
	"sync"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/token/revlog"
)

// setCacheSize is how many signed SETs are kept for other subscribers.
const setCacheSize = 4096

// EventPayload is a SET's event (its one member of events): the log entry.
type EventPayload struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	At     int64  `json:"at"`
	Exp    int64  `json:"exp,omitempty"`
	Cutoff int64  `json:"cutoff,omitempty"`
}

// SETClaims are a Security Event Token's claims (RFC 8417 §2.2): jti is the
// event's ID, events holds one URI of ours.
type SETClaims struct {
	jwt.RegisteredClaims
	Events map[string]EventPayload `json:"events"`
}

// eventURI is the SET event URI of a kind.
func eventURI(kind string) (string, bool) {
	switch kind {
	case revlog.KindToken:
		return EventTokenRevoked, true
	case revlog.KindSubject:
		return EventSubjectRevoked, true
	case revlog.KindClient:
		return EventClientRevoked, true
	}
	return "", false
}

// set returns ev's SET, signed once for every subscriber.
func (f *Feed) set(ev revlog.Event) (string, error) {
	if raw, ok := f.sets.get(ev.ID); ok {
		return raw, nil
	}
	uri, ok := eventURI(ev.Kind)
	if !ok {
		return "", fmt.Errorf("revfeed: event %s of unknown kind %q", ev.ID, ev.Kind)
	}
	raw, err := f.opts.Sign(TypeSET, &SETClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(f.opts.Now()), ID: ev.ID},
		Events: map[string]EventPayload{uri: {
			ID: ev.ID, Kind: ev.Kind, Key: ev.Key, At: ev.At, Exp: ev.Exp, Cutoff: ev.Cutoff,
		}},
	})
	if err != nil {
		return "", err
	}
	f.sets.put(ev.ID, raw)
	return raw, nil
}

// setCache keeps the last setCacheSize SETs signed, by event ID.
type setCache struct {
	mu   sync.Mutex
	byID map[string]string
	ring [setCacheSize]string
	next int
}

func (c *setCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, ok := c.byID[id]
	return raw, ok
}

func (c *setCache) put(id, raw string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; ok {
		return
	}
	delete(c.byID, c.ring[c.next])
	c.ring[c.next] = id
	c.byID[id] = raw
	c.next = (c.next + 1) % setCacheSize
}
