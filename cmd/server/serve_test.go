package server

import (
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// TestWorkerIDOnIPv6OnlyHost: a production replica on a host with IPv6
// addresses only is told which variable to set, not left with a failure of
// the interface scan.
func TestWorkerIDOnIPv6OnlyHost(t *testing.T) {
	ipv6Only := func() ([]snowflakealg.Interface, error) {
		return []snowflakealg.Interface{
			{Name: "lo", Up: true, Loopback: true, Addrs: []netip.Addr{netip.MustParseAddr("::1")}},
			{Name: "eth0", Up: true, Addrs: []netip.Addr{netip.MustParseAddr("fd00::7"), netip.MustParseAddr("fe80::1")}},
		}, nil
	}
	cfg := config.Config{Production: true, Bits: bitsalloc.Default()}
	_, err := workerID(cfg, ipv6Only, slog.New(slog.DiscardHandler))
	if !errors.Is(err, snowflakealg.ErrNoIPv4) || !strings.Contains(err.Error(), "set SNOWTOKEN_WORKER_ID") ||
		!strings.Contains(err.Error(), "IPv6-only") {
		t.Errorf("workerID on an IPv6-only host: %v; want ErrNoIPv4 saying to set SNOWTOKEN_WORKER_ID", err)
	}
	cfg.WorkerID, cfg.WorkerIDSet = 7, true
	if w, err := workerID(cfg, ipv6Only, slog.New(slog.DiscardHandler)); err != nil || w != 7 {
		t.Errorf("with SNOWTOKEN_WORKER_ID=7: %d, %v", w, err)
	}
}
