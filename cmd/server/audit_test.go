package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestAuditLoaded: start-up logs which keys sign and verify and which
// clients exist (the audit events keys.loaded and clients.loaded), never a
// secret or its hash.
func TestAuditLoaded(t *testing.T) {
	signer := keysettest.MustKey(t)
	old := keysettest.MustKey(t)
	keys, err := keyset.New(signer, old)
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	clients, err := clients.New([]clients.Client{
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

// TestWarnExpiringSecrets: start-up warns of each client secret that has
// expired or expires within two weeks, unless the client is disabled.
func TestWarnExpiringSecrets(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	_, sum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	clients, err := clients.New([]clients.Client{
		{ID: "expired", SecretSHA256: sum, SecretExpires: now.Add(-time.Hour)},
		{ID: "soon", SecretSHA256: sum, SecretExpires: now.Add(13 * 24 * time.Hour)},
		{ID: "later", SecretSHA256: sum, SecretExpires: now.Add(15 * 24 * time.Hour)},
		{ID: "never", SecretSHA256: sum},
		{ID: "off", SecretSHA256: sum, SecretExpires: now.Add(-time.Hour), Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	warnExpiringSecrets(slog.New(slog.NewJSONHandler(&buf, nil)), clients, now)
	got := map[string]string{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != "WARN" {
			t.Errorf("level %v, want WARN: %v", rec["level"], rec)
		}
		got[rec["client_id"].(string)], _ = rec["expires_in"].(string)
	}
	if want := map[string]string{"expired": "", "soon": "312h0m0s"}; !maps.Equal(got, want) {
		t.Errorf("warned of %v, want %v", got, want)
	}
}
