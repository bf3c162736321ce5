package clients

import "github.com/snowtoken/snowtoken/internal/filetest"

// ByID is the client id, or nil: for the tests.
func (cs *Registry) ByID(id string) *Client { return cs.byID[id] }

// WriteFile is filetest.Write.
var WriteFile = filetest.Write
