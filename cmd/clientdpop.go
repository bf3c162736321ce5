package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/token/clients"
)

// clientSetDPoPCmd sets or clears a client's dpop_bound_access_tokens: see
// clientSubs.
func clientSetDPoPCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, _ time.Time) error {
	file, id := clientFileFlags(f)
	bound := f.Bool("bound", false, "true: every token request of the client must carry a DPoP proof; false: one may")
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	if !flagSet(f.FlagSet, "bound") {
		return usageErrorf(f.Name(), "give -bound=true or -bound=false")
	}
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		cf.Clients[i].DPoPBoundAccessTokens = *bound
		return nil
	})
	if err != nil {
		return err
	}
	what := "may get bearer tokens"
	if *bound {
		what = "gets DPoP-bound tokens only"
	}
	fmt.Fprintf(f.stdout, "wrote %s: client %q %s\n", *file, *id, what)
	w.report(ctx, f.stdout, replicas)
	return nil
}
