package snowflakealg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/snowtoken/snowtoken/bitsalloc"
)

// Errors returned by WorkerIDFromIPv4.
var (
	ErrNoIPv4            = errors.New("snowflakealg: no usable IPv4 address")
	ErrInterfaceNotFound = errors.New("snowflakealg: network interface not found")
	ErrNotIPv4           = errors.New("snowflakealg: not an IPv4 address")
)

// Interface is what WorkerIDFromIPv4 needs to know of a network interface.
type Interface struct {
	Name     string
	Up       bool
	Loopback bool
	Addrs    []netip.Addr
}

// IPv4Source says where WorkerIDFromIPv4 finds the address. The zero value
// means the first up, non-loopback interface with an IPv4 address, as the OS
// lists them.
type IPv4Source struct {
	// IP, if set, is used as it is (SNOWTOKEN_WORKER_IP).
	IP string
	// Interface, if set, names the interface to read (SNOWTOKEN_WORKER_INTERFACE).
	Interface string
	// Interfaces lists the interfaces. Nil means SystemInterfaces.
	Interfaces func() ([]Interface, error)
}

// WorkerIDFromIPv4 returns the last octet of the container's IPv4 address as a
// worker ID, with the address it came from. The octet must fit the worker field
// of a: with fewer than 8 worker bits, some addresses do not.
func WorkerIDFromIPv4(src IPv4Source, a *bitsalloc.BitsAllocator) (int64, netip.Addr, error) {
	ip, err := src.find()
	if err != nil {
		return 0, netip.Addr{}, err
	}
	worker := int64(ip.As4()[3])
	if err := a.CheckWorker(worker); err != nil {
		return 0, ip, fmt.Errorf("last octet of %s: %w", ip, err)
	}
	return worker, ip, nil
}

func (src IPv4Source) find() (netip.Addr, error) {
	if src.IP != "" {
		ip, err := netip.ParseAddr(src.IP)
		if err != nil || !ip.Unmap().Is4() {
			return netip.Addr{}, fmt.Errorf("%w: %q", ErrNotIPv4, src.IP)
		}
		return ip.Unmap(), nil
	}
	list := src.Interfaces
	if list == nil {
		list = SystemInterfaces
	}
	ifaces, err := list()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("listing network interfaces: %w", err)
	}
	found := false
	for _, ifc := range ifaces {
		if src.Interface != "" {
			if ifc.Name != src.Interface {
				continue
			}
			found = true
		} else if !ifc.Up || ifc.Loopback {
			continue
		}
		for _, addr := range ifc.Addrs {
			if addr = addr.Unmap(); addr.Is4() && !addr.IsLoopback() {
				return addr, nil
			}
		}
	}
	if src.Interface != "" && !found {
		return netip.Addr{}, fmt.Errorf("%w: %q", ErrInterfaceNotFound, src.Interface)
	}
	if src.Interface != "" {
		return netip.Addr{}, fmt.Errorf("%w on interface %q", ErrNoIPv4, src.Interface)
	}
	return netip.Addr{}, fmt.Errorf("%w on any up, non-loopback interface", ErrNoIPv4)
}

// SystemInterfaces lists the machine's network interfaces.
func SystemInterfaces() ([]Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifaces))
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		i := Interface{Name: ifc.Name, Up: ifc.Flags&net.FlagUp != 0, Loopback: ifc.Flags&net.FlagLoopback != 0}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					i.Addrs = append(i.Addrs, ip)
				}
			}
		}
		out = append(out, i)
	}
	return out, nil
}
