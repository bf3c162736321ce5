package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"

	"snowtoken/token"
)

// TestAuditLoaded: start-up logs which keys sign and verify and which
// clients exist (the audit events keys.loaded and clients.loaded), never a
// secret or its hash.
func TestAuditLoaded(t *testing.T) {
	signer, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	old, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.NewKeySet(signer, old)
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := token.NewClientSecret()
	if err != nil {
		t.Fatal(err)
	}
	clients, err := token.NewClients([]token.Client{
		{ID: "svc", SecretSHA256: sum},
		{ID: "ops", SecretSHA256: sum, Admin: true},
		{ID: "gone", SecretSHA256: sum, Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	auditLoaded(slog.New(slog.NewJSONHandler(&buf, nil)), keys, clients)
	if bytes.Contains(buf.Bytes(), []byte(sum)) {
		t.Errorf("the log holds a secret's hash:\n%s", &buf)
	}
	got := map[string]map[string]any{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		got[rec["event"].(string)] = rec
	}
	for _, tc := range []struct {
		event, field string
		want         any
	}{
		{"keys.loaded", "signing_kid", signer.ID},
		{"keys.loaded", "kids", []any{signer.ID, old.ID}},
		{"clients.loaded", "clients", []any{"gone", "ops", "svc"}},
		{"clients.loaded", "admins", []any{"ops"}},
		{"clients.loaded", "disabled", []any{"gone"}},
	} {
		if g := got[tc.event][tc.field]; !reflect.DeepEqual(g, tc.want) {
			t.Errorf("%s %s = %v, want %v", tc.event, tc.field, g, tc.want)
		}
	}
}
