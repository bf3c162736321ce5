package clients

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Registry looks clients up by ID.
type Registry struct {
	byID    map[string]*Client
	dummy   [sha256.Size]byte // compared against when the ID is unknown, so timing does not tell
	version string            // the file's short SHA-256; empty when not read from a file
}

// New checks every client and indexes them.
func New(list []Client) (*Registry, error) {
	cs := &Registry{byID: make(map[string]*Client, len(list))}
	for i := range list {
		c := list[i]
		if err := syntax.CheckName(c.ID); err != nil {
			return nil, fmt.Errorf("%w: client %d: id: %w", ErrFile, i, err)
		}
		if _, dup := cs.byID[c.ID]; dup {
			return nil, fmt.Errorf("%w: client %q listed twice", ErrFile, c.ID)
		}
		if err := c.checkMethod(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		if err := c.checkSecrets(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		if err := checkText(c.Description, maxDescriptionLen); err != nil {
			return nil, fmt.Errorf("%w: client %q: description: %w", ErrFile, c.ID, err)
		}
		if err := checkText(c.Owner, maxOwnerLen); err != nil {
			return nil, fmt.Errorf("%w: client %q: owner: %w", ErrFile, c.ID, err)
		}
		for _, s := range c.Scopes {
			if err := syntax.CheckScope(s); err != nil {
				return nil, fmt.Errorf("%w: client %q: scope %q: %w", ErrFile, c.ID, s, err)
			}
		}
		// Its tokens carry all of them when it asks for none.
		if _, err := syntax.ParseScope(strings.Join(c.Scopes, " ")); err != nil {
			return nil, fmt.Errorf("%w: client %q: scopes: %w", ErrFile, c.ID, err)
		}
		if err := syntax.CheckAudienceList(c.Audiences); err != nil {
			return nil, fmt.Errorf("%w: client %q: audiences: %w", ErrFile, c.ID, err)
		}
		if c.TokenFormat != "" && c.TokenFormat != FormatJWT && c.TokenFormat != FormatOpaque {
			return nil, fmt.Errorf("%w: client %q: token_format %.32q: want %q or %q", ErrFile, c.ID, c.TokenFormat, FormatJWT, FormatOpaque)
		}
		if err := c.checkExchange(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		cs.byID[c.ID] = &c
	}
	if len(cs.byID) == 0 {
		return nil, fmt.Errorf("%w: no clients", ErrFile)
	}
	return cs, nil
}

// Version is the short SHA-256 of the clients file the set was read from
// (`sha256sum F | cut -c1-12`), or empty for a set made in memory.
func (cs *Registry) Version() string { return cs.version }

// Dropped returns, sorted, the clients enabled in cs that next removes or
// disables: the clients whose tokens a reload from cs to next ends.
func (cs *Registry) Dropped(next *Registry) []string {
	var out []string
	for id, c := range cs.byID {
		if n, ok := next.byID[id]; !c.Disabled && (!ok || n.Disabled) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// KeysChanged returns the registrations, in cs, of the clients for which
// keys are fetched (jwks_uri, workload_identity, subject_token_issuers)
// and that next removes or whose entry it changes in any way (a field of
// the clients file, keys_refreshed among them): a reload from cs to next
// drops the key sets fetched for them (clientauth.Verifier.Forget), so that
// a key taken out of a set is refused at once, not once the cache's TTL
// has passed.
func (cs *Registry) KeysChanged(next *Registry) []clientauth.Registration {
	var out []clientauth.Registration
	for id, c := range cs.byID {
		reg, _ := c.Assertion()
		if reg.JWKSURI == "" && reg.Workload == nil && len(reg.SubjectTokenIssuers) == 0 {
			continue
		}
		if n, ok := next.byID[id]; !ok || !sameEntry(c, n) {
			out = append(out, reg)
		}
	}
	slices.SortFunc(out, func(a, b clientauth.Registration) int { return strings.Compare(a.ClientID, b.ClientID) })
	return out
}

// sameEntry reports whether a and b are the same entry of the clients
// file: the same fields, as the file writes them.
func sameEntry(a, b *Client) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Lookup returns the client id, listed whether enabled or not, and whether
// there is one: a map lookup, for the verdict of every request.
func (cs *Registry) Lookup(id string) (*Client, bool) {
	c, ok := cs.byID[id]
	return c, ok
}

// All returns a copy of every client, sorted by ID.
func (cs *Registry) All() []Client {
	out := make([]Client, 0, len(cs.byID))
	for _, c := range cs.byID {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	return out
}
