package revfeed

import (
	"fmt"
	"sync"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// setCacheSize is how many signed SETs are kept for other subscribers.
const setCacheSize = 4096

// set returns ev's SET, signed once for every subscriber.
func (f *Feed) set(ev revocation.Event) (string, error) {
	if raw, ok := f.sets.get(ev.ID); ok {
		return raw, nil
	}
	uri, ok := ev.Kind.URI()
	if !ok {
		return "", fmt.Errorf("revfeed: event %s of unknown kind %q", ev.ID, ev.Kind)
	}
	raw, err := f.opts.Sign(revocation.TypeSET, &revocation.SETClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.opts.Issuer, IssuedAt: jwt.NewNumericDate(f.opts.Now()), ID: ev.ID},
		Events:           map[string]revocation.EventPayload{uri: ev.Payload()},
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
