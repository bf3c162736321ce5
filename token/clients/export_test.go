package clients

import "github.com/snowtoken/snowtoken/internal/filetest"

// ByID is the client id, or nil: for the tests.
func (cs *Registry) ByID(id string) *Client { return cs.byID[id] }

// WriteFile and SHA256Hex are filetest's.
var (
	WriteFile = filetest.Write
	SHA256Hex = filetest.SHA256Hex
)
