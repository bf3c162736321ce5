package client

import "testing"

// TestClaimsActor: the issuer's answer for an exchanged token gives its
// act, whose outermost sub is Actor; a clone (what the answer cache hands
// out) copies every actor of the chain, so that no caller changes what the
// next one is told.
func TestClaimsActor(t *testing.T) {
	v := &Validator{opts: Options{Issuer: "https://issuer.test"}}
	c, err := v.claimsFromAnswer([]byte(`{"active":true,"sub":"alice","client_id":"billing","iss":"https://issuer.test","exp":2000000000,` +
		`"act":{"sub":"billing","client_id":"billing","act":{"sub":"orders","client_id":"orders"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Actor(); got != "billing" {
		t.Errorf("Actor %q, want billing", got)
	}
	if c.Act.Act == nil || c.Act.Act.Subject != "orders" {
		t.Errorf("act %+v: the earlier actor is lost", c.Act)
	}
	d := c.clone()
	d.Act.Subject, d.Act.Act.Subject = "mallory", "mallory"
	if c.Act.Subject != "billing" || c.Act.Act.Subject != "orders" {
		t.Errorf("a clone's change reached the original: %+v %+v", c.Act, c.Act.Act)
	}
	plain, err := v.claimsFromAnswer([]byte(`{"active":true,"sub":"alice","client_id":"web","iss":"https://issuer.test","exp":2000000000}`))
	if err != nil || plain.Actor() != "" || plain.clone().Act != nil {
		t.Errorf("a token without act: %v, actor %q", err, plain.Actor())
	}
}
