package code

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"plaita/engine"
	"plaita/model"
)

// Credentials in the code's environment (docs/credentials.md). The param credentials maps an
// environment variable to a credential of the execution's tenant:
//
//	"credentials": {"GITHUB_TOKEN": "github_token"}
//
// Each value is opened when the code runs and set in the child's environment only — never in
// its arguments (the process list), its stdin or INPUT. On docker the client passes it with
// `-e NAME` from its own environment (the value is not on the client's command line either) and
// the container gets no file of the host's: not the master key. On subprocess only the default
// tenant runs code at all (the runbook's fail-closed rule: a child there has the worker's user
// and file system). The restricted backend runs in the worker's process and gets none. The
// node's result and errors are redacted of the values (engine.Redactor).

var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// reservedEnv are the variables the sandbox sets itself.
var reservedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ"}

// credentialEnv is one variable's credential.
type credentialEnv struct{ env, name string }

// prepareCredentials reads the credentials param.
func prepareCredentials(p engine.Params, pc *engine.PrepareContext, backend string) ([]credentialEnv, bool) {
	if !p.Has("credentials") {
		return nil, true
	}
	m, isObject := p.Raw("credentials", false).(map[string]any)
	if !isObject {
		pc.Problem(pc.ParamsPath("credentials"), "must be an object of environment variable names to credential names")
		return nil, false
	}
	if backend == Restricted {
		pc.Problem(pc.ParamsPath("credentials"), "the restricted backend runs in the worker's process and takes no credentials: use docker (or subprocess, default tenant only)")
		return nil, false
	}
	ok := true
	var out []credentialEnv
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		path := pc.ParamsPath("credentials") + "." + k
		name, isString := m[k].(string)
		switch {
		case !envName.MatchString(k):
			pc.Problem(path, "%q is not an environment variable name (A–Z, 0–9 and _, not starting with a digit)", k)
			ok = false
		case slices.Contains(reservedEnv, k) || strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "NODE_"):
			pc.Problem(path, "%q is set by the sandbox or changes how the interpreter runs", k)
			ok = false
		case !isString:
			pc.Problem(path, "must be a credential name")
			ok = false
		default:
			if err := model.ValidCredentialName(name); err != nil {
				pc.Problem(path, "%v", err)
				ok = false
				continue
			}
			out = append(out, credentialEnv{env: k, name: name})
		}
	}
	return out, ok
}

// openCredentials opens the node's credentials: the environment entries and the redactor.
func (r *runner) openCredentials(ctx context.Context, call *engine.Call) ([]string, engine.Redactor, error) {
	var env []string
	var red engine.Redactor
	for _, c := range r.creds {
		v, err := call.Credential(ctx, c.name)
		if err != nil {
			err = fmt.Errorf("code node: credential %s for %s: %w", c.name, c.env, err)
			if !model.IsTransient(err) {
				err = engine.Permanent(err)
			}
			return nil, nil, err
		}
		if strings.ContainsRune(string(v), 0) {
			return nil, nil, engine.Permanent(fmt.Errorf("code node: credential %s for %s: an environment value cannot hold a NUL byte", c.name, c.env))
		}
		env = append(env, c.env+"="+string(v))
		red = append(red, engine.Secret{Name: c.name, Value: string(v)})
	}
	return env, red, nil
}

// envNames are the variables of the node's credentials.
func (r *runner) envNames() []string {
	out := make([]string, len(r.creds))
	for i, c := range r.creds {
		out[i] = c.env
	}
	return out
}

// redacted redacts a result and its error of the opened values.
func redacted(red engine.Redactor) func(any, error) (any, error) {
	return func(out any, err error) (any, error) {
		o, err := red.Outcome(engine.Outcome{Output: out}, err)
		return o.Output, err
	}
}
