package snowflakealg

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/snowtoken/snowtoken/bitsalloc"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestWorkerIDFromIPv4(t *testing.T) {
	compose := []Interface{
		{Name: "lo", Up: true, Loopback: true, Addrs: addrs("127.0.0.1", "::1")},
		{Name: "eth9", Up: false, Addrs: addrs("10.9.9.9")},
		{Name: "eth0", Up: true, Addrs: addrs("fe80::1", "172.28.0.23")},
		{Name: "eth1", Up: true, Addrs: addrs("192.168.5.200")},
		{Name: "v6only", Up: true, Addrs: addrs("2001:db8::7")},
	}
	seven, _ := bitsalloc.New(44, 7, 12)
	tests := []struct {
		name    string
		src     IPv4Source
		alloc   *bitsalloc.BitsAllocator
		want    int64
		wantErr error
	}{
		{"first up non-loopback", IPv4Source{}, nil, 23, nil},
		{"named interface", IPv4Source{Interface: "eth1"}, nil, 200, nil},
		{"named interface that is down still counts", IPv4Source{Interface: "eth9"}, nil, 9, nil},
		{"named interface missing", IPv4Source{Interface: "wlan0"}, nil, 0, ErrInterfaceNotFound},
		{"named interface without IPv4", IPv4Source{Interface: "v6only"}, nil, 0, ErrNoIPv4},
		{"explicit IP wins", IPv4Source{IP: "10.0.0.11", Interface: "eth1"}, nil, 11, nil},
		{"explicit IPv4-mapped IPv6", IPv4Source{IP: "::ffff:10.0.0.12"}, nil, 12, nil},
		{"explicit IPv6", IPv4Source{IP: "2001:db8::1"}, nil, 0, ErrNotIPv4},
		{"explicit garbage", IPv4Source{IP: "not-an-ip"}, nil, 0, ErrNotIPv4},
		{"octet too big for 7 worker bits", IPv4Source{Interface: "eth1"}, seven, 0, bitsalloc.ErrWorkerRange},
		{"octet fits 7 worker bits", IPv4Source{}, seven, 23, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.src.Interfaces = func() ([]Interface, error) { return compose, nil }
			if tt.alloc == nil {
				tt.alloc = bitsalloc.Default()
			}
			got, _, err := WorkerIDFromIPv4(tt.src, tt.alloc)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("got %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWorkerIDFromIPv4NoIPv4AtAll(t *testing.T) {
	src := IPv4Source{Interfaces: func() ([]Interface, error) {
		return []Interface{{Name: "lo", Up: true, Loopback: true, Addrs: addrs("127.0.0.1")}}, nil
	}}
	if _, _, err := WorkerIDFromIPv4(src, bitsalloc.Default()); !errors.Is(err, ErrNoIPv4) {
		t.Fatalf("got %v, want ErrNoIPv4", err)
	}
	boom := errors.New("boom")
	src.Interfaces = func() ([]Interface, error) { return nil, boom }
	if _, _, err := WorkerIDFromIPv4(src, bitsalloc.Default()); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the lookup's error", err)
	}
}

func TestSystemInterfaces(t *testing.T) {
	ifaces, err := SystemInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifaces {
		if i.Loopback && i.Up {
			return
		}
	}
	t.Fatalf("no up loopback interface among %+v", ifaces)
}
