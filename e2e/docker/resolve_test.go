package docker

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers A queries for one name with the addresses it is given
// at the moment, as Docker's DNS answers for a service's replicas.
type dnsServer struct {
	name  dnsmessage.Name
	conn  net.PacketConn
	mu    sync.Mutex
	addrs []netip.Addr
}

// newDNSServer serves name on a UDP port of loopback until the test ends.
func newDNSServer(tb testing.TB, name string) *dnsServer {
	tb.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &dnsServer{name: dnsmessage.MustNewName(name), conn: conn}
	done := make(chan struct{})
	go func() { defer close(done); s.serve() }()
	tb.Cleanup(func() { conn.Close(); <-done })
	return s
}

func (s *dnsServer) Addr() string { return s.conn.LocalAddr().String() }

func (s *dnsServer) set(addrs ...netip.Addr) {
	s.mu.Lock()
	s.addrs = addrs
	s.mu.Unlock()
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, err := s.answer(buf[:n]); err == nil {
			s.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query: the current addresses for the
// name's A question, no records (NXDOMAIN) for any other name.
func (s *dnsServer) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	known := q.Name.String() == s.name.String()
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA {
		s.mu.Lock()
		addrs := slices.Clone(s.addrs)
		s.mu.Unlock()
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
			if err := b.AResource(rr, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

func TestDNSServer(t *testing.T) {
	s := newDNSServer(t, "issuer.")
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr())
	}}
	for _, want := range [][]netip.Addr{{a}, {a, b}} {
		s.set(want...)
		got, err := r.LookupNetIP(t.Context(), "ip4", "issuer.")
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("lookup issuer = %v, %v; want %v", got, err, want)
		}
	}
	if _, err := r.LookupNetIP(t.Context(), "ip4", "other."); err == nil {
		t.Error("lookup other: no error, want NXDOMAIN")
	}
}

// replicas starts one HTTP server per address, all on one port, each
// answering every request with its address; it returns the port.
func replicas(tb testing.TB, addrs ...netip.Addr) int {
	tb.Helper()
	return replicasServing(tb, func(a netip.Addr) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, a.String()) })
	}, addrs...)
}

// replicasServing starts one HTTP server per address, all on one port, the
// one on address a serving handler(a); it returns the port.
func replicasServing(tb testing.TB, handler func(netip.Addr) http.Handler, addrs ...netip.Addr) int {
	tb.Helper()
	for range 20 {
		port, ok := freePort(tb), true
		var lns []net.Listener
		for _, a := range addrs {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(a, uint16(port)).String())
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		if !ok {
			for _, ln := range lns {
				ln.Close()
			}
			continue
		}
		for i, ln := range lns {
			srv := &http.Server{Handler: handler(addrs[i])}
			go srv.Serve(ln)
			tb.Cleanup(func() { srv.Close() })
		}
		return port
	}
	tb.Skipf("no port free on every one of %v", addrs)
	return 0
}

// TestNginxResolvesIssuerAgain runs nginx/default.conf with a DNS server of
// the test's own in place of Docker's: when the answer for "issuer" changes
// (replicas added or replaced), nginx follows it without a reload.
func TestNginxResolvesIssuerAgain(t *testing.T) {
	nginx := nginxBinary(t)
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	port := replicas(t, a, b)
	dns := newDNSServer(t, "issuer.")
	dns.set(a)
	gw := startNginx(t, nginx, nginxHosts{resolver: dns.Addr(), issuer: "issuer:" + strconv.Itoa(port), consumer: "127.0.0.1:1", consumerDPoP: "127.0.0.1:1"})

	c := &http.Client{Timeout: 5 * time.Second}
	replica := func() string {
		t.Helper()
		resp, err := c.Get(gw + "/token/whoami")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /token/whoami: %d %s", resp.StatusCode, body)
		}
		return string(body)
	}
	// until polls until every replica in want has answered, and no other.
	until := func(want ...netip.Addr) {
		t.Helper()
		seen := map[string]bool{}
		deadline := time.Now().Add(20 * time.Second)
		for len(seen) < len(want) {
			got := replica()
			if !slices.ContainsFunc(want, func(a netip.Addr) bool { return a.String() == got }) {
				seen = map[string]bool{} // still the old answer: start over
			} else {
				seen[got] = true
			}
			if time.Now().After(deadline) {
				t.Fatalf("nginx still does not reach %v 20 s after the DNS answer changed (valid=5s); last answer from %s", want, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	until(a)
	dns.set(b) // the replica replaced
	until(b)
	dns.set(a, b) // scaled up
	until(a, b)
}
