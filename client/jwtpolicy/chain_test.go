package jwtpolicy

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// chainBase is an issued token's claims, less the closing brace, to which
// the cases add a chain claim.
const chainBase = `{"iss":"i","sub":"alice","client_id":"api","jti":"118278197786714112","iat":10,"exp":20`

// parentJSON is a parent as the issuer writes it.
func parentJSON(jti, client string, iat int64, opaque bool) string {
	b, _ := json.Marshal(Parent{ID: jti, ClientID: client, IssuedAt: iat, Opaque: opaque})
	return string(b)
}

// actorJSON is an act claim depth actors deep, the outermost named a1.
func actorJSON(depth int) string {
	s := ""
	for i := depth; i >= 1; i-- {
		inner := ""
		if s != "" {
			inner = `,"act":` + s
		}
		s = `{"sub":"a` + string(rune('0'+i)) + `"` + inner + `}`
	}
	return s
}

// TestChainClaimsDecode: act, may_act and parents decode into their
// types, and whatever breaks their shape, their types or their caps is an
// error of its own class.
func TestChainClaimsDecode(t *testing.T) {
	parents := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = parentJSON("11827819778671411"+string(rune('0'+i)), "gw", 9, i%2 == 1)
		}
		return "[" + strings.Join(ps, ",") + "]"
	}
	for _, tc := range []struct {
		name, in string
		want     error // nil: decodes
		check    func(c *Claims) bool
	}{
		{name: "parents, one", in: `,"parents":` + parents(1),
			check: func(c *Claims) bool {
				return reflect.DeepEqual(c.Parents, []Parent{{ID: "118278197786714110", ClientID: "gw", IssuedAt: 9}})
			}},
		{name: "parents at the cap, opaque and not", in: `,"parents":` + parents(MaxChain),
			check: func(c *Claims) bool { return len(c.Parents) == MaxChain && c.Parents[1].Opaque && !c.Parents[0].Opaque }},
		{name: "parents past the cap", in: `,"parents":` + parents(MaxChain+1), want: ErrChain},
		{name: "parents empty", in: `,"parents":[]`, check: func(c *Claims) bool { return c.Parents == nil }},
		{name: "parents null", in: `,"parents":null`, want: ErrParent},
		{name: "parents an object", in: `,"parents":` + parentJSON("1", "gw", 9, false), want: ErrParent},
		{name: "a parent not an object", in: `,"parents":["1"]`, want: ErrParent},
		{name: "a parent without a jti", in: `,"parents":[{"client_id":"gw","iat":9}]`, want: ErrParent},
		{name: "a parent's jti not a Snowflake ID", in: `,"parents":[{"jti":"01","client_id":"gw","iat":9}]`, want: ErrParent},
		{name: "a parent's jti negative", in: `,"parents":[{"jti":"-1","client_id":"gw","iat":9}]`, want: ErrParent},
		{name: "a parent's jti a number", in: `,"parents":[{"jti":1,"client_id":"gw","iat":9}]`, want: ErrParent},
		{name: "a parent's jti past int64", in: `,"parents":[{"jti":"9223372036854775808","client_id":"gw","iat":9}]`, want: ErrParent},
		{name: "a parent without a client_id", in: `,"parents":[{"jti":"1","iat":9}]`, want: ErrParent},
		{name: "a parent's client_id empty", in: `,"parents":[{"jti":"1","client_id":"","iat":9}]`, want: ErrParent},
		{name: "a parent without an iat", in: `,"parents":[{"jti":"1","client_id":"gw"}]`, want: ErrParent},
		{name: "a parent's iat quoted", in: `,"parents":[{"jti":"1","client_id":"gw","iat":"9"}]`, want: ErrParent},
		{name: "a parent's iat a fraction", in: `,"parents":[{"jti":"1","client_id":"gw","iat":9.5}]`, want: ErrParent},
		{name: "a parent's iat an exponent", in: `,"parents":[{"jti":"1","client_id":"gw","iat":9e0}]`, want: ErrParent},
		{name: "a parent's iat null", in: `,"parents":[{"jti":"1","client_id":"gw","iat":null}]`, want: ErrParent},
		{name: "a parent's opaque a string", in: `,"parents":[{"jti":"1","client_id":"gw","iat":9,"opaque":"true"}]`, want: ErrParent},
		{name: "a parent's jti twice", in: `,"parents":[{"jti":"1","jti":"2","client_id":"gw","iat":9}]`, want: ErrDuplicate},
		{name: "a parent's unknown member, with a name twice inside", in: `,"parents":[{"jti":"1","client_id":"gw","iat":9,"x":{"y":1,"y":2}}]`, want: ErrDuplicate},
		{name: "a parent's unknown member", in: `,"parents":[{"jti":"1","client_id":"gw","iat":9,"x":[1]}]`,
			check: func(c *Claims) bool { return len(c.Parents) == 1 && c.Parents[0].ID == "1" }},
		{name: "parents twice", in: `,"parents":` + parents(1) + `,"parents":` + parents(1), want: ErrDuplicate},

		{name: "act", in: `,"act":{"sub":"svc","iss":"https://wl.example","client_id":"api"}`,
			check: func(c *Claims) bool {
				return reflect.DeepEqual(c.Act, &Actor{Subject: "svc", Issuer: "https://wl.example", ClientID: "api"})
			}},
		{name: "act at the cap", in: `,"act":` + actorJSON(MaxChain),
			check: func(c *Claims) bool {
				return c.Act.Subject == "a1" && c.Act.Act.Act.Act.Subject == "a4" && c.Act.Act.Act.Act.Act == nil
			}},
		{name: "act past the cap", in: `,"act":` + actorJSON(MaxChain+1), want: ErrChain},
		{name: "act without a sub", in: `,"act":{"iss":"x"}`, want: ErrActor},
		{name: "act's sub empty", in: `,"act":{"sub":""}`, want: ErrActor},
		{name: "act's sub a number", in: `,"act":{"sub":7}`, want: ErrActor},
		{name: "act's iss an array", in: `,"act":{"sub":"s","iss":["x"]}`, want: ErrActor},
		{name: "act a string", in: `,"act":"svc"`, want: ErrActor},
		{name: "act null", in: `,"act":null`, want: ErrActor},
		{name: "a nested act null", in: `,"act":{"sub":"s","act":null}`, want: ErrActor},
		{name: "act's sub twice", in: `,"act":{"sub":"s","sub":"t"}`, want: ErrDuplicate},
		{name: "a nested act's sub twice", in: `,"act":{"sub":"s","act":{"sub":"s","sub":"t"}}`, want: ErrDuplicate},
		{name: "act's other member skipped", in: `,"act":{"sub":"s","amr":["pwd"]}`,
			check: func(c *Claims) bool { return reflect.DeepEqual(c.Act, &Actor{Subject: "s"}) }},
		{name: "may_act", in: `,"may_act":{"sub":"svc","act":{"sub":"gw"}}`,
			check: func(c *Claims) bool {
				return reflect.DeepEqual(c.MayAct, &Actor{Subject: "svc", Act: &Actor{Subject: "gw"}}) && c.Act == nil
			}},
		{name: "may_act past the cap", in: `,"may_act":` + actorJSON(MaxChain+1), want: ErrChain},
		{name: "may_act without a sub", in: `,"may_act":{}`, want: ErrActor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Claims
			err := c.UnmarshalJSON([]byte(chainBase + tc.in + `}`))
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("got %v, want it to decode", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			case tc.want == nil && !tc.check(&c):
				t.Fatalf("decoded act %+v, may_act %+v, parents %+v", c.Act, c.MayAct, c.Parents)
			}
		})
	}
}

// TestChainClaimsRoundTrip: what encoding/json writes of the chain claims
// (as the issuer signs them) decodes to the same claims.
func TestChainClaimsRoundTrip(t *testing.T) {
	var in Claims
	in.Subject, in.ClientID, in.ID = "alice", "api", "118278197786714112"
	in.Act = &Actor{Subject: "svc", ClientID: "api", Act: &Actor{Subject: "gw", Issuer: "https://wl.example"}}
	in.MayAct = &Actor{Subject: "batch"}
	in.Parents = []Parent{{ID: "118278197786714111", ClientID: "gw", IssuedAt: 1795425319, Opaque: true},
		{ID: "118278197786714110", ClientID: "web", IssuedAt: 1795425300}}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out Claims
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", b, out, in)
	}
}

// TestActorClone: a clone shares nothing with its original.
func TestActorClone(t *testing.T) {
	a := &Actor{Subject: "a", Act: &Actor{Subject: "b"}}
	c := a.Clone()
	c.Act.Subject = "x"
	if a.Act.Subject != "b" || !reflect.DeepEqual(c, &Actor{Subject: "a", Act: &Actor{Subject: "x"}}) {
		t.Errorf("clone %+v of %+v shares its nesting", c, a)
	}
	if (*Actor)(nil).Clone() != nil {
		t.Error("a nil actor's clone is not nil")
	}
}
