package cmd

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/snowtoken/snowtoken/internal/atomicfile"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// Files init writes into its directory. The issuer finds them through
// SNOWTOKEN_SIGNING_KEYS, SNOWTOKEN_CLIENTS_FILE and
// SNOWTOKEN_REDIS_PASSWORD_FILE; the Compose stack's Redis reads the last one
// too, for its requirepass.
const (
	initKeyFile           = "signing-key.pem"
	initClientsFile       = "clients.json"
	initRedisPasswordFile = "redis.password"
)

// initCmd prepares a production secrets directory: a signing key, a clients
// file with one client whose secret goes to DIR/<client-id>.secret, and a
// random Redis password, in DIR/redis.password or the file
// -redis-password-file names (the Compose stack's Redis mounts a volume that
// holds only that file, not the signing key and the clients). With
// -feed-client-id the clients file holds a second client, one that may only
// follow the revocation feed (revocation_feed, no scopes), whose secret goes
// to -feed-secret-file (the Compose stack's following consumer mounts a
// volume that holds only that file). With -service-client-id it holds one
// more, for a service that calls another with an access token of its own
// (client credentials), with -service-scopes, whose secret goes to
// -service-secret-file (the Compose stack's first hop mounts a volume that
// holds only that file).
// It never replaces a file that exists, so running it on every start (the
// Compose stack's one-shot init service does) keeps the key and the client.
//
// The secret is not printed: output of a container ends up in `docker
// compose logs` and whatever collects them, and stays there. The secret file is
// 0600 in the secrets volume; init prints only its path.
func initCmd(args []string, stdout io.Writer) error {
	flags := newCmdFlags("init", "-dir DIR [-client-id demo] [-scopes orders:read,orders:write] [-redis-password-file FILE] [-feed-client-id ID [-feed-secret-file FILE]] [-service-client-id ID -service-scopes S [-service-secret-file FILE]]",
		"Prepare a production secrets directory: a signing key, a clients file with one client whose\n"+
			"secret goes to DIR/<client-id>.secret (and, with -feed-client-id, a client that may only follow\n"+
			"the revocation feed; with -service-client-id, a service's client), and a Redis password, never\n"+
			"replacing a file that exists.", stdout)
	dir := flags.String("dir", "", "directory for "+initKeyFile+", "+initClientsFile+", <client-id>.secret and "+initRedisPasswordFile+" (created 0700 if missing)")
	clientID := flags.String("client-id", "demo", "id of the client to create")
	scopes := flags.String("scopes", "orders:read,orders:write", "comma-separated scopes the client may ask for")
	passwordFile := flags.String("redis-password-file", "", "file for the Redis password (default DIR/"+initRedisPasswordFile+"; its directory is created 0700 if missing)")
	feedID := flags.String("feed-client-id", "", "id of a second client, with revocation_feed and no scopes, for a service that follows the revocation feed (none: no such client)")
	feedSecretFile := flags.String("feed-secret-file", "", "file for that client's secret (default DIR/<feed-client-id>.secret; its directory is created 0700 if missing)")
	serviceID := flags.String("service-client-id", "", "id of one more client, for a service that calls another with a token of its own (none: no such client)")
	serviceScopes := flags.String("service-scopes", "", "comma-separated scopes that client may ask for (required with -service-client-id)")
	serviceSecretFile := flags.String("service-secret-file", "", "file for that client's secret (default DIR/<service-client-id>.secret; its directory is created 0700 if missing)")
	if err := flags.parse(args, "dir"); err != nil {
		return err
	}
	if *passwordFile == "" {
		*passwordFile = filepath.Join(*dir, initRedisPasswordFile)
	}
	client, err := initClient(*clientID, *scopes)
	if err != nil {
		return err
	}
	entries := []initEntry{{client, filepath.Join(*dir, client.ID+".secret")}}
	feed, err := initExtra("feed", *feedID, "", *feedSecretFile, *dir)
	if err != nil {
		return err
	}
	if feed != nil {
		feed.client.RevocationFeed = true
		entries = append(entries, *feed)
	}
	if *serviceID != "" && *serviceScopes == "" {
		return usageErrorf("init", "-service-scopes is required with -service-client-id")
	}
	service, err := initExtra("service", *serviceID, *serviceScopes, *serviceSecretFile, *dir)
	if err != nil {
		return err
	}
	if service != nil {
		entries = append(entries, *service)
	}
	dirs, all := []string{filepath.Dir(*passwordFile)}, []clients.Client{}
	for _, e := range entries {
		dirs, all = append(dirs, filepath.Dir(e.secretPath)), append(all, e.client)
	}
	if _, err := clients.New(all); err != nil { // two with one ID
		return fmt.Errorf("init: %w", err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}

	keyDone, err := initFile(filepath.Join(*dir, initKeyFile), newSigningKey, stdout)
	if err != nil {
		return err
	}
	clientsDone, err := initClients(*dir, entries, stdout)
	if err != nil {
		return err
	}
	passwordDone, err := initFile(*passwordFile, newRedisPassword, stdout)
	if err != nil {
		return err
	}
	if !keyDone && !clientsDone && !passwordDone {
		fmt.Fprintf(stdout, "init: nothing to do: %s already holds a key and a clients file, %s a Redis password\n", *dir, *passwordFile)
	}
	return nil
}

// initFile writes what newContent makes to path unless a file is there. It
// reports whether it wrote one; what it prints is newContent's description,
// never the contents.
func initFile(path string, newContent func() (data []byte, what string, err error), stdout io.Writer) (bool, error) {
	exists, err := fileExists(path)
	if err != nil {
		return false, err
	}
	if exists {
		fmt.Fprintf(stdout, "init: kept %s (exists)\n", path)
		return false, nil
	}
	data, what, err := newContent()
	if err != nil {
		return false, err
	}
	created, err := writeNewFile(path, data)
	if err != nil {
		return false, err
	}
	if !created {
		fmt.Fprintf(stdout, "init: kept %s (exists)\n", path)
		return false, nil
	}
	fmt.Fprintf(stdout, "init: wrote %s (%s)\n", path, what)
	return true, nil
}

// newSigningKey makes a new Ed25519 signing key, PEM-encoded.
func newSigningKey() ([]byte, string, error) {
	k, err := keyset.Generate()
	if err != nil {
		return nil, "", err
	}
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		return nil, "", err
	}
	return pemBytes, "Ed25519 signing key, kid " + k.ID, nil
}

// newRedisPassword makes a random Redis password: crypto/rand.Text, 26
// base32 characters (130 bits), safe in a shell word and a Redis config line.
func newRedisPassword() ([]byte, string, error) {
	return []byte(rand.Text() + "\n"), "the Redis password, mode 0600; it is not printed", nil
}

// initClient checks the client init is asked for, before anything is written.
func initClient(id, scopeList string) (clients.Client, error) {
	c := clients.Client{ID: id, SecretSHA256: strings.Repeat("0", 64), Scopes: commaList(scopeList)}
	if _, err := clients.New([]clients.Client{c}); err != nil {
		return clients.Client{}, fmt.Errorf("init: %w", err)
	}
	return c, nil
}

// initExtra is the entry of a client beyond the first, as the flags
// -NAME-client-id, -NAME-scopes (scopes) and -NAME-secret-file give it: nil
// without an ID, its secret in DIR/<id>.secret unless secretFile names
// another file.
func initExtra(name, id, scopes, secretFile, dir string) (*initEntry, error) {
	if id == "" {
		if scopes != "" || secretFile != "" {
			return nil, usageErrorf("init", "the -%[1]s-* flags are for -%[1]s-client-id", name)
		}
		return nil, nil
	}
	c, err := initClient(id, scopes)
	if err != nil {
		return nil, err
	}
	return &initEntry{c, cmp.Or(secretFile, filepath.Join(dir, id+".secret"))}, nil
}

// initEntry is a client init writes into a new clients file, and the file
// its secret goes to.
type initEntry struct {
	client     clients.Client
	secretPath string
}

// initClients writes a clients file holding the clients, each with a new
// secret, unless a clients file is there. The secret files are written
// first, so a clients file never exists whose secret was lost; a secret file
// left without a clients file is refused rather than replaced.
func initClients(dir string, entries []initEntry, stdout io.Writer) (bool, error) {
	clientsPath := filepath.Join(dir, initClientsFile)
	exists, err := fileExists(clientsPath)
	if err != nil {
		return false, err
	}
	if exists {
		fmt.Fprintf(stdout, "init: kept %s (exists)\n", clientsPath)
		return false, nil
	}
	var (
		file    clients.File
		written []string // the secret files, removed unless the clients file is written
	)
	defer func() {
		for _, p := range written {
			os.Remove(p)
		}
	}()
	for _, e := range entries {
		secret, sum, err := clients.NewSecret()
		if err != nil {
			return false, err
		}
		e.client.SecretSHA256 = sum
		file.Clients = append(file.Clients, e.client)
		created, err := writeNewFile(e.secretPath, []byte(secret+"\n"))
		if err != nil {
			return false, err
		}
		if !created {
			return false, fmt.Errorf("init: %s exists but %s does not: remove the stale secret file to create the client again", e.secretPath, clientsPath)
		}
		written = append(written, e.secretPath)
	}
	doc, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return false, err
	}
	created, err := writeNewFile(clientsPath, append(doc, '\n'))
	if err != nil || !created {
		// Someone else wrote a clients file meanwhile: ours is not in use.
		if err == nil {
			fmt.Fprintf(stdout, "init: kept %s (exists)\n", clientsPath)
		}
		return false, err
	}
	written = nil
	for i, e := range entries {
		what := "scopes " + strings.Join(e.client.Scopes, " ")
		if e.client.RevocationFeed {
			what = "revocation_feed only"
		}
		if i == 0 {
			fmt.Fprintf(stdout, "init: wrote %s (client %q, %s)\n", clientsPath, e.client.ID, what)
		} else {
			fmt.Fprintf(stdout, "init: and client %q (%s)\n", e.client.ID, what)
		}
		fmt.Fprintf(stdout, "init: wrote %s (client %q's secret, mode 0600; it is not printed)\n", e.secretPath, e.client.ID)
	}
	return true, nil
}

func fileExists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("init: %w", err)
	}
}

// writeNewFile creates path, mode 0600, holding data, unless path exists: it
// reports false then and leaves the file alone. The data goes to a temporary
// file first, which is then hard-linked into place: link(2) never replaces a
// file, and path never exists with partial contents, even if init is killed
// or two inits race. Where the file system has no hard links, it falls back to
// an exclusive create, which still never replaces a file.
func writeNewFile(path string, data []byte) (bool, error) {
	tmp, err := atomicfile.WriteTemp(filepath.Dir(path), ".init-", data)
	if err != nil {
		return false, fmt.Errorf("init: %w", err)
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	}
	return writeExclusive(path, data)
}

// writeExclusive is writeNewFile without the temporary file: a crash while
// writing can leave path partial, so it is only the fallback.
func writeExclusive(path string, data []byte) (bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("init: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return false, fmt.Errorf("init: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return false, fmt.Errorf("init: %w", err)
	}
	return true, nil
}
