package httpserver

import (
	"fmt"
	"net"
	"strings"

	"github.com/labstack/echo/v4"
)

// ParseTrustedProxies reads a comma-separated list of CIDRs (a bare
// address is a /32 or /128) for Config.TrustedProxies.
func ParseTrustedProxies(list string) ([]*net.IPNet, error) {
	var nets []*net.IPNet
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("trusted proxy %q: not an address or a CIDR", s)
			}
			bits := 8 * net.IPv6len
			if ip.To4() != nil {
				ip, bits = ip.To4(), 8*net.IPv4len
			}
			nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// clientIP is how a request's client address (echo's RealIP, which the
// logs, the audit trail and the sign-in delays use) is found. Without
// trusted proxies it is the peer's address: X-Forwarded-For is anyone's
// to write. With them, a request whose peer is one of them has its
// address taken from X-Forwarded-For: the right-most address that is not a
// trusted proxy, the last hop no proxy of ours vouches for. Loopback and
// private networks are not trusted unless listed.
func clientIP(proxies []*net.IPNet) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range proxies {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
