// Package httpnode is the http node type: one HTTP request per visit, with an SSRF policy
// (allowedHosts, deniedHosts, blockPrivateNetworks and the operator switch
// PLAITA_HTTP_BLOCK_PRIVATE), manual redirects checked hop by hop, a response byte cap and a
// connection bound. The operator's settings (the PLAITA_HTTP_* variables) arrive as Options,
// fixed when New runs.
//
// Params:
//
//	method               GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS
//	url                  required; template; at run time an absolute http(s) URL with a host
//	headers              object of header name → template
//	query                object of name → template (a list gives the name several times)
//	body                 any JSON value, templates allowed: an object, array, number or boolean
//	                     is sent as JSON (application/json), a string as text/plain
//	timeout              seconds for the whole request including redirects and body (default 30)
//	maxRedirects         redirects followed (default 5); 0 returns the 3xx response as it is
//	allowedHosts         host names ("api.example.com", "*.example.com", or an IP address)
//	deniedHosts          the same; an IP entry also refuses any name resolving to it
//	blockPrivateNetworks refuse non-public addresses (see blockedRanges); OR-ed with
//	                     PLAITA_HTTP_BLOCK_PRIVATE, so the operator can only tighten
//	credentialHeaders    object of header name → {"credential": NAME, "prefix", "suffix"}: the
//	                     tenant's credential, opened at send time (credentials.go)
//
// Output: {"RESPONSE": {"status", "headers", "body", "url"}}; flows read NODE.fetch.RESPONSE.status.
// A response with more header bytes than HeaderLimits.MaxBytes (64 KiB) fails; of the headers
// that pass, the result keeps a bounded part and then adds "headers_truncated": true and
// "headers_dropped": the number of values left out (see HeaderLimits).
//
// When any policy is in force the host is resolved once, every address is checked, and the
// connection goes only to a checked address (the Host header and TLS SNI stay the name).
// Proxy environment variables are never used, with or without a policy.
package httpnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
)

// Defaults and bounds of the params.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
	MaxTimeoutSeconds   = 86400
	MaxMaxRedirects     = 100
)

// Methods are the accepted request methods.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Defaults of Options, the same as those of the variables behind them.
const (
	DefaultMaxResponseBytes = 10 << 20         // PLAITA_HTTP_MAX_RESPONSE_BYTES
	DefaultDNSTTL           = 30 * time.Second // PLAITA_HTTP_DNS_TTL
	DefaultConnectorLimit   = 100              // PLAITA_HTTP_CONNECTOR_LIMIT
)

// Options are the operator's settings of the http node, fixed when New runs. A zero field takes
// the default noted; DefaultOptions spells every default out.
type Options struct {
	// MaxResponseBytes caps a response body (PLAITA_HTTP_MAX_RESPONSE_BYTES); 0 or negative =
	// DefaultMaxResponseBytes: the body is never unlimited.
	MaxResponseBytes int64
	// DNSTTL is how long an answer of the SSRF check's DNS cache lives (PLAITA_HTTP_DNS_TTL);
	// 0 or negative = no cache, every request looks the name up (DefaultOptions has
	// DefaultDNSTTL).
	DNSTTL time.Duration
	// ConnectorLimit bounds the requests in flight across every http node of one Type
	// (PLAITA_HTTP_CONNECTOR_LIMIT); 0 or negative = DefaultConnectorLimit.
	ConnectorLimit int
	// Cookies gives each execution a cookie jar of its own (PLAITA_HTTP_COOKIES); off = no
	// cookies are kept.
	Cookies bool
	// BlockPrivate refuses loopback, private and link-local targets for every http node, as if
	// each set blockPrivateNetworks (PLAITA_HTTP_BLOCK_PRIVATE).
	BlockPrivate bool
}

// DefaultOptions are the settings of a worker whose environment sets none of the variables.
func DefaultOptions() Options {
	return Options{MaxResponseBytes: DefaultMaxResponseBytes, DNSTTL: DefaultDNSTTL, ConnectorLimit: DefaultConnectorLimit}
}

// withDefaults fills the zero fields that have a default.
func (o Options) withDefaults() Options {
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.ConnectorLimit <= 0 {
		o.ConnectorLimit = DefaultConnectorLimit
	}
	o.DNSTTL = max(o.DNSTTL, 0)
	return o
}

// Type is the http node type. One Type shares its connection pool (for requests under no
// policy), DNS cache, connection bound and cookie jars across every http node it prepares.
type Type struct {
	opts     Options
	maxBody  int // Options.MaxResponseBytes as readCapped counts
	log      zerolog.Logger
	resolver Resolver
	tls      *tls.Config
	dial     dialFunc
	now      func() time.Time
	headers  HeaderLimits

	dns    dnsCache
	conns  chan struct{} // one token per request in flight, Options.ConnectorLimit in all
	jars   jars
	shared *http.Transport
}

// Option adjusts New.
type Option func(*Type)

// WithResolver replaces net.DefaultResolver for every lookup the node makes.
func WithResolver(r Resolver) Option { return func(t *Type) { t.resolver = r } }

// WithTLSConfig sets the client TLS configuration (e.g. RootCAs for a private CA). The server
// name is always the URL's host: a ServerName set here is ignored.
func WithTLSConfig(c *tls.Config) Option {
	return func(t *Type) {
		if c != nil {
			c = c.Clone()
			c.ServerName = ""
		}
		t.tls = c
	}
}

// withDial replaces the dialer (tests record and fence the addresses dialed).
func withDial(d dialFunc) Option { return func(t *Type) { t.dial = d } }

// withClock replaces time.Now for the DNS cache and the cookie jars.
func withClock(now func() time.Time) Option { return func(t *Type) { t.now = now } }

// New returns the http node type with the operator's settings o.
func New(o Options, log zerolog.Logger, opts ...Option) *Type {
	o = o.withDefaults()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := &Type{opts: o, maxBody: int(min(o.MaxResponseBytes, math.MaxInt)), log: log,
		resolver: net.DefaultResolver, dial: d.DialContext, now: time.Now, conns: make(chan struct{}, o.ConnectorLimit)}
	for _, opt := range opts {
		opt(t)
	}
	if t.resolver == nil {
		t.resolver = net.DefaultResolver
	}
	t.headers = t.headers.withDefaults()
	t.shared = t.newTransport(t.sharedDialer())
	return t
}

// CloseIdleConnections closes the idle connections of the shared pool.
func (t *Type) CloseIdleConnections() { t.shared.CloseIdleConnections() }

// node is one prepared http node.
type node struct {
	t            *Type
	method       string
	url          *engine.Value
	headers      *engine.Value // object
	query        *engine.Value // object
	body         *engine.Value // nil: no body
	timeout      time.Duration
	maxRedirects int
	allowed      []hostPattern
	denied       []hostPattern
	block        bool
	creds        []credentialHeader // credentialHeaders (credentials.go)
}

var params = []string{"method", "url", "headers", "query", "body", "timeout", "maxRedirects",
	"allowedHosts", "deniedHosts", "blockPrivateNetworks", "credentialHeaders"}

// forbiddenHeaders are set by the client itself: the Host header is the URL's host (what the
// policy checked), framing headers follow the body.
var forbiddenHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection"}

// Prepare validates the params and compiles their templates.
func (t *Type) Prepare(n *engine.Node, pc *engine.PrepareContext) engine.Runner {
	p := pc.Params(params...)
	nd := &node{t: t, method: "GET", timeout: DefaultTimeout, maxRedirects: DefaultMaxRedirects}

	if p.Has("method") {
		m := p.String("method", false)
		if up := strings.ToUpper(m); slices.Contains(Methods, up) {
			nd.method = up
		} else {
			pc.Problem(pc.ParamsPath("method"), "%q: use one of %s", m, strings.Join(Methods, ", "))
		}
	}

	rawURL := p.String("url", true)
	if rawURL != "" {
		if !strings.Contains(rawURL, "{{") {
			if _, err := checkURL(rawURL); err != nil {
				pc.Problem(pc.ParamsPath("url"), "%v", err)
			}
		}
		nd.url = pc.Value(pc.ParamsPath("url"), rawURL)
	}

	nd.headers = prepareObject(p, pc, "headers", func(k string) string {
		if !validHeaderName(k) {
			return "is not a valid header name"
		}
		for _, f := range forbiddenHeaders {
			if strings.EqualFold(k, f) {
				return "is set by the client (the Host header is the url's host)"
			}
		}
		return ""
	})
	plain := map[string]bool{}
	if m, ok := p.Raw("headers", false).(map[string]any); ok {
		for k := range m {
			plain[strings.ToLower(k)] = true
		}
	}
	nd.creds = prepareCredentials(p, pc, plain)
	nd.query = prepareObject(p, pc, "query", func(k string) string {
		if k == "" {
			return "a query parameter needs a name"
		}
		return ""
	})

	if p.Has("body") {
		nd.body = pc.Value(pc.ParamsPath("body"), p.Raw("body", false))
		if nd.method == "HEAD" {
			pc.Problem(pc.ParamsPath("body"), "a HEAD request has no body")
		}
	}

	if p.Has("timeout") {
		s := p.Seconds("timeout", false)
		switch {
		case s == 0:
			pc.Problem(pc.ParamsPath("timeout"), "must be more than 0 seconds (omit it for %g)", DefaultTimeout.Seconds())
		case s > MaxTimeoutSeconds:
			pc.Problem(pc.ParamsPath("timeout"), "must be at most %d seconds", MaxTimeoutSeconds)
		case s > 0:
			nd.timeout = time.Duration(s * float64(time.Second))
		}
	}
	if p.Has("maxRedirects") {
		m := p.Int("maxRedirects", false)
		if m < 0 || m > MaxMaxRedirects {
			pc.Problem(pc.ParamsPath("maxRedirects"), "must be between 0 (do not follow) and %d", MaxMaxRedirects)
		} else {
			nd.maxRedirects = m
		}
	}
	nd.allowed = preparePatterns(p, pc, "allowedHosts")
	nd.denied = preparePatterns(p, pc, "deniedHosts")
	nd.block = p.Bool("blockPrivateNetworks")

	if nd.url == nil {
		return nil
	}
	return nd
}

// prepareObject compiles an object param whose values are string templates (or lists of them
// for query).
func prepareObject(p engine.Params, pc *engine.PrepareContext, name string, badKey func(string) string) *engine.Value {
	if !p.Has(name) {
		return nil
	}
	raw := p.Raw(name, false)
	m, ok := raw.(map[string]any)
	if !ok {
		if raw != nil {
			pc.Problem(pc.ParamsPath(name), "must be an object of names to string templates")
		}
		return nil
	}
	good := true
	for _, k := range sortedKeys(m) {
		v := m[k]
		path := pc.ParamsPath(name) + "." + k
		if why := badKey(k); why != "" {
			pc.Problem(path, "%q %s", k, why)
			good = false
		}
		switch x := v.(type) {
		case string:
		case []any:
			if name != "query" {
				pc.Problem(path, "must be a string (template)")
				good = false
				break
			}
			for i, e := range x {
				if _, ok := e.(string); !ok {
					pc.Problem(fmt.Sprintf("%s[%d]", path, i), "must be a string (template)")
					good = false
				}
			}
		default:
			pc.Problem(path, "must be a string (template)")
			good = false
		}
	}
	if !good {
		return nil
	}
	return pc.Value(pc.ParamsPath(name), m)
}

func preparePatterns(p engine.Params, pc *engine.PrepareContext, name string) []hostPattern {
	if !p.Has(name) {
		return nil
	}
	list := p.Strings(name, false)
	if list == nil {
		return nil // not an array of strings: already reported
	}
	if len(list) == 0 {
		pc.Problem(pc.ParamsPath(name), "must list at least one host (omit it for no %s rule)", name)
		return nil
	}
	out := make([]hostPattern, 0, len(list))
	for i, s := range list {
		hp, err := parsePattern(s)
		if err != nil {
			pc.Problem(fmt.Sprintf("%s[%d]", pc.ParamsPath(name), i), "%v", err)
			continue
		}
		out = append(out, hp)
	}
	return out
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// checkURL parses an absolute http(s) URL with an ASCII host and a valid port.
func checkURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v (url)", ErrInvalidURL, redactRaw(s), unwrapURLError(err))
	}
	return u, checkParsedURL(u)
}

// redactRaw hides the user information of a URL that does not parse.
func redactRaw(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return s[:i+3] + "****" + rest[at:]
	}
	return s
}

func checkParsedURL(u *url.URL) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s (url)", ErrInvalidURL, u.Redacted(), why)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return bad("not an absolute URL (http:// or https://)")
		}
		return bad(fmt.Sprintf("scheme %q is not http or https", u.Scheme))
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return bad("no host")
	}
	host := u.Hostname()
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return bad("the host must be ASCII (punycode for international names)")
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("an IPv6 zone is not allowed in the host")
		}
	} else if err := checkHostName(strings.ToLower(strings.TrimSuffix(host, "."))); err != nil {
		return bad(err.Error())
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %q is not 1 to 65535", p))
		}
	}
	return nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// request is the evaluated request of one visit.
type request struct {
	url    *url.URL
	header http.Header
	body   []byte
	hasBdy bool
}

func (nd *node) build(c *engine.Call) (*request, error) {
	env, lim := c.Env(), c.Limits()
	v, err := nd.url.Eval(env, lim)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	s, ok := v.(string)
	if !ok {
		return nil, engine.Permanent(fmt.Errorf("%w: the url template gave %T, not a string (url)", ErrInvalidURL, v))
	}
	u, err := checkURL(s)
	if err != nil {
		return nil, engine.Permanent(err)
	}
	r := &request{url: u, header: http.Header{}}
	if nd.query != nil {
		v, err := nd.query.Eval(env, lim)
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		q := u.Query()
		m := v.(map[string]any)
		for _, k := range sortedKeys(m) {
			vals, err := scalars(m[k], true)
			if err != nil {
				return nil, engine.Permanent(fmt.Errorf("query.%s: %v (query)", k, err))
			}
			for _, s := range vals {
				q.Add(k, s)
			}
		}
		u.RawQuery = q.Encode()
	}
	if nd.headers != nil {
		v, err := nd.headers.Eval(env, lim)
		if err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		m := v.(map[string]any)
		for _, k := range sortedKeys(m) {
			vals, err := scalars(m[k], false)
			if err != nil {
				return nil, engine.Permanent(fmt.Errorf("headers.%s: %v (headers)", k, err))
			}
			for _, s := range vals {
				if strings.ContainsAny(s, "\r\n\x00") {
					return nil, engine.Permanent(fmt.Errorf("headers.%s: the value holds a line break or NUL (headers)", k))
				}
				r.header.Add(k, s)
			}
		}
	}
	if r.header.Get("User-Agent") == "" {
		r.header.Set("User-Agent", "plaita-http/1")
	}
	if nd.body != nil {
		v, err := nd.body.Eval(env, lim)
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		ctype := "application/json"
		switch x := v.(type) {
		case nil:
		case string:
			r.body, r.hasBdy, ctype = []byte(x), true, "text/plain; charset=utf-8"
		default:
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(x); err != nil {
				return nil, engine.Permanent(fmt.Errorf("body: cannot be sent as JSON: %v (body)", err))
			}
			r.body, r.hasBdy = bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
		}
		if r.hasBdy && r.header.Get("Content-Type") == "" {
			r.header.Set("Content-Type", ctype)
		}
	}
	return r, nil
}

// scalars turns an evaluated header or query value into strings: nil is left out, strings,
// numbers and booleans are rendered, lists (query only) give several values.
func scalars(v any, lists bool) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{x}, nil
	case bool:
		return []string{strconv.FormatBool(x)}, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("not a finite number")
		}
		return []string{strconv.FormatFloat(x, 'f', -1, 64)}, nil
	case int:
		return []string{strconv.Itoa(x)}, nil
	case int64:
		return []string{strconv.FormatInt(x, 10)}, nil
	case []any:
		if lists {
			var out []string
			for _, e := range x {
				if _, nested := e.([]any); nested {
					return nil, errors.New("a list of lists is not a query value")
				}
				s, err := scalars(e, false)
				if err != nil {
					return nil, err
				}
				out = append(out, s...)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("is %T, not a string, number or boolean", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// policy is the node's policy with the operator's switch.
func (nd *node) policy() policy {
	return policy{allowed: nd.allowed, denied: nd.denied, nodeBlock: nd.block, operatorBlock: nd.t.opts.BlockPrivate}
}

// Run sends the request, following redirects hop by hop.
func (nd *node) Run(ctx context.Context, c *engine.Call) (engine.Outcome, error) {
	req, err := nd.build(c)
	if err != nil {
		return engine.Outcome{}, err
	}
	secrets, err := nd.openCredentials(ctx, c, req)
	if err != nil {
		return engine.Outcome{}, err
	}
	return secrets.Outcome(nd.send(ctx, c, req))
}

// send sends the request and reads the answer, following redirects.
func (nd *node) send(ctx context.Context, c *engine.Call, req *request) (engine.Outcome, error) {
	t := nd.t
	pol := nd.policy()

	select {
	case t.conns <- struct{}{}:
	case <-ctx.Done():
		return engine.Outcome{}, fmt.Errorf("waiting for a connection slot (PLAITA_HTTP_CONNECTOR_LIMIT): %w", ctx.Err())
	}
	defer func() { <-t.conns }()

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, nd.timeout)
	defer cancel()

	tr := t.shared
	var pins *pinSet
	if pol.active() {
		// A transport of its own: a pooled connection checked under another node's policy is
		// never reused.
		pins = &pinSet{m: map[string][]netip.Addr{}}
		tr = t.newTransport(pins.dialer(t))
		defer tr.CloseIdleConnections()
	}
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if t.opts.Cookies && c.Execution != nil && c.Execution.ExecutionID != "" {
		client.Jar = t.jars.get(c.Execution.ExecutionID, t.now())
	}

	method, u, header := nd.method, req.url, req.header
	body, hasBody := req.body, req.hasBdy
	nodeID := ""
	if c.Node != nil {
		nodeID = c.Node.ID
	}
	for hop := 0; ; hop++ {
		if pins != nil {
			host := canonicalHost(u.Hostname())
			if err := pol.checkName(host); err != nil {
				return nd.refuse(nodeID, u, hop, err)
			}
			// An IP literal is checked as it is written ([::ffff:127.0.0.1] as a mapped address).
			addrs, err := t.lookup(ctx, strings.TrimSuffix(u.Hostname(), "."))
			if err != nil {
				return engine.Outcome{}, nd.netError(parent, ctx, method, u, err)
			}
			if err := pol.checkAddrs(host, addrs); err != nil {
				return nd.refuse(nodeID, u, hop, err)
			}
			pins.set(pinKey(u.Hostname(), defaultPort(u)), addrs)
		}
		var rd io.Reader
		if hasBody {
			rd = bytes.NewReader(body)
		}
		hr, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
		if err != nil {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("%w %q: %v (url)", ErrInvalidURL, u.Redacted(), err))
		}
		hr.Header = header.Clone()
		resp, err := client.Do(hr)
		if err != nil {
			return engine.Outcome{}, nd.netError(parent, ctx, method, u, err)
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" || nd.maxRedirects == 0 {
			return nd.finish(parent, ctx, method, resp)
		}
		// An intermediate hop: its body is dropped unread.
		resp.Body.Close()
		if hop >= nd.maxRedirects {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("%w: more than %d (maxRedirects); the last one, from %s, points to %q",
				ErrTooManyRedirects, nd.maxRedirects, u.Redacted(), loc))
		}
		next, err := u.Parse(loc)
		if err != nil {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("redirect %d from %s: %w %q: %v (redirect Location)",
				hop+1, u.Redacted(), ErrInvalidURL, loc, unwrapURLError(err)))
		}
		if err := checkParsedURL(next); err != nil {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("redirect %d from %s: %w", hop+1, u.Redacted(), err))
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
			if resp.StatusCode == http.StatusSeeOther && method != "HEAD" || method == "POST" {
				method = "GET"
			}
			if method == "GET" || method == "HEAD" {
				body, hasBody = nil, false
				header = header.Clone()
				header.Del("Content-Type")
			}
		}
		if !strings.EqualFold(canonicalHost(next.Hostname()), canonicalHost(u.Hostname())) {
			// Credentials meant for one host do not follow a redirect to another.
			header = header.Clone()
			for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie", "Cookie2", "WWW-Authenticate"} {
				header.Del(h)
			}
			for _, h := range nd.creds {
				header.Del(h.header)
			}
		}
		u = next
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// refuse reports a policy violation: permanent, and logged.
func (nd *node) refuse(nodeID string, u *url.URL, hop int, err error) (engine.Outcome, error) {
	if hop > 0 {
		err = fmt.Errorf("redirect %d to %s: %w", hop, u.Redacted(), err)
	}
	nd.t.log.Warn().Str("event", "http.blocked").Str("node", nodeID).Str("host", u.Hostname()).Msg(err.Error())
	return engine.Outcome{}, engine.Permanent(err)
}

// netError describes a failed request. Network errors and the node's timeout are retryable;
// a cancelled run returns the run's own error.
func (nd *node) netError(parent, ctx context.Context, method string, u *url.URL, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	inner := unwrapURLError(err)
	if errors.Is(err, errUnchecked) {
		return engine.Permanent(fmt.Errorf("%s %s: %w", method, u.Redacted(), inner))
	}
	if headersTooLarge(err) {
		// The same server sends the same headers again: not worth a retry, like a body over
		// PLAITA_HTTP_MAX_RESPONSE_BYTES.
		return engine.Permanent(fmt.Errorf("%s %s: %w: the server sent more than %d bytes of headers (the http node's "+
			"response header cap): %v", method, u.Redacted(), ErrResponseHeadersTooLarge, nd.t.headers.MaxBytes, inner))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: no response within %s (timeout)", method, u.Redacted(), nd.timeout)
	}
	return fmt.Errorf("%s %s: %w", method, u.Redacted(), inner)
}

// finish reads the final response within the byte cap and builds the output.
func (nd *node) finish(parent, ctx context.Context, method string, resp *http.Response) (engine.Outcome, error) {
	defer resp.Body.Close()
	u := resp.Request.URL
	if resp.StatusCode >= 500 {
		return engine.Outcome{}, fmt.Errorf("%s %s: server error %s", method, u.Redacted(), resp.Status)
	}
	data, err := readCapped(resp.Body, resp.ContentLength, nd.t.maxBody)
	if err != nil {
		if errors.Is(err, ErrResponseTooLarge) {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("%s %s: %w", method, u.Redacted(), err))
		}
		return engine.Outcome{}, nd.netError(parent, ctx, method, u, fmt.Errorf("reading the body: %w", err))
	}
	headers, dropped := keptHeaders(resp.Header, nd.t.headers)
	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": headers,
		"body":    decodeBody(resp.Header.Get("Content-Type"), data),
		"url":     u.Redacted(),
	}
	if dropped > 0 {
		out["headers_truncated"], out["headers_dropped"] = true, dropped
	}
	return engine.Outcome{Output: map[string]any{"RESPONSE": out}}, nil
}

// readCapped reads at most limit bytes; one more is an error. It never holds more than
// limit+1 bytes, and refuses a declared Content-Length over the limit without reading.
func readCapped(r io.Reader, contentLength int64, limit int) ([]byte, error) {
	limit = max(limit, 0)
	tooLarge := func() error {
		return fmt.Errorf("%w: response body over %d bytes (PLAITA_HTTP_MAX_RESPONSE_BYTES)", ErrResponseTooLarge, limit)
	}
	if contentLength > int64(limit) {
		return nil, tooLarge()
	}
	hard := limit
	if hard < math.MaxInt {
		hard++
	}
	size := 512
	if contentLength >= 0 {
		size = int(contentLength) + 1
	}
	buf := make([]byte, 0, min(size, hard))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, tooLarge()
			}
			grown := make([]byte, len(buf), min(max(2*cap(buf), 512), hard))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, tooLarge()
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeBody parses a JSON response (application/json or any +json type); anything else, or
// JSON that does not parse, is returned as text.
func decodeBody(ctype string, data []byte) any {
	mt, _, err := mime.ParseMediaType(ctype)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			return v
		}
	}
	return string(data)
}
