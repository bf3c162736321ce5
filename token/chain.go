package token

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// An exchanged token's act and parents (exchange.go) are written once, as
// JSON members (encodeChain), into its JWT's claims (signer.sign) or its
// opaque record (OpaqueRecord.Chain), and read back from the record by
// decodeChain. The JWT's are read by jwtpolicy.Claims.

// chainClaims are the claims encodeChain writes.
type chainClaims struct {
	Act     *jwtpolicy.Actor   `json:"act,omitempty"`
	Parents []jwtpolicy.Parent `json:"parents,omitempty"`
}

// errChain: an opaque record's act and parents do not read.
var errChain = errors.New("token: unreadable act or parents")

// encodeChain returns act and parents as the JSON members
// `"act":{…},"parents":[…]`, without braces, "" for neither. Their strings
// are names (syntax.CheckName) and decimal IDs: no newline, no escape.
func encodeChain(act *jwtpolicy.Actor, parents []jwtpolicy.Parent) (string, error) {
	if act == nil && len(parents) == 0 {
		return "", nil
	}
	b, err := json.Marshal(chainClaims{Act: act, Parents: parents})
	if err != nil {
		return "", err
	}
	return string(b[1 : len(b)-1]), nil
}

// decodeChain reads what encodeChain wrote, strictly: known members only,
// names as Issue writes them, at most MaxChain actors and parents.
func decodeChain(chain string) (*jwtpolicy.Actor, []jwtpolicy.Parent, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte("{" + chain + "}")))
	dec.DisallowUnknownFields()
	var c chainClaims
	if err := dec.Decode(&c); err != nil || dec.More() {
		return nil, nil, fmt.Errorf("%w: %v", errChain, err)
	}
	if c.Act == nil && len(c.Parents) == 0 || depth(c.Act) > MaxChain || len(c.Parents) > MaxChain {
		return nil, nil, errChain
	}
	for a := c.Act; a != nil; a = a.Act {
		if syntax.CheckName(a.Subject) != nil || a.ClientID != "" && syntax.CheckName(a.ClientID) != nil || a.Issuer != "" {
			return nil, nil, errChain
		}
	}
	for _, p := range c.Parents {
		if _, err := snowflakealg.ParseID(p.ID); err != nil || syntax.CheckName(p.ClientID) != nil {
			return nil, nil, errChain
		}
	}
	return c.Act, c.Parents, nil
}
