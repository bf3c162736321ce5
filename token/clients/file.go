package clients

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// File is the JSON document SNOWTOKEN_CLIENTS_FILE points at.
type File struct {
	Clients []Client `json:"clients"`
}

// Load reads a clients file so that it means one thing to the issuer
// and to any other reader: member names match exactly, case included, and a
// name given twice is an error (encoding/json took "ADMIN" for admin and kept
// the last of two, so `"admin": false, "ADMIN": true` loaded an admin that
// `jq .admin` calls false). Unknown fields are an error, so a typo in a field
// name does not silently drop a restriction; so is anything after the
// document, such as a second one pasted below it. The error names the client
// and the field.
//
// These are the semantics of encoding/json/v2, which Go 1.26 has only behind
// GOEXPERIMENT=jsonv2; github.com/go-json-experiment/json is the same code
// (and becomes an alias of it once the experiment is on), so moving to the
// standard library is a change of import path.
func Load(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	f, err := ParseFile(data, path)
	if err != nil {
		return nil, err
	}
	cs, err := New(f.Clients)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	cs.version = hex.EncodeToString(sum[:6]) // `sha256sum F | cut -c1-12`
	return cs, nil
}

// ParseFile decodes the clients file data, read from path (for the
// errors), as Load does, without checking the clients: for a program
// that edits the file, which checks the result with New.
func ParseFile(data []byte, path string) (File, error) {
	var f File
	if err := jsonv2.Unmarshal(data, &f, jsonv2.RejectUnknownMembers(true)); err != nil {
		return File{}, fmt.Errorf("%w: %s: %s%w", ErrFile, path, where(f, err), err)
	}
	return f, nil
}

// where names the client and the field a decoding error is in, such as
// `client 1 ("gw"), field "ADMIN": `, from the error's JSON pointer
// (/clients/1/ADMIN) and the ID decoded before the error, if any.
func where(f File, err error) string {
	var ptr jsontext.Pointer
	var semantic *jsonv2.SemanticError
	var syntactic *jsontext.SyntacticError
	switch {
	case errors.As(err, &semantic):
		ptr = semantic.JSONPointer
	case errors.As(err, &syntactic):
		ptr = syntactic.JSONPointer
	}
	var out []string
	tokens := slices.Collect(ptr.Tokens())
	if len(tokens) >= 2 && tokens[0] == "clients" {
		if i, err := strconv.Atoi(tokens[1]); err == nil {
			client := "client " + tokens[1]
			if i >= 0 && i < len(f.Clients) && f.Clients[i].ID != "" {
				client += fmt.Sprintf(" (%q)", f.Clients[i].ID)
			}
			out = append(out, client)
			tokens = tokens[2:]
		}
	}
	if len(tokens) > 0 {
		out = append(out, fmt.Sprintf("field %q", tokens[0]))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + ": "
}
