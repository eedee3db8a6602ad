package httpnode

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	"plaita/engine"
	"plaita/model"
)

// Credentials in a request (docs/credentials.md). The param credentialHeaders names, for a
// header, a credential of the execution's tenant and the text around its value:
//
//	"credentialHeaders": {"Authorization": {"credential": "github_token", "prefix": "Bearer "}}
//
// The value is opened when the request is sent and goes into that header only: it is not a
// template (no expression sees it), a redirect to another host drops the header, and the
// node's output and errors are scrubbed of it (a server that echoes the header back does not
// put it in the execution's state): each occurrence, URL-escaped or in base64 too, becomes
// "[credential NAME]".

// credentialHeader is one header's credential.
type credentialHeader struct {
	header, name, prefix, suffix string
}

// prepareCredentials reads credentialHeaders.
func prepareCredentials(p engine.Params, pc *engine.PrepareContext, plain map[string]bool) []credentialHeader {
	if !p.Has("credentialHeaders") {
		return nil
	}
	m, ok := p.Raw("credentialHeaders", false).(map[string]any)
	if !ok {
		pc.Problem(pc.ParamsPath("credentialHeaders"), `must be an object of header names to {"credential": NAME, "prefix": …, "suffix": …}`)
		return nil
	}
	var out []credentialHeader
	for _, k := range sortedKeys(m) {
		path := pc.ParamsPath("credentialHeaders") + "." + k
		if !validHeaderName(k) {
			pc.Problem(path, "%q is not a valid header name", k)
			continue
		}
		for _, f := range forbiddenHeaders {
			if strings.EqualFold(k, f) {
				pc.Problem(path, "%q is set by the client", k)
			}
		}
		if plain[strings.ToLower(k)] {
			pc.Problem(path, "%q is in headers too: a header is either a template or a credential", k)
		}
		spec, ok := m[k].(map[string]any)
		if !ok {
			pc.Problem(path, `must be {"credential": NAME, "prefix": …, "suffix": …}`)
			continue
		}
		h := credentialHeader{header: k}
		for field, v := range spec {
			s, isString := v.(string)
			switch {
			case !isString:
				pc.Problem(path+"."+field, "must be a string")
			case field == "credential":
				h.name = s
			case field == "prefix":
				h.prefix = s
			case field == "suffix":
				h.suffix = s
			default:
				pc.Problem(path+"."+field, "unknown field (credential, prefix, suffix)")
			}
		}
		if err := validCredentialName(h.name); err != nil {
			pc.Problem(path+".credential", "%v", err)
			continue
		}
		out = append(out, h)
	}
	return out
}

// validCredentialName is store.ValidCredentialName's rule (the engine does not import store).
func validCredentialName(name string) error {
	ok := len(name) > 0 && len(name) <= 128 && (name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
	for i := 0; ok && i < len(name); i++ {
		b := name[i]
		ok = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
	}
	if !ok {
		return fmt.Errorf("credential name %q: 1–128 letters, digits and _ . -, starting with a letter", name)
	}
	return nil
}

// secret is an opened credential, for the scrubber.
type secret struct{ name, value string }

// openCredentials opens the request's credentials and sets their headers.
func (nd *node) openCredentials(ctx context.Context, c *engine.Call, r *request) ([]secret, error) {
	var out []secret
	for _, h := range nd.creds {
		v, err := c.Credential(ctx, h.name)
		if err != nil {
			err = fmt.Errorf("credential %s for header %s: %w", h.name, h.header, err)
			if !model.IsTransient(err) { // a missing credential stays missing: no retry
				err = engine.Permanent(err)
			}
			return nil, err
		}
		if strings.ContainsAny(string(v), "\r\n") {
			return nil, engine.Permanent(fmt.Errorf("credential %s for header %s: a header value cannot hold a line break", h.name, h.header))
		}
		r.header.Set(h.header, h.prefix+string(v)+h.suffix)
		out = append(out, secret{name: h.name, value: string(v)})
	}
	return out, nil
}

// scrubber replaces the opened values in what the node returns.
type scrubber []secret

// minScrub is the shortest value scrubbed: a shorter one would blank out common text.
const minScrub = 4

func (s scrubber) text(t string) string {
	for _, c := range s {
		if len(c.value) < minScrub {
			continue
		}
		mark := "[credential " + c.name + "]"
		for _, form := range []string{c.value, url.QueryEscape(c.value), url.PathEscape(c.value),
			base64.StdEncoding.EncodeToString([]byte(c.value)), base64.RawURLEncoding.EncodeToString([]byte(c.value))} {
			t = strings.ReplaceAll(t, form, mark)
		}
	}
	return t
}

// value scrubs a decoded JSON value (strings in place, object keys too).
func (s scrubber) value(v any) any {
	switch x := v.(type) {
	case string:
		return s.text(x)
	case []any:
		for i := range x {
			x[i] = s.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.text(k)] = s.value(e)
		}
		return out
	case []string:
		for i := range x {
			x[i] = s.text(x[i])
		}
		return x
	}
	return v
}

// outcome scrubs an outcome and its error.
func (s scrubber) outcome(o engine.Outcome, err error) (engine.Outcome, error) {
	if len(s) == 0 {
		return o, err
	}
	if o.Output != nil {
		o.Output = s.value(o.Output)
	}
	if err != nil {
		if t := s.text(err.Error()); t != err.Error() {
			err = &scrubbedError{text: t, err: err}
		}
	}
	return o, err
}

// scrubbedError keeps an error's kind (errors.Is, engine.Permanent) with a message that no
// longer holds an opened value.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }
