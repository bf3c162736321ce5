package server

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// loadKeys loads SNOWTOKEN_SIGNING_KEYS, or in dev mode generates a key.
func loadKeys(cfg config.Config, log *slog.Logger) (*keyset.Set, error) {
	if cfg.Production {
		ks, err := readKeys(cfg.SigningKeys)
		if err != nil {
			return nil, fmt.Errorf("SNOWTOKEN_SIGNING_KEYS: %w", err)
		}
		return ks, nil
	}
	k, err := keyset.Generate()
	if err != nil {
		return nil, err
	}
	log.Warn("DEV MODE: generated a signing key for this run; tokens stop verifying when the process stops. Set SNOWTOKEN_SIGNING_KEYS.")
	return keyset.New(k)
}

// readKeys reads SNOWTOKEN_SIGNING_KEYS: a keys directory (keyset.LoadDir),
// or a list of PEM files whose first signs (keyset.Load).
func readKeys(paths []string) (*keyset.Set, error) {
	if dir, ok := keysDir(paths); ok {
		return keyset.LoadDir(dir)
	}
	return keyset.Load(paths...)
}

// keysDir returns the keys directory SNOWTOKEN_SIGNING_KEYS names, if it
// names one: a single path that is a directory.
func keysDir(paths []string) (string, bool) {
	if len(paths) != 1 {
		return "", false
	}
	fi, err := os.Stat(paths[0])
	return paths[0], err == nil && fi.IsDir()
}

// auditLoaded logs the audit events keys.loaded and clients.loaded
// (docs/audit.md): which keys sign and verify (and of those, which are next
// and which retired), which clients exist and which of them are admins or
// disabled.
func auditLoaded(log *slog.Logger, keys *keyset.Set, clients *clients.Registry) {
	var kids, next, retired []string
	for _, k := range keys.Keys() {
		kids = append(kids, k.Kid)
		switch k.State {
		case keyset.Next:
			next = append(next, k.Kid)
		case keyset.Retired:
			retired = append(retired, k.Kid)
		}
	}
	log.Info("signing keys loaded", "event", "keys.loaded", "signing_kid", keys.SigningKeyID(), "kids", kids, "next", next, "retired", retired)
	var ids, admins, disabled []string
	for _, c := range clients.All() {
		ids = append(ids, c.ID)
		if c.Admin {
			admins = append(admins, c.ID)
		}
		if c.Disabled {
			disabled = append(disabled, c.ID)
		}
	}
	log.Info("clients loaded", "event", "clients.loaded", "clients", ids, "admins", admins, "disabled", disabled)
}

// secretExpiryWarning is how long before a client secret expires start-up
// warns of it. The metric snowtoken_client_secret_expiry_timestamp_seconds
// lets an alert choose its own horizon.
const secretExpiryWarning = 14 * 24 * time.Hour

// warnExpiringSecrets logs a warning for each client, other than a disabled
// one, whose secret has expired or expires within secretExpiryWarning of now.
func warnExpiringSecrets(log *slog.Logger, clients *clients.Registry, now time.Time) {
	for _, c := range clients.All() {
		if c.Disabled || c.SecretExpires.IsZero() {
			continue
		}
		switch left := c.SecretExpires.Sub(now); {
		case left <= 0:
			log.Warn("a client's secret has expired: it no longer authenticates; give the client a new one with snowtoken client rotate-secret",
				"client_id", c.ID, "secret_expires", c.SecretExpires)
		case left < secretExpiryWarning:
			log.Warn("a client's secret expires soon: give the client a new one with snowtoken client rotate-secret",
				"client_id", c.ID, "secret_expires", c.SecretExpires, "expires_in", left.Round(time.Minute).String())
		}
	}
}

// devClient is the client dev mode generates, with a new secret every run;
// its tokens name devService in their aud (the first of its audiences),
// so that devService may exchange them (docs/exchange.md).
var devClient = clients.Client{ID: "dev", Scopes: []string{"read", "write"}, MaySetSubject: true, Admin: true,
	Audiences: []string{"dev-service"}}

// devService is dev mode's second client: a service that may exchange a
// token naming it for a narrower one, with its own token as the actor
// (token_exchange; docs/exchange.md walks through it).
var devService = clients.Client{ID: "dev-service", Scopes: []string{"read"}, TokenExchange: true}

// devSecrets are the secrets of dev mode's clients, shown once in its banner.
type devSecrets struct{ client, service string }

// loadClients loads SNOWTOKEN_CLIENTS_FILE, or in dev mode generates
// devClient and devService and returns their secrets.
func loadClients(cfg config.Config, log *slog.Logger) (*clients.Registry, devSecrets, error) {
	if cfg.Production {
		cs, err := clients.Load(cfg.ClientsFile)
		if err != nil {
			return nil, devSecrets{}, fmt.Errorf("SNOWTOKEN_CLIENTS_FILE: %w", err)
		}
		return cs, devSecrets{}, nil
	}
	var secrets devSecrets
	list := []clients.Client{devClient, devService}
	for i, secret := range []*string{&secrets.client, &secrets.service} {
		s, sum, err := clients.NewSecret()
		if err != nil {
			return nil, devSecrets{}, err
		}
		*secret, list[i].SecretSHA256 = s, sum
	}
	if cfg.Audience != "" { // SNOWTOKEN_AUDIENCE stays the dev client's to ask for
		list[0].Audiences = append(list[0].Audiences, cfg.Audience)
	}
	cs, err := clients.New(list)
	log.Warn("DEV MODE: generated client \"dev\" (admin, may set the subject, scopes read write, aud dev-service) and \"dev-service\" (may exchange tokens, scope read); their secrets are printed once below. Set SNOWTOKEN_CLIENTS_FILE.")
	return cs, secrets, err
}
