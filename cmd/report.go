package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/atomicfile"
)

// shortSum is data's version as the issuer names it in /readyz and in its
// logs: the first 12 hex digits of its SHA-256.
func shortSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// reportReaders tells the operator who can read the file path that a
// command just wrote, as far as the CLI can know: the CLI cannot know
// which user the issuer runs as, so it names the users and the group the
// mode lets read it, says whether an existing file kept its owner, group
// and mode (atomicfile: whoever read it before still can), and warns when
// only root can read it. Whether the running replicas really loaded it is
// for -replicas (replicaCheck) to tell.
func reportReaders(w io.Writer, path string, created bool) {
	a, err := atomicfile.Stat(path)
	if err != nil {
		fmt.Fprintf(w, "warning: cannot tell who can read %s: %v\n", path, err)
		return
	}
	var readers []string
	if a.Mode&0o400 != 0 && a.UID == 0 {
		readers = append(readers, "root")
	} else if a.Mode&0o400 != 0 {
		readers = append(readers, fmt.Sprintf("uid %d", a.UID))
	}
	if a.Mode&0o040 != 0 {
		readers = append(readers, fmt.Sprintf("group %d", a.GID))
	}
	if a.Mode&0o004 != 0 {
		readers = []string{"every user"}
	}
	who := strings.Join(readers, " and ")
	if who == "" {
		who = "root only"
	}
	if created {
		fmt.Fprintf(w, "created %s, owner %d:%d, mode %04o: readable by %s\n", path, a.UID, a.GID, uint32(a.Mode), who)
	} else {
		fmt.Fprintf(w, "%s kept its owner %d:%d and mode %04o: readable by %s, as before\n", path, a.UID, a.GID, uint32(a.Mode), who)
	}
	if a.Mode&0o444 == 0 || (a.UID == 0 && a.Mode&0o044 == 0) {
		fmt.Fprintf(w, "warning: only root can read %s: an issuer that runs as another user cannot load it (chown or chmod it for that user)\n", path)
	}
}

// written is a file a command wrote, for its report.
type written struct {
	path    string
	created bool
	source  string            // what the replicas' /readyz calls it: "clients" or "keys"
	taken   func(string) bool // whether a version /readyz shows includes the change
}

// report says who can read the file (reportReaders) and, with -replicas,
// whether the running replicas loaded it (replicaCheck).
func (w *written) report(ctx context.Context, out io.Writer, replicas *replicaCheck) {
	reportReaders(out, w.path, w.created)
	replicas.await(ctx, out, w.source, w.taken)
}

// DefaultReplicasWait is -replicas-wait's default: the replicas' watcher
// reloads within a second of a change.
const DefaultReplicasWait = 5 * time.Second

// replicaCheck is a command's -replicas: after it writes a file, it asks
// each replica's /readyz which version of the file it serves, until all
// serve the new one or -replicas-wait has passed, then names the replicas
// that did not take the change (their logs say why: a refused reload). The
// file is written either way, so this warns and does not fail the command.
type replicaCheck struct {
	urls []string
	wait time.Duration
}

// addReplicaFlags defines -replicas and -replicas-wait on f.
func addReplicaFlags(f *cmdFlags) *replicaCheck {
	rc := &replicaCheck{}
	f.Func("replicas", "comma-separated `URLs` of the running replicas, each one directly (not through a load balancer), such as\n"+
		"http://10.0.0.5:8080: after writing, wait until each one's /readyz shows the new file, and warn about those that do not", func(s string) error {
		for _, item := range commaList(s) {
			u, err := url.Parse(item)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
				return fmt.Errorf("replica %q: want an http:// or https:// URL such as http://10.0.0.5:8080", item)
			}
			if !strings.HasSuffix(u.Path, "/readyz") {
				u.Path = strings.TrimSuffix(u.Path, "/") + "/readyz"
			}
			rc.urls = append(rc.urls, u.String())
		}
		return nil
	})
	f.DurationVar(&rc.wait, "replicas-wait", DefaultReplicasWait, "how long -replicas waits for the replicas to load the change")
	return rc
}

// await waits until every replica's /readyz shows, as the version of
// source ("clients" or "keys"), one that taken accepts, or until rc.wait
// has passed, and reports each replica on w: a line for one that took the
// change, a warning naming one that did not.
func (rc *replicaCheck) await(ctx context.Context, w io.Writer, source string, taken func(version string) bool) {
	if len(rc.urls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rc.wait)
	defer cancel()
	results := make([]string, len(rc.urls))
	var wg sync.WaitGroup
	for i, u := range rc.urls {
		wg.Go(func() { results[i] = awaitReplica(ctx, u, source, taken) })
	}
	wg.Wait()
	for i, u := range rc.urls {
		if results[i] == "" {
			fmt.Fprintf(w, "replica %s loaded the change\n", u)
			continue
		}
		fmt.Fprintf(w, "warning: replica %s did not load the change within %v: %s\n", u, rc.wait, results[i])
	}
}

// awaitReplica polls one replica's /readyz until it serves a version of
// source that taken accepts (it returns "") or ctx ends (it returns what
// it saw last).
func awaitReplica(ctx context.Context, readyz, source string, taken func(string) bool) string {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		version, err := replicaVersion(ctx, readyz, source)
		switch {
		case err != nil:
			if ctx.Err() == nil || last == "no answer" {
				last = err.Error()
			}
		case taken(version):
			return ""
		default:
			last = fmt.Sprintf("it serves %s %s; if it stays so, its log says why (event config.reload_refused)", source, orDash(version))
		}
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
	}
}

// replicaVersion is the version of source that the replica's /readyz shows
// (it shows it when it answers 503 too).
func replicaVersion(ctx context.Context, readyz, source string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Config *handlers.Version `json:"config"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body); err != nil || body.Config == nil {
		return "", fmt.Errorf("its /readyz answered %s without the config it serves", resp.Status)
	}
	if source == "keys" {
		return body.Config.Keys, nil
	}
	return body.Config.Clients, nil
}

// fileVersion returns a function that reports whether a version is the
// one of data, written to path, or of what path holds now (a later edit,
// which includes this one, since edits are serialised).
func fileVersion(path string, data []byte) func(string) bool {
	want := shortSum(data)
	return func(v string) bool {
		if v == want {
			return true
		}
		now, err := os.ReadFile(path)
		return err == nil && v == shortSum(now)
	}
}
