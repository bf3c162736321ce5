package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/token/clients"
)

// clientSub is one `snowtoken client` subcommand.
type clientSub struct {
	name, synopsis, about string
	run                   func(ctx context.Context, f *cmdFlags, args []string, env map[string]string, now time.Time) error
}

// clientSubs are the client subcommands, in the order usage lists them.
// Those that edit a clients file (-file) hold its lock across the read, the
// edit and the write, so that two edits at once both land; check the whole
// result as the issuer does (unknown fields, duplicate IDs, malformed
// hashes, naming the client and the field); and replace the file
// atomically with its owner, group and mode (internal/atomicfile), so a
// replica that reloads it never reads half of it and can still read it.
// They then say who can read the file and, with -replicas, whether the
// running replicas loaded it.
var clientSubs = []clientSub{
	{"new", "-id ID [-scopes a,b] [-audiences a,b] [-file F] [-secret-valid-for D] [-max-ttl D] [-may-set-subject] [-may-introspect] [-admin] [-dpop-bound] [-token-exchange [-impersonation] " + subjectIssuerSynopsis + "] [-description TEXT] [-owner TEXT]" + authSynopsis + replicasSynopsis,
		"Make a client and print its secret, once. With -file, add the client to the clients file F\n" +
			"(created if missing); without, print the entry to add. A private_key_jwt client (-jwks-file,\n" +
			"-jwks-uri) or a workload identity client (-workload-issuer, -workload-subject) has no secret.", clientNewCmd},
	{"rotate-secret", "-file F -id ID [-old-valid-for 24h] [-secret-valid-for D]" + replicasSynopsis,
		"Give a client a new secret and print it, once. The current secret keeps working until\n" +
			"-old-valid-for from now (never past its own expiry), written into F as\n" +
			"previous_secret_expires; -old-valid-for 0 ends it, and any previous one, now (a leaked secret).", clientRotateCmd},
	{"set-auth", "-file F -id ID" + authSynopsis + replicasSynopsis,
		"Change how a client authenticates: its secret method, its keys (private_key_jwt), or its\n" +
			"workload identity. Moving off a secret drops it; moving to a secret method without one\n" +
			"makes one and prints it, once.", clientSetAuthCmd},
	{"set-dpop", "-file F -id ID -bound=true|false" + replicasSynopsis,
		"Require a DPoP proof with every token request of a client, so that all of its tokens are\n" +
			"bound to a key it holds (dpop_bound_access_tokens), or stop requiring it.", clientSetDPoPCmd},
	{"set-exchange", "-file F -id ID [-token-exchange=true|false [-impersonation=true|false]] " + subjectIssuerSynopsis + " [-remove-subject-issuer URL]" + replicasSynopsis,
		"Let a client exchange tokens that name it for narrower ones (RFC 8693, token_exchange), with an\n" +
			"actor token, and with -impersonation without one; or stop it (docs/exchange.md). -subject-issuer\n" +
			"lets it exchange the JWTs of that issuer that name it too (subject_token_issuers), such as its\n" +
			"cluster's service-account tokens; -remove-subject-issuer no longer.", clientSetExchangeCmd},
	{"refresh-keys", "-file F -id ID" + replicasSynopsis,
		"Make the replicas drop the keys they fetched for a client whose keys are at a URL (jwks_uri,\n" +
			"workload_identity, subject_token_issuers) and fetch them again at their next use: for a key\n" +
			"taken out of the set (compromised) before the cache's 5 minutes pass. It writes keys_refreshed\n" +
			"into F; every replica that loads F drops them, which -replicas waits for.", clientRefreshKeysCmd},
	{"list", "-file F",
		"Check the clients file F as the issuer does and list its clients.", clientListCmd},
	{"disable", "-file F -id ID [-revoke]" + replicasSynopsis,
		"Disable a client in F: once a replica loads F, it cannot authenticate and its tokens are revoked\n" +
			"for good (enabled again, it does not get them back). -revoke also revokes them now.", clientDisableCmd},
	{"enable", "-file F -id ID" + replicasSynopsis,
		"Enable a disabled client in F: it can authenticate and get tokens again. The tokens it held\n" +
			"when a replica loaded F with it disabled were revoked then and stay refused.", clientEnableCmd},
	{"remove", "-file F -id ID [-revoke]" + replicasSynopsis,
		"Remove a client from F: once a replica loads F, its tokens are revoked for good (a client of\n" +
			"the same ID added again does not get them back). -revoke also revokes them now.", clientRemoveCmd},
	{"revoke", "-id ID",
		"Revoke every token of a client, in the Redis of the issuer's SNOWTOKEN_REDIS_* variables\n" +
			"(as DELETE /clients/{id}/tokens does): for an operator who has no admin client at hand.", clientRevokeCmd},
}

// replicasSynopsis is the synopsis of the flags addReplicaFlags defines.
const replicasSynopsis = " [-replicas URL,URL] [-replicas-wait 5s]"

// clientUsage prints the synopsis of every client subcommand.
func clientUsage(w io.Writer) {
	for _, s := range clientSubs {
		fmt.Fprintf(w, "  snowtoken client %s %s\n", s.name, s.synopsis)
	}
}

// clientCmd runs a client subcommand.
func clientCmd(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	names := make([]string, len(clientSubs))
	for i, s := range clientSubs {
		names[i] = s.name
	}
	if len(args) == 0 {
		return usageErrorf("client", "missing subcommand: one of %s", strings.Join(names, ", "))
	}
	if isHelp(args[0]) {
		fmt.Fprintln(stdout, "usage:")
		clientUsage(stdout)
		fmt.Fprintln(stdout, "\nsnowtoken client SUBCOMMAND -h describes one.")
		return nil
	}
	i := slices.IndexFunc(clientSubs, func(s clientSub) bool { return s.name == args[0] })
	if i < 0 {
		return usageErrorf("client", "unknown subcommand %q: one of %s", args[0], strings.Join(names, ", "))
	}
	s := clientSubs[i]
	return s.run(ctx, newCmdFlags("client "+s.name, s.synopsis, s.about, stdout), args[1:], env, time.Now())
}

// clientNewCmd makes a client: see clientSubs.
func clientNewCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, now time.Time) error {
	id := f.String("id", "", "client id (required)")
	scopes := f.String("scopes", "", "comma-separated scopes the client may ask for")
	audiences := f.String("audiences", "", "comma-separated audiences (aud) the client may ask for, the first its default (none: SNOWTOKEN_AUDIENCE)")
	file := f.String("file", "", "clients file to add the client to (created if missing); none: print the entry")
	secretValidFor := f.Duration("secret-valid-for", 0, "how long the secret works, written as secret_expires (0: no expiry)")
	maySet := f.Bool("may-set-subject", false, "client may issue tokens for other subjects")
	mayIntrospect := f.Bool("may-introspect", false, "client may introspect tokens issued to other clients")
	admin := f.Bool("admin", false, "client may revoke any token and all tokens of a subject")
	dpopBound := f.Bool("dpop-bound", false, "every token of the client is DPoP-bound: its token requests without a DPoP proof are refused")
	exchange := f.Bool("token-exchange", false, "client may exchange tokens that name it for narrower ones, with an actor token (RFC 8693)")
	impersonation := f.Bool("impersonation", false, "with -token-exchange: client may exchange without an actor token")
	maxTTL := f.Duration("max-ttl", 0, "longest lifetime of this client's tokens (0: the global maximum)")
	description := f.String("description", "", "what the client is, for people")
	owner := f.String("owner", "", "who answers for the client, such as a team or an address")
	subjectIssuer := addSubjectIssuerFlags(f)
	auth := addAuthFlags(f)
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "id"); err != nil {
		return err
	}
	if *secretValidFor < 0 {
		return usageErrorf(f.Name(), "-secret-valid-for must not be negative")
	}
	c := clients.Client{ID: *id, Description: *description, Owner: *owner,
		Scopes: commaList(*scopes), Audiences: commaList(*audiences), MaySetSubject: *maySet, MayIntrospect: *mayIntrospect, Admin: *admin, MaxTTL: clients.Duration(*maxTTL),
		DPoPBoundAccessTokens: *dpopBound, TokenExchange: *exchange, Impersonation: *impersonation}
	if err := subjectIssuer.apply(f.Name(), &c); err != nil {
		return err
	}
	secret, err := auth.apply(f.Name(), &c)
	if err != nil {
		return err
	}
	if *secretValidFor > 0 {
		if secret == "" {
			return usageErrorf(f.Name(), "-secret-valid-for is for a client with a secret; this one authenticates by %s", c.Method())
		}
		c.SecretExpires = expiry(now, *secretValidFor)
	}
	if *file == "" {
		if _, err := clients.New([]clients.Client{c}); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		entry, err := encodeJSON(c, "")
		if err != nil {
			return err
		}
		printNewClient(f.stdout, c, secret)
		fmt.Fprintf(f.stdout, "\nclients-file entry:\n%s", entry)
		return nil
	}
	w, err := editClientsFile(ctx, f.Name(), *file, true, func(cf *clients.File) error {
		if slices.ContainsFunc(cf.Clients, func(o clients.Client) bool { return o.ID == c.ID }) {
			return fmt.Errorf("%s: %s already has a client %q: client rotate-secret gives it a new secret", f.Name(), *file, c.ID)
		}
		cf.Clients = append(cf.Clients, c)
		return nil
	})
	if err != nil {
		return err
	}
	printNewClient(f.stdout, c, secret)
	fmt.Fprintf(f.stdout, "\nadded client %q to %s\n", c.ID, *file)
	w.report(ctx, f.stdout, replicas)
	return nil
}

// clientRotateCmd gives a client a new secret: see clientSubs.
func clientRotateCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, now time.Time) error {
	file, id := clientFileFlags(f)
	oldValidFor := f.Duration("old-valid-for", 24*time.Hour, "how long the current secret keeps working (0: it stops now)")
	secretValidFor := f.Duration("secret-valid-for", 0, "how long the new secret works, written as secret_expires (0: no expiry); required when the current secret has an expiry")
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	if *oldValidFor < 0 || *secretValidFor < 0 {
		return usageErrorf(f.Name(), "-old-valid-for and -secret-valid-for must not be negative")
	}
	secret, sum, err := clients.NewSecret()
	if err != nil {
		return err
	}
	var c clients.Client
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		c = cf.Clients[i]
		if c.PreviousSecretSHA256 != "" && now.Before(c.PreviousSecretExpires) && *oldValidFor > 0 {
			return fmt.Errorf("%s: client %q still accepts its previous secret until %s, and a client holds two secrets at most: "+
				"rotate again after that, or with -old-valid-for 0 to end both the current and the previous secret now",
				f.Name(), c.ID, c.PreviousSecretExpires.Format(time.RFC3339))
		}
		if !c.SecretExpires.IsZero() && !flagSet(f.FlagSet, "secret-valid-for") {
			return usageErrorf(f.Name(), "client %q's secret has an expiry (secret_expires %s): give the new one -secret-valid-for (0: no expiry)",
				c.ID, c.SecretExpires.Format(time.RFC3339))
		}
		c.PreviousSecretSHA256, c.PreviousSecretExpires = "", time.Time{}
		if old := expiry(now, *oldValidFor); *oldValidFor > 0 && (c.SecretExpires.IsZero() || now.Before(c.SecretExpires)) {
			if !c.SecretExpires.IsZero() && c.SecretExpires.Before(old) {
				old = c.SecretExpires // a rotation never lengthens a secret's life
			}
			c.PreviousSecretSHA256, c.PreviousSecretExpires = c.SecretSHA256, old
		}
		c.SecretSHA256, c.SecretExpires = sum, time.Time{}
		if *secretValidFor > 0 {
			c.SecretExpires = expiry(now, *secretValidFor)
		}
		cf.Clients[i] = c
		return nil
	})
	if err != nil {
		return err
	}
	printSecret(f.stdout, c.ID, secret)
	if c.PreviousSecretSHA256 != "" {
		fmt.Fprintf(f.stdout, "\nwrote %s: the previous secret of %q works until %s\n", *file, c.ID, c.PreviousSecretExpires.Format(time.RFC3339))
	} else {
		fmt.Fprintf(f.stdout, "\nwrote %s: only the new secret of %q works\n", *file, c.ID)
	}
	w.report(ctx, f.stdout, replicas)
	return nil
}

// clientListCmd checks a clients file and lists its clients: see clientSubs.
func clientListCmd(_ context.Context, f *cmdFlags, args []string, _ map[string]string, now time.Time) error {
	file := f.String("file", "", "clients file (required)")
	if err := f.parse(args, "file"); err != nil {
		return err
	}
	cf, err := readClientsFile(f.Name(), *file)
	if err != nil {
		return err
	}
	if _, err := clients.New(cf.Clients); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	w := tabwriter.NewWriter(f.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tAUTH METHOD\tSCOPES\tDISABLED\tSECRET EXPIRES\tPREVIOUS SECRET EXPIRES\tOWNER")
	for _, c := range cf.Clients {
		previous := time.Time{}
		if c.PreviousSecretSHA256 != "" {
			previous = c.PreviousSecretExpires
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", c.ID, c.Method(), orDash(strings.Join(c.Scopes, " ")), c.Disabled,
			expiryCell(c.SecretExpires, now), expiryCell(previous, now), orDash(c.Owner))
	}
	return w.Flush()
}

// clientDisableCmd disables a client: see clientSubs.
func clientDisableCmd(ctx context.Context, f *cmdFlags, args []string, env map[string]string, _ time.Time) error {
	return setDisabled(ctx, f, args, env, true)
}

// clientEnableCmd enables a client: see clientSubs.
func clientEnableCmd(ctx context.Context, f *cmdFlags, args []string, env map[string]string, _ time.Time) error {
	return setDisabled(ctx, f, args, env, false)
}

// setDisabled sets a client's disabled field, and revokes its tokens when
// it disables it with -revoke.
func setDisabled(ctx context.Context, f *cmdFlags, args []string, env map[string]string, disabled bool) error {
	file, id := clientFileFlags(f)
	revoke := new(bool)
	if disabled {
		revoke = f.Bool("revoke", false, "also revoke every token of the client in Redis (SNOWTOKEN_REDIS_* variables)")
	}
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	done := fmt.Sprintf("enabled client %q in %s", *id, *file)
	if disabled {
		done = fmt.Sprintf("disabled client %q in %s", *id, *file)
	}
	return withRevoke(ctx, f, env, *id, *revoke, replicas, func() (*written, error) {
		return editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
			cf.Clients[i].Disabled = disabled
			return nil
		})
	}, done)
}

// clientRemoveCmd removes a client: see clientSubs.
func clientRemoveCmd(ctx context.Context, f *cmdFlags, args []string, env map[string]string, _ time.Time) error {
	file, id := clientFileFlags(f)
	revoke := f.Bool("revoke", false, "also revoke every token of the client in Redis (SNOWTOKEN_REDIS_* variables)")
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	return withRevoke(ctx, f, env, *id, *revoke, replicas, func() (*written, error) {
		return editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
			cf.Clients = slices.Delete(cf.Clients, i, i+1)
			return nil
		})
	}, fmt.Sprintf("removed client %q from %s", *id, *file))
}

// clientFileFlags defines the -file and -id flags of a command that edits
// one client of a clients file.
func clientFileFlags(f *cmdFlags) (file, id *string) {
	return f.String("file", "", "clients file (required)"), f.String("id", "", "client id (required)")
}

// editClient applies edit to the client id of the clients file path, which
// it finds at index i.
func editClient(ctx context.Context, cmd, path, id string, edit func(cf *clients.File, i int) error) (*written, error) {
	return editClientsFile(ctx, cmd, path, false, func(cf *clients.File) error {
		i := slices.IndexFunc(cf.Clients, func(c clients.Client) bool { return c.ID == id })
		if i < 0 {
			return fmt.Errorf("%s: %s has no client %q", cmd, path, id)
		}
		return edit(cf, i)
	})
}

// editClientsFile applies edit to the clients file path (an empty one if
// path does not exist and create is set), checks the result as the issuer
// would load it, and replaces the file with it atomically, keeping its
// owner, group and mode. It holds the file's lock (atomicfile.Lock) from
// the read to the rename, so that an edit made at the same time by another
// command waits and then applies to this one's result. Errors start with
// cmd.
func editClientsFile(ctx context.Context, cmd, path string, create bool, edit func(cf *clients.File) error) (*written, error) {
	unlock, err := atomicfile.Lock(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	defer unlock()
	cf, err := readClientsFile(cmd, path)
	created := create && errors.Is(err, fs.ErrNotExist)
	if created {
		cf, err = clients.File{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := edit(&cf); err != nil {
		return nil, err
	}
	data, err := encodeJSON(cf, "  ")
	if err != nil {
		return nil, err
	}
	// What is written is read back with the issuer's own decoder and checks.
	check, err := clients.ParseFile(data, path)
	if err == nil {
		_, err = clients.New(check.Clients)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not writing %s: %w", cmd, path, err)
	}
	if err := atomicfile.Replace(path, data); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return &written{path: path, created: created, source: "clients", taken: fileVersion(path, data)}, nil
}

// encodeJSON is v as JSON, indented by indent unless it is empty, ending in
// a newline. It leaves & < > as they are: "R&D" stays readable.
func encodeJSON(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readClientsFile reads and decodes the clients file path as the issuer
// does, without checking the clients.
func readClientsFile(cmd, path string) (clients.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return clients.File{}, fmt.Errorf("%s: %w", cmd, err)
	}
	cf, err := clients.ParseFile(data, path)
	if err != nil {
		return clients.File{}, fmt.Errorf("%s: %w", cmd, err)
	}
	return cf, nil
}

// printSecret prints a client's new secret, the one time it is shown.
func printSecret(w io.Writer, id, secret string) {
	fmt.Fprintf(w, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; the file keeps its SHA-256)\n", id, secret)
}

// expiry is now plus d, in UTC, to the second: as the clients file shows it.
func expiry(now time.Time, d time.Duration) time.Time {
	return now.Add(d).UTC().Truncate(time.Second)
}

// expiryCell is an expiry as client list shows it.
func expiryCell(t, now time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case !now.Before(t):
		return t.Format(time.RFC3339) + " (expired)"
	}
	return t.Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
