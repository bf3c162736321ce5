package dpop

import (
	"errors"
	"fmt"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// refusal is a refused proof: one of the package's errors (kind), and what
// was wrong with the proof in RFC 9449's terms (reason), never in a
// library's words, for Reason to tell the client.
type refusal struct {
	kind   error
	reason string
}

func (r *refusal) Error() string { return r.kind.Error() + ": " + r.reason }
func (r *refusal) Unwrap() error { return r.kind }

// refuse returns a refusal of kind; its reason is format with args.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// Reason returns what err, a refusal of Check, Verify or Record or an error
// wrapping one, tells the client that sent the proof: what was wrong with
// it, in RFC 9449's terms, such as "DPoP proof: claim iat is not a number",
// never a library's words nor the Go error chain. ok is false for any other
// error, such as ErrReplayRecord's or ErrRequest's, which are the server's.
func Reason(err error) (reason string, ok bool) {
	var r *refusal
	if !errors.As(err, &r) {
		return "", false
	}
	return "DPoP proof: " + r.reason, true
}

// jsonPart is a JSON text of a proof, as a reason names it and its members.
type jsonPart struct{ name, member string }

var (
	partHeader = jsonPart{"the header", "header member"}
	partClaims = jsonPart{"the claims set", "claim"}
	partJWK    = jsonPart{"the jwk", "jwk member"}
)

// jsonReason says what is wrong with the JSON text of part that
// go-json-experiment refused with err, in the protocol's words: a member of
// the wrong type, repeated or unknown, or a text that is no JSON object.
func jsonReason(part jsonPart, err error) string {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		p, name, _ := part.at(syn.JSONPointer)
		return fmt.Sprintf("%s %.64q appears twice", p.member, name)
	case errors.As(err, &syn):
		return part.name + " is not valid JSON"
	case !errors.As(err, &sem):
		return part.name + " is not valid JSON"
	case sem.JSONPointer == "":
		return part.name + " is not a JSON object"
	case errors.Is(sem.Err, jsonv2.ErrUnknownName):
		p, name, _ := part.at(sem.JSONPointer)
		return fmt.Sprintf("%s %.64q is not allowed", p.member, name)
	}
	p, name, nested := part.at(sem.JSONPointer)
	switch t := jsonType(sem.GoType); {
	case nested:
		return fmt.Sprintf("%s %s holds a value of the wrong type", p.member, name)
	case t == "a number" && sem.JSONKind == '0':
		return fmt.Sprintf("%s %s is out of range", p.member, name)
	default:
		return fmt.Sprintf("%s %s is not %s", p.member, name, t)
	}
}

// at returns the part and the name of the member ptr points into,
// and whether ptr points deeper: the header's jwk is a part of its own.
func (part jsonPart) at(ptr jsontext.Pointer) (jsonPart, string, bool) {
	var names []string
	for name := range ptr.Tokens() {
		names = append(names, name)
	}
	if part == partHeader && len(names) > 1 && names[0] == "jwk" {
		part, names = partJWK, names[1:]
	}
	if len(names) == 0 {
		return part, "", false
	}
	return part, names[0], len(names) > 1
}

// jsonType names the JSON type a member of Go type t must have.
func jsonType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "of the right type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "of the right type"
}
