package httpnode

import (
	"context"
	"fmt"
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
		if err := model.ValidCredentialName(h.name); err != nil {
			pc.Problem(path+".credential", "%v", err)
			continue
		}
		out = append(out, h)
	}
	return out
}

// openCredentials opens the request's credentials and sets their headers; the redactor holds
// the values, for the output and the errors.
func (nd *node) openCredentials(ctx context.Context, c *engine.Call, r *request) (engine.Redactor, error) {
	var out engine.Redactor
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
		out = append(out, engine.Secret{Name: h.name, Value: string(v)})
	}
	return out, nil
}
