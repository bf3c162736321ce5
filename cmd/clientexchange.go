package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/token/clients"
)

// clientSetExchangeCmd sets or clears a client's token_exchange and
// impersonation: see clientSubs. Turning exchange off turns impersonation
// off with it (the file refuses impersonation alone).
func clientSetExchangeCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, _ time.Time) error {
	file, id := clientFileFlags(f)
	exchange := f.Bool("token-exchange", false, "true: the client may exchange tokens that name it, with an actor token; false: it may not exchange")
	impersonation := f.Bool("impersonation", false, "true: it may also exchange without an actor token; false: only with one (the default)")
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	if !flagSet(f.FlagSet, "token-exchange") {
		return usageErrorf(f.Name(), "give -token-exchange=true or -token-exchange=false")
	}
	if *impersonation && !*exchange {
		return usageErrorf(f.Name(), "-impersonation needs -token-exchange=true")
	}
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		cf.Clients[i].TokenExchange, cf.Clients[i].Impersonation = *exchange, *impersonation
		return nil
	})
	if err != nil {
		return err
	}
	what := "may not exchange tokens"
	switch {
	case *impersonation:
		what = "may exchange tokens, with or without an actor token"
	case *exchange:
		what = "may exchange tokens with an actor token"
	}
	fmt.Fprintf(f.stdout, "wrote %s: client %q %s\n", *file, *id, what)
	w.report(ctx, f.stdout, replicas)
	return nil
}
