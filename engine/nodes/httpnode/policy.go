package httpnode

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Sentinel errors; every one of them reaches the executor wrapped in engine.Permanent.
var (
	// ErrBlocked: the target host or one of its addresses is refused by the SSRF policy
	// (allowedHosts, deniedHosts, blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE).
	ErrBlocked = errors.New("blocked")
	// ErrInvalidURL: the url (or a redirect's Location) is not an absolute http(s) URL with a host.
	ErrInvalidURL = errors.New("invalid url")
	// ErrTooManyRedirects: the response chain is longer than maxRedirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrResponseTooLarge: the response body is over PLAITA_HTTP_MAX_RESPONSE_BYTES.
	ErrResponseTooLarge = errors.New("response body too large")
)

// ruleBlockPrivate names the two switches of the private-network rule in messages.
const ruleBlockPrivate = "blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE"

// blockedRange is one non-public network refused when blockPrivateNetworks is in effect.
type blockedRange struct {
	prefix netip.Prefix
	what   string
}

func rng(cidr, what string) blockedRange {
	return blockedRange{prefix: netip.MustParsePrefix(cidr), what: what}
}

// blockedRanges are refused when blockPrivateNetworks (or PLAITA_HTTP_BLOCK_PRIVATE) is in
// effect, checked in order (the first match names the reason). On top of this list:
//   - an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as its IPv4 address;
//   - a NAT64 (64:ff9b::/96, checked before ::/8) or 6to4 (2002::/16) address is judged by the IPv4 address it embeds;
//   - any IPv6 address outside the global unicast space 2000::/3 is refused;
//   - anything netip does not call global unicast is refused.
var blockedRanges = []blockedRange{
	// IPv4
	rng("0.0.0.0/8", `a "this network" address (0.0.0.0/8, includes the unspecified 0.0.0.0)`),
	rng("10.0.0.0/8", "a private address (RFC 1918 10.0.0.0/8)"),
	rng("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
	rng("127.0.0.0/8", "a loopback address"),
	rng("169.254.0.0/16", "a link-local address (169.254.0.0/16, cloud metadata)"),
	rng("172.16.0.0/12", "a private address (RFC 1918 172.16.0.0/12)"),
	rng("192.0.0.0/24", "an IETF protocol assignment address (192.0.0.0/24)"),
	rng("192.0.2.0/24", "a documentation address (192.0.2.0/24)"),
	rng("192.88.99.0/24", "a 6to4 relay anycast address (192.88.99.0/24, deprecated)"),
	rng("192.168.0.0/16", "a private address (RFC 1918 192.168.0.0/16)"),
	rng("198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"),
	rng("198.51.100.0/24", "a documentation address (198.51.100.0/24)"),
	rng("203.0.113.0/24", "a documentation address (203.0.113.0/24)"),
	rng("224.0.0.0/4", "a multicast address (224.0.0.0/4)"),
	rng("255.255.255.255/32", "the broadcast address"),
	rng("240.0.0.0/4", "a reserved address (240.0.0.0/4)"),
	// IPv6
	rng("::/128", "the unspecified address"),
	rng("::1/128", "a loopback address"),
	rng("64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48)"),
	rng("::/8", "a reserved IPv6 address (::/8, includes IPv4-compatible ::/96)"),
	rng("100::/64", "a discard-only address (100::/64)"),
	rng("2001::/23", "an IETF protocol assignment address (2001::/23, includes Teredo 2001::/32)"),
	rng("2001:db8::/32", "a documentation address (2001:db8::/32)"),
	rng("3fff::/20", "a documentation address (3fff::/20)"),
	rng("5f00::/16", "an SRv6 SID address (5f00::/16)"),
	rng("fc00::/7", "a unique local address (fc00::/7)"),
	rng("fe80::/10", "a link-local address (fe80::/10)"),
	rng("fec0::/10", "a site-local address (fec0::/10, deprecated)"),
	rng("ff00::/8", "a multicast address (ff00::/8)"),
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	globalV6  = netip.MustParsePrefix("2000::/3")
)

// classify says why addr is not a public destination ("a loopback address"), or "" when it is.
func classify(addr netip.Addr) string {
	addr = addr.WithZone("")
	if !addr.IsValid() {
		return "not a valid address"
	}
	if addr.Is4In6() {
		v4 := addr.Unmap()
		if why := classify(v4); why != "" {
			return "an IPv4-mapped address of " + v4.String() + ", " + why
		}
		return ""
	}
	if nat64.Contains(addr) { // before ::/8, which holds it
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if why := classify(v4); why != "" {
			return "a NAT64 address of " + v4.String() + ", " + why
		}
		return ""
	}
	for _, b := range blockedRanges {
		if b.prefix.Contains(addr) {
			return b.what
		}
	}
	if addr.Is6() {
		switch {
		case sixToFour.Contains(addr):
			b := addr.As16()
			v4 := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
			if why := classify(v4); why != "" {
				return "a 6to4 address of " + v4.String() + ", " + why
			}
		case !globalV6.Contains(addr):
			return "outside the IPv6 global unicast space (2000::/3)"
		}
	}
	if !addr.IsGlobalUnicast() {
		return "not a global unicast address"
	}
	return ""
}

// hostPattern is one allowedHosts / deniedHosts entry: an exact host name, a "*.example.com"
// suffix wildcard (any subdomain, not example.com itself) or an IP address.
type hostPattern struct {
	raw    string
	exact  string     // canonical name or IP text
	suffix string     // ".example.com" for "*.example.com"
	ip     netip.Addr // valid when the entry is an IP address
}

// parsePattern validates one entry.
func parsePattern(s string) (hostPattern, error) {
	p := hostPattern{raw: s}
	t := strings.TrimSpace(s)
	if t != s || s == "" {
		return p, errors.New("must be a non-empty host name without spaces")
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		if a.Zone() != "" {
			return p, errors.New("an IP address entry must not have a zone")
		}
		p.ip = a.Unmap()
		p.exact = p.ip.String()
		return p, nil
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		if err := checkHostName(rest); err != nil {
			return p, fmt.Errorf("wildcard %q: %v (use *.example.com)", s, err)
		}
		p.suffix = "." + rest
		return p, nil
	}
	if strings.Contains(name, "*") {
		return p, fmt.Errorf("%q: a wildcard is only allowed as a leading *. (e.g. *.example.com)", s)
	}
	if err := checkHostName(name); err != nil {
		return p, fmt.Errorf("%q: %v", s, err)
	}
	p.exact = name
	return p, nil
}

// checkHostName accepts an ASCII DNS name: labels of letters, digits, '-' and '_'.
func checkHostName(s string) error {
	if s == "" || len(s) > 253 {
		return errors.New("not a host name (1 to 253 characters)")
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a host name (empty or over-long label); a host name, not a URL or host:port")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("not a host name (character %q); a host name, not a URL or host:port (punycode for international names)", c)
			}
		}
	}
	return nil
}

// canonicalHost is the form a URL's host is matched in: lower case, no trailing dot, IP
// addresses in netip's text form (IPv4-mapped IPv6 as IPv4).
func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone("").Unmap().String()
	}
	return h
}

// matchHost reports whether the canonical host name h matches the pattern.
func (p hostPattern) matchHost(h string) bool {
	if p.suffix != "" {
		return len(h) > len(p.suffix) && strings.HasSuffix(h, p.suffix)
	}
	return h == p.exact
}

// matchAddr reports whether an IP entry names addr.
func (p hostPattern) matchAddr(addr netip.Addr) bool {
	return p.ip.IsValid() && p.ip == addr.WithZone("").Unmap()
}

// policy is the SSRF policy in effect for one request.
type policy struct {
	allowed       []hostPattern
	denied        []hostPattern
	nodeBlock     bool // the node's blockPrivateNetworks
	operatorBlock bool // Options.BlockPrivate (PLAITA_HTTP_BLOCK_PRIVATE)
}

func (p policy) blockPrivate() bool { return p.nodeBlock || p.operatorBlock }

// active: any rule is in force, so the request resolves once, checks and pins.
func (p policy) active() bool {
	return len(p.allowed) > 0 || len(p.denied) > 0 || p.blockPrivate()
}

func blocked(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBlocked, fmt.Sprintf(format, args...))
}

// checkName applies deniedHosts then allowedHosts to the canonical host.
func (p policy) checkName(host string) error {
	for _, d := range p.denied {
		if d.matchHost(host) {
			return blocked("host %q matches deniedHosts entry %q (deniedHosts)", host, d.raw)
		}
	}
	if len(p.allowed) == 0 {
		return nil
	}
	for _, a := range p.allowed {
		if a.matchHost(host) {
			return nil
		}
	}
	return blocked("host %q is not in allowedHosts (allowedHosts)", host)
}

// checkAddrs checks every address host resolved to: one refused address refuses the host.
func (p policy) checkAddrs(host string, addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return blocked("host %q has no address to check (%s)", host, "allowedHosts / deniedHosts / "+ruleBlockPrivate)
	}
	literal := false
	if a, err := netip.ParseAddr(host); err == nil && len(addrs) == 1 && a.Unmap() == addrs[0].WithZone("").Unmap() {
		literal = true
	}
	for _, a := range addrs {
		for _, d := range p.denied {
			if d.matchAddr(a) {
				if literal {
					return blocked("%s matches deniedHosts entry %q (deniedHosts)", a, d.raw)
				}
				return blocked("host %q resolves to %s, which matches deniedHosts entry %q (deniedHosts)", host, a, d.raw)
			}
		}
		if !p.blockPrivate() {
			continue
		}
		if why := classify(a); why != "" {
			if literal {
				return blocked("%s is %s (%s)", a, why, ruleBlockPrivate)
			}
			return blocked("host %q resolves to %s, %s (%s)", host, a, why, ruleBlockPrivate)
		}
	}
	return nil
}
