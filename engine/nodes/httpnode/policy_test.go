package httpnode

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	blocked := map[string]string{
		"0.0.0.0":            "this network",
		"0.1.2.3":            "this network",
		"10.0.0.1":           "private",
		"100.64.0.1":         "carrier-grade NAT",
		"100.127.255.255":    "carrier-grade NAT",
		"127.0.0.1":          "loopback",
		"127.255.0.9":        "loopback",
		"169.254.169.254":    "link-local",
		"172.16.0.1":         "private",
		"172.31.255.255":     "private",
		"192.0.0.170":        "IETF protocol",
		"192.0.2.1":          "documentation",
		"192.88.99.1":        "6to4 relay",
		"192.168.1.1":        "private",
		"198.18.0.1":         "benchmarking",
		"198.51.100.7":       "documentation",
		"203.0.113.9":        "documentation",
		"224.0.0.1":          "multicast",
		"239.255.255.250":    "multicast",
		"240.0.0.1":          "reserved",
		"255.255.255.255":    "broadcast",
		"::":                 "unspecified",
		"::1":                "loopback",
		"::127.0.0.1":        "reserved IPv6",
		"::ffff:127.0.0.1":   "IPv4-mapped address of 127.0.0.1, a loopback",
		"::ffff:10.0.0.1":    "IPv4-mapped address of 10.0.0.1, a private",
		"::ffff:169.254.1.1": "link-local",
		"64:ff9b::7f00:1":    "NAT64 address of 127.0.0.1",
		"64:ff9b:1::1":       "local-use NAT64",
		"100::1":             "discard-only",
		"2001::1":            "Teredo",
		"2001:db8::1":        "documentation",
		"2002:7f00:1::1":     "6to4 address of 127.0.0.1",
		"2002:a9fe:a9fe::1":  "6to4 address of 169.254.169.254",
		"3fff::1":            "documentation",
		"fc00::1":            "unique local",
		"fd12:3456::1":       "unique local",
		"fe80::1":            "link-local",
		"fe80::1%eth0":       "link-local",
		"fec0::1":            "site-local",
		"ff02::1":            "multicast",
		"4000::1":            "outside the IPv6 global unicast",
	}
	for s, want := range blocked {
		why := classify(netip.MustParseAddr(s))
		if !strings.Contains(why, want) {
			t.Errorf("%s: %q, want it to mention %q", s, why, want)
		}
	}
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.15.255.255",
		"172.32.0.0", "192.169.0.1", "223.255.255.255", "::ffff:93.184.216.34", "64:ff9b::808:808",
		"2002:808:808::1", "2606:4700::1111", "2a00:1450::1"} {
		if why := classify(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s is public, classified %q", s, why)
		}
	}
	if classify(netip.Addr{}) == "" {
		t.Error("the zero Addr passes")
	}
}

func TestHostPatterns(t *testing.T) {
	cases := []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"api.example.com", []string{"api.example.com"}, []string{"example.com", "x.api.example.com", "api.example.com.evil"}},
		{"API.Example.COM.", []string{"api.example.com"}, []string{"example.com"}},
		{"*.example.com", []string{"a.example.com", "a.b.example.com"}, []string{"example.com", "badexample.com", "a.example.co"}},
		{"10.0.0.1", []string{"10.0.0.1"}, []string{"10.0.0.2", "10.0.0.1.example.com"}},
		{"::ffff:10.0.0.1", []string{"10.0.0.1"}, nil},
		{"[2001:db8::1]", []string{"2001:db8::1"}, nil},
	}
	for _, c := range cases {
		p, err := parsePattern(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		for _, h := range c.match {
			if !p.matchHost(canonicalHost(h)) {
				t.Errorf("%q should match %q", c.pattern, h)
			}
		}
		for _, h := range c.miss {
			if p.matchHost(canonicalHost(h)) {
				t.Errorf("%q should not match %q", c.pattern, h)
			}
		}
	}
	for _, bad := range []string{"", " x.test", "*", "*.", "a.*.com", "*x.com", "http://x.com", "x.com:80", "x.com/path",
		"ex ample.com", "fe80::1%eth0", "ü.test", "a..b"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPolicyChecks(t *testing.T) {
	pat := func(ss ...string) []hostPattern {
		var out []hostPattern
		for _, s := range ss {
			p, err := parsePattern(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	var none policy
	if none.active() {
		t.Error("the empty policy is active")
	}
	if !(policy{operatorBlock: true}).active() || !(policy{nodeBlock: true}).active() || !(policy{allowed: pat("a.test")}).active() {
		t.Error("a policy is not active")
	}
	p := policy{operatorBlock: true}
	// Every address counts: one private address refuses the host.
	err := p.checkAddrs("x.test", addrs("93.184.216.34", "127.0.0.1"))
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "127.0.0.1, a loopback") {
		t.Errorf("mixed answer: %v", err)
	}
	if err := p.checkAddrs("x.test", addrs("93.184.216.34", "2606:4700::1")); err != nil {
		t.Errorf("public answer: %v", err)
	}
	if err := p.checkAddrs("x.test", nil); !errors.Is(err, ErrBlocked) {
		t.Errorf("no addresses: %v", err)
	}
	// Without blockPrivate, private addresses pass; denied IPs do not.
	p = policy{denied: pat("10.0.0.1")}
	if err := p.checkAddrs("x.test", addrs("127.0.0.1")); err != nil {
		t.Errorf("no blockPrivate: %v", err)
	}
	if err := p.checkAddrs("x.test", addrs("::ffff:10.0.0.1")); !errors.Is(err, ErrBlocked) {
		t.Errorf("denied IP via mapped answer: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	for _, good := range []string{"http://x.test", "https://x.test:8443/a?b=c", "HTTP://X.TEST/", "http://1.2.3.4/",
		"http://[2001:db8::1]:80/", "http://user:pw@x.test/", "http://x.test./"} {
		if _, err := checkURL(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "x.test", "/path", "ftp://x.test/", "file:///etc/passwd", "gopher://x", "http://",
		"http:///path", "http:x.test", "http://x.test:0/", "http://x.test:99999/", "http://ü.test/", "http://[fe80::1%25eth0]/",
		"http://x_y z.test/", "javascript:alert(1)", "http://%41.test/"} {
		_, err := checkURL(bad)
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), "(url)") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := checkURL("http://user:secret@x.test:bad/"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("password in the message: %v", err)
	}
}
