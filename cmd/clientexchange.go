package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// subjectIssuerSynopsis is the synopsis of the flags addSubjectIssuerFlags
// defines.
const subjectIssuerSynopsis = "[-subject-issuer URL [-subject-issuer-jwks-uri URL] [-subject-issuer-ca-file F] [-subject-issuer-token-file F]]"

// subjectIssuerFlags name one issuer whose JWTs a client may exchange (its
// subject_token_issuers entry, docs/exchange.md): the workload flags'
// fields (addAuthFlags) without a subject.
type subjectIssuerFlags struct {
	issuer, jwksURI, ca, token *string
}

// addSubjectIssuerFlags defines the subject token issuer flags on f.
func addSubjectIssuerFlags(f *cmdFlags) *subjectIssuerFlags {
	return &subjectIssuerFlags{
		issuer:  f.String("subject-issuer", "", "add (or replace) an issuer whose JWTs naming the client in their aud it may exchange (subject_token_issuers), such as https://kubernetes.default.svc.cluster.local"),
		jwksURI: f.String("subject-issuer-jwks-uri", "", "with -subject-issuer: the issuer's keys (none: from its discovery document)"),
		ca:      f.String("subject-issuer-ca-file", "", "with -subject-issuer: PEM CAs of its key server"),
		token:   f.String("subject-issuer-token-file", "", "with -subject-issuer: a token file sent to its key server"),
	}
}

// apply adds the issuer the flags name to c's subject token issuers, in
// place of its entry if c has one; without -subject-issuer, nothing.
func (s *subjectIssuerFlags) apply(cmd string, c *clients.Client) error {
	if *s.issuer == "" {
		if *s.jwksURI != "" || *s.ca != "" || *s.token != "" {
			return usageErrorf(cmd, "the -subject-issuer-* flags go with -subject-issuer")
		}
		return nil
	}
	ti := clientauth.TrustedIssuer{Issuer: *s.issuer, JWKSURI: *s.jwksURI, CAFile: *s.ca, BearerTokenFile: *s.token}
	if i := issuerIndex(c, ti.Issuer); i >= 0 {
		c.SubjectTokenIssuers[i] = ti
	} else {
		c.SubjectTokenIssuers = append(c.SubjectTokenIssuers, ti)
	}
	return nil
}

// issuerIndex is the index of iss among c's subject token issuers, or -1.
func issuerIndex(c *clients.Client, iss string) int {
	return slices.IndexFunc(c.SubjectTokenIssuers, func(ti clientauth.TrustedIssuer) bool { return ti.Issuer == iss })
}

// clientSetExchangeCmd sets or clears a client's token_exchange and
// impersonation, and adds or removes one of its subject token issuers:
// see clientSubs. Turning exchange off turns impersonation off with it and
// drops the issuers (the file refuses either without exchange).
func clientSetExchangeCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, _ time.Time) error {
	file, id := clientFileFlags(f)
	exchange := f.Bool("token-exchange", false, "true: the client may exchange tokens that name it, with an actor token; false: it may not exchange")
	impersonation := f.Bool("impersonation", false, "true: it may also exchange without an actor token; false: only with one (the default)")
	issuer := addSubjectIssuerFlags(f)
	remove := f.String("remove-subject-issuer", "", "remove this issuer from the client's subject_token_issuers")
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	setExchange := flagSet(f.FlagSet, "token-exchange")
	switch {
	case !setExchange && *issuer.issuer == "" && *remove == "":
		return usageErrorf(f.Name(), "give -token-exchange=true or -token-exchange=false, -subject-issuer or -remove-subject-issuer")
	case flagSet(f.FlagSet, "impersonation") && !setExchange, *impersonation && !*exchange:
		return usageErrorf(f.Name(), "-impersonation needs -token-exchange=true")
	}
	var c clients.Client
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		ec := &cf.Clients[i]
		if setExchange {
			ec.TokenExchange, ec.Impersonation = *exchange, *impersonation
			if !*exchange {
				ec.SubjectTokenIssuers = nil
			}
		}
		if *remove != "" {
			j := issuerIndex(ec, *remove)
			if j < 0 {
				return fmt.Errorf("%s: client %q has no subject token issuer %q", f.Name(), *id, *remove)
			}
			ec.SubjectTokenIssuers = slices.Delete(ec.SubjectTokenIssuers, j, j+1)
		}
		err := issuer.apply(f.Name(), ec)
		c = *ec
		return err
	})
	if err != nil {
		return err
	}
	what := "may not exchange tokens"
	switch {
	case c.Impersonation:
		what = "may exchange tokens, with or without an actor token"
	case c.TokenExchange:
		what = "may exchange tokens with an actor token"
	}
	fmt.Fprintf(f.stdout, "wrote %s: client %q %s\n", *file, *id, what)
	if len(c.SubjectTokenIssuers) > 0 {
		names := make([]string, len(c.SubjectTokenIssuers))
		for i, ti := range c.SubjectTokenIssuers {
			names[i] = ti.Issuer
		}
		fmt.Fprintf(f.stdout, "and the JWTs that name it of: %s\n", strings.Join(names, ", "))
	}
	w.report(ctx, f.stdout, replicas)
	return nil
}
