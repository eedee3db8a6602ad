package httpnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Resolver answers the addresses of a host name. net.DefaultResolver is one; tests inject
// their own to simulate DNS (and DNS rebinding).
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// dialFunc opens a connection; the default is a net.Dialer.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// errUnchecked: the transport asked for a connection the policy never checked. It cannot
// happen with Proxy nil (the transport dials the request's own host); the pinned dialer fails
// closed all the same.
var errUnchecked = errors.New("no checked address for this host (internal error: refusing to dial unchecked)")

// ---- DNS with a TTL cache (PLAITA_HTTP_DNS_TTL) ----

const dnsCacheMax = 4096

type dnsEntry struct {
	addrs   []netip.Addr
	expires time.Time
}

type dnsCache struct {
	mu sync.Mutex
	m  map[string]dnsEntry
}

func (c *dnsCache) get(host string, now time.Time) ([]netip.Addr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[host]
	if !ok {
		return nil, false
	}
	if !now.Before(e.expires) {
		delete(c.m, host)
		return nil, false
	}
	return append([]netip.Addr(nil), e.addrs...), true
}

func (c *dnsCache) put(host string, addrs []netip.Addr, expires time.Time, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]dnsEntry{}
	}
	if len(c.m) >= dnsCacheMax {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= dnsCacheMax {
			clear(c.m) // a flood of distinct names: start over rather than grow
		}
	}
	c.m[host] = dnsEntry{addrs: append([]netip.Addr(nil), addrs...), expires: expires}
}

// lookup resolves host (an IP literal resolves to itself), through the cache when
// Options.DNSTTL (PLAITA_HTTP_DNS_TTL) is above 0.
func (t *Type) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	key := strings.ToLower(strings.TrimSuffix(host, "."))
	ttl := t.opts.DNSTTL
	now := t.now()
	if ttl > 0 {
		if addrs, ok := t.dns.get(key, now); ok {
			return addrs, nil
		}
	}
	ips, err := t.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			continue
		}
		// A 16-byte IPv4 address from the resolver is a representation, not a mapped address.
		a = a.Unmap()
		if ip.Zone != "" && a.Is6() {
			a = a.WithZone(ip.Zone)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	if ttl > 0 {
		t.dns.put(key, addrs, now.Add(ttl), now)
	}
	return addrs, nil
}

// dialAddrs tries each address in turn.
func (t *Type) dialAddrs(ctx context.Context, network string, addrs []netip.Addr, port string) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		conn, err := t.dial(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// pinKey is how a dial address and a checked URL host meet: host:port, host canonical.
func pinKey(host, port string) string {
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port)
}

// pinSet holds the addresses the policy checked, per host:port, for one execution of a node.
// Its dialer connects only to them: no second lookup happens between check and connect, so a
// DNS answer that changes in between (rebinding) is never used.
type pinSet struct {
	mu sync.Mutex
	m  map[string][]netip.Addr
}

func (p *pinSet) set(key string, addrs []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[key] = addrs
}

func (p *pinSet) dialer(t *Type) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		addrs := p.m[pinKey(host, port)]
		p.mu.Unlock()
		if len(addrs) == 0 {
			return nil, fmt.Errorf("dial %s: %w", addr, errUnchecked)
		}
		return t.dialAddrs(ctx, network, addrs, port)
	}
}

// newTransport builds a transport that never uses a proxy (HTTP_PROXY / HTTPS_PROXY /
// NO_PROXY are ignored) and dials through dial; TLS verifies the certificate against the URL's
// host name, which is also the SNI. Response headers are bounded by t.headers.MaxBytes (the
// default of net/http is 10 MiB).
func (t *Type) newTransport(dial dialFunc) *http.Transport {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: t.headers.MaxBytes,
	}
	if t.tls != nil {
		tr.TLSClientConfig = t.tls.Clone()
	}
	return tr
}

// sharedDialer serves requests under no policy: it resolves through the same resolver and
// cache, and connects to whatever the name resolves to.
func (t *Type) sharedDialer() dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addrs, err := t.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		return t.dialAddrs(ctx, network, addrs, port)
	}
}

// ---- PLAITA_HTTP_COOKIES: one jar per execution ----

const (
	jarsMax  = 4096
	jarsIdle = time.Hour
)

type jarEntry struct {
	jar  http.CookieJar
	used time.Time
}

type jars struct {
	mu sync.Mutex
	m  map[string]*jarEntry
}

// get returns the execution's jar, creating it; jars idle for an hour are dropped.
func (j *jars) get(id string, now time.Time) http.CookieJar {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string]*jarEntry{}
	}
	if e, ok := j.m[id]; ok {
		e.used = now
		return e.jar
	}
	if len(j.m) >= jarsMax {
		var oldest string
		for k, e := range j.m {
			if now.Sub(e.used) > jarsIdle {
				delete(j.m, k)
				continue
			}
			if oldest == "" || e.used.Before(j.m[oldest].used) {
				oldest = k
			}
		}
		if len(j.m) >= jarsMax && oldest != "" {
			delete(j.m, oldest)
		}
	}
	jar, _ := cookiejar.New(nil) // never fails without options
	j.m[id] = &jarEntry{jar: jar, used: now}
	return jar
}
