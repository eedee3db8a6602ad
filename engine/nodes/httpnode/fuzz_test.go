package httpnode

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzHostPolicy runs arbitrary URLs and host entries through the URL check, the pattern parser,
// the name and address checks and the classifier: no panics, and a few invariants.
func FuzzHostPolicy(f *testing.F) {
	for _, s := range [][2]string{
		{"http://api.example.com/x", "*.example.com"},
		{"http://127.0.0.1:8080/", "127.0.0.1"},
		{"http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"},
		{"https://EXAMPLE.com./", "example.com."},
		{"http://[fe80::1%25en0]/", "fe80::1"},
		{"http://0x7f.1/", "*.1"},
		{"http://user@evil.test@good.test/", "good.test"},
		{"http://2130706433/", "*"},
		{"http://a..b/", "a.*.b"},
		{"http://[64:ff9b::a9fe:a9fe]/", "[::1]"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, entry string) {
		u, err := checkURL(raw)
		pat, perr := parsePattern(entry)
		if err != nil {
			return
		}
		host := canonicalHost(u.Hostname())
		if host != strings.ToLower(host) {
			t.Fatalf("canonical host %q is not lower case", host)
		}
		var pats []hostPattern
		if perr == nil {
			pats = []hostPattern{pat}
			if pat.suffix != "" && host == strings.TrimPrefix(pat.suffix, ".") && pat.matchHost(host) {
				t.Fatalf("wildcard %q matches its apex %q", entry, host)
			}
			if pat.exact != "" && pat.exact == host && !pat.matchHost(host) {
				t.Fatalf("exact %q does not match %q", entry, host)
			}
		}
		for _, p := range []policy{
			{allowed: pats}, {denied: pats}, {allowed: pats, denied: pats, operatorBlock: true}, {nodeBlock: true},
		} {
			nameErr := p.checkName(host)
			if len(p.denied) > 0 && p.denied[0].matchHost(host) && nameErr == nil {
				t.Fatalf("denied %q passes %q", entry, host)
			}
			var addrs []netip.Addr
			if a, err := netip.ParseAddr(u.Hostname()); err == nil {
				addrs = append(addrs, a)
				why := classify(a)
				if a.Is4In6() && (why == "") != (classify(a.Unmap()) == "") {
					t.Fatalf("%s and its IPv4 form disagree", a)
				}
				if err := p.checkAddrs(host, addrs); p.blockPrivate() && why != "" && err == nil {
					t.Fatalf("%s (%s) passes", a, why)
				}
			}
		}
	})
}
