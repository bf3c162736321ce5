package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The revocation scenario's revocations (revocation.go): each token issued,
// validated, revoked and polled on every validator until it is refused,
// and the times from the revoke's 200 to each refusal printed.

// runRevocations runs -revocations revocations, -revocation-c at once, and
// returns what each of vals did after each.
func runRevocations(reps []*replica, vals []validator, basic, opaqueBasic string) ([][]refusal, error) {
	results := make([][]refusal, *revocations)
	for i := range results {
		results[i] = make([]refusal, len(vals))
	}
	var next atomic.Int64
	var failed atomic.Bool
	errc := make(chan error, *revocationC)
	var wg sync.WaitGroup
	for range *revocationC {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(results) && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := revokeOne(reps, vals, i, basic, opaqueBasic, results[i]); err != nil {
					failed.Store(true)
					errc <- fmt.Errorf("revocation %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return results, <-errc
}

// revokeOne is revocation i: a token issued and revoked on replica i%3,
// JWT for even i, opaque for odd, validated on every one of vals that
// checks it first; then each of those polled until it refuses it, into
// into[k] for vals[k].
//
// With -revocation-parent (cascade set), the token revoked is a parent, a
// JWT, and the token validated and polled is one exchanged from it.
func revokeOne(reps []*replica, vals []validator, i int, basic, opaqueBasic string, into []refusal) error {
	revoker, opaque := i%replicas, i%2 == 1 && cascade == nil
	auth := basic
	if opaque {
		auth = opaqueBasic
	}
	var tok, revoked string
	var err error
	if cascade != nil {
		revoked, tok, err = cascade.issueExchanged(reps[revoker].url, auth)
	} else {
		tok, err = issue(reps[revoker].url, auth)
		revoked = tok
	}
	if err != nil {
		return err
	}
	polled := func(v validator) bool { return !opaque || !v.jwtOnly }
	for _, v := range vals {
		if polled(v) {
			if err := validateOK(v.url, tok); err != nil {
				return err
			}
		}
	}
	if err := revoke(reps[revoker].url, auth, revoked); err != nil {
		return err
	}
	t0 := time.Now()
	errs := make([]error, len(vals))
	var wg sync.WaitGroup
	for k, v := range vals {
		into[k] = refusal{revoker: revoker, opaque: opaque, skipped: !polled(v)}
		if polled(v) {
			wg.Go(func() { errs[k] = pollRefusal(v.url, tok, t0, &into[k]) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pollRefusal sends GET url with tok every -revocation-poll until a 401
// arrives, and records in into how long after t0 it did; or, past
// -revocation-timeout, that it never did.
func pollRefusal(url, tok string, t0 time.Time, into *refusal) error {
	for {
		sent := time.Since(t0)
		status, err := validateStatus(url, tok)
		if err != nil {
			return err
		}
		since := time.Since(t0)
		into.polls++
		switch status {
		case http.StatusUnauthorized:
			into.after, into.refused = since, true
			return nil
		case http.StatusOK:
			into.accepted = sent
		default:
			into.other++
		}
		if since > *revocationTimeout {
			return nil
		}
		time.Sleep(*revocationPoll)
	}
}

// printRefusals prints to w each validator's revoke-to-refusal latency,
// and the replicas' background load, and fails if any revoked token was
// never refused by a validator that checks it.
func printRefusals(w io.Writer, vals []validator, results [][]refusal, background []rateResult, perReplica int, took time.Duration) error {
	consumer := ""
	if slices.ContainsFunc(vals, func(v validator) bool { return v.jwtOnly }) {
		consumer = " and, JWTs only (its local mode refuses opaque tokens outright), on the consumer, which has no load of its own; for the " +
			"consumer, \"another replica\" is one other than the replica whose feed it follows"
	}
	formats := "JWT and opaque alternately"
	if cascade != nil {
		formats = "a parent JWT revoked, a token exchanged from it polled"
	}
	fmt.Fprintf(w, "\nrevocation to refusal: %d revocations in %v, %d in flight, each issued and revoked on replica i%%%d (%s) "+
		"after one validation on every replica%s; under %d hot validations/s on each replica (open loop); each polled every %v; latency from "+
		"the revoke's 200 arriving here to the first 401 arriving here (one round trip and up to one poll interval above the validator's own); "+
		"the lower bound is from the revoke's 200 to the sending of the last validation answered 200 (0 if the first was refused):\n\n",
		len(results), took.Round(time.Millisecond), *revocationC, replicas, formats, consumer, perReplica, *revocationPoll)
	fmt.Fprintf(w, "| validator | revocations | refused | p50 | p99 (target ≤ %v) | max | p99 revoked on another replica | p99 JWT | p99 opaque | "+
		"refused at the first poll | p99 lower bound | never refused within %v | answers neither 200 nor 401 |\n", refusalTarget, *revocationTimeout)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	never := 0
	var above []string
	for k, v := range vals {
		var all, elsewhere, jwt, opaque, accepted []time.Duration
		polled, missed, other, first := 0, 0, 0, 0
		for _, res := range results {
			f := res[k]
			if f.skipped {
				continue
			}
			polled++
			other += f.other
			if !f.refused {
				missed++
				continue
			}
			if f.polls == 1 {
				first++
			}
			all, accepted = append(all, f.after), append(accepted, f.accepted)
			if f.revoker != v.replica {
				elsewhere = append(elsewhere, f.after)
			}
			if f.opaque {
				opaque = append(opaque, f.after)
			} else {
				jwt = append(jwt, f.after)
			}
		}
		never += missed
		s := summarize(all, nil)
		verdict := "met"
		if missed > 0 || s.p99 > refusalTarget {
			verdict = "**MISSED**"
			above = append(above, v.name)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %v | %v (%s) | %v | %s | %s | %s | %d | %s | %s | %d |\n", v.name, polled, len(all), s.p50, s.p99, verdict, s.max,
			p99(elsewhere), p99(jwt), p99(opaque), first, p99(accepted), loud(missed), other)
	}
	fmt.Fprintf(w, "\nbackground validation load during the revocations:\n\n")
	fmt.Fprintln(w, "| replica | sent | errors | p50 | p99 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for k, b := range background {
		fmt.Fprintf(w, "| %d | %d | %d | %v | %v | %v |\n", k+1, b.sent, b.errors, b.p50, b.p99, b.max)
	}
	if len(above) > 0 {
		fmt.Fprintf(w, "\nthe target (p99 ≤ %v, every token refused) is missed on %s\n", refusalTarget, strings.Join(above, ", "))
	}
	if never > 0 {
		return fmt.Errorf("FAILED: %d times a replica or the consumer still accepted a revoked token %v after its revoke's 200", never, *revocationTimeout)
	}
	return nil
}

// p99 is the 99th percentile of xs, or "—" when there are none.
func p99(xs []time.Duration) string {
	if len(xs) == 0 {
		return "—"
	}
	return summarize(xs, nil).p99.String()
}

// loud is n, marked when it is not 0.
func loud(n int) string {
	if n > 0 {
		return fmt.Sprintf("**%d FAILED**", n)
	}
	return "0"
}

// validateStatus is the status of GET url with tok as its bearer token.
func validateStatus(url, tok string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// validateOK fails unless GET url with tok answers 200.
func validateOK(url, tok string) error {
	status, err := validateStatus(url, tok)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s with a token just issued: %d", url, status)
	}
	return err
}

// revoke revokes tok at url as client basic (RFC 7009), and fails unless
// the answer is 200.
func revoke(issuerURL, basic, tok string) error {
	req, err := http.NewRequest(http.MethodPost, issuerURL+"/token/revoke", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic)
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s/token/revoke: %s: %s", issuerURL, resp.Status, b)
	}
	return nil
}
