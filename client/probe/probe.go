// Package probe is the health check the images run as their HEALTHCHECK:
// distroless has no shell, curl or wget, so each binary (the issuer, the
// demo consumer) asks its own HTTP endpoint on loopback. It lives beside
// package client, standard library only, so that a consuming service's image
// can run the same check.
package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Timeout bounds one check, below Docker's HEALTHCHECK --timeout.
const Timeout = 3 * time.Second

// Get asks url and returns nil for a 200; any other answer is an error that
// gives the status and the start of the body.
func Get(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("healthcheck: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
