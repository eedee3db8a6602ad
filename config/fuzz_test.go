package config

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// FuzzParsers feeds arbitrary text to every variable's parser. Whatever the input: no panic,
// the value has the accessor's type, and a value strict preflight rejects is at least a
// warning in non-strict mode (nothing bad is ever taken silently).
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"", " ", "0", "1", " 1 ", "-1", "1.5", "nan", "inf", "-inf", "1e309", "true", "TRUE",
		"off", "abc", "redis://:p@h:1/0", "$", "0-1", "python;js", "docker,unsafe", "9223372036854775808", "\x00", "ü"} {
		f.Add(s)
	}
	base, err := Load(RoleDev, false, WithEnv(nil), WithProcess(1, "h", 2))
	if err != nil {
		f.Fatal(err)
	}
	vars := registry()
	f.Fuzz(func(t *testing.T, raw string) {
		for _, v := range vars {
			out := v.parse(input{raw: raw, set: true}, base)
			if got := fmt.Sprintf("%T", out.value); got != v.GoType() {
				t.Fatalf("%s=%q: value type %s, want %s", v.Name, raw, got, v.GoType())
			}
			if out.reject != "" && out.warn == "" {
				t.Fatalf("%s=%q: rejected in strict mode but silent in non-strict mode", v.Name, raw)
			}
			if v.check != nil {
				v.check(out.value, base)
			}
		}
	})
}

// FuzzMaskURL checks that a password never survives masking.
func FuzzMaskURL(f *testing.F) {
	f.Add("user", "hunter2", "redis.internal:6379")
	f.Add("", "p@ss:word", "h")
	f.Fuzz(func(t *testing.T, user, pass, host string) {
		if pass == "" || pass == "xxxxx" { // Redacted() writes xxxxx
			return
		}
		u := url.URL{Scheme: "redis", User: url.UserPassword(user, pass), Host: host, Path: "/0"}
		s := u.String()
		masked := maskURL(s)
		if masked == s {
			t.Fatalf("nothing masked in %q", s)
		}
		if mu, err := url.Parse(masked); err == nil && mu.User != nil {
			if p, ok := mu.User.Password(); ok && p == pass {
				t.Fatalf("password %q survives masking of %q: %q", pass, s, masked)
			}
		}
		// The password may legitimately appear inside the user name or host as they are written
		// in the URL (percent-encoded: user "\x0000000" is "%0000000"), never elsewhere.
		shown := url.User(user).String() + u.Host
		if len(pass) >= 6 && !strings.Contains(shown, pass) && !strings.Contains(user+host, pass) && strings.Contains(masked, pass) {
			t.Fatalf("password %q appears in %q", pass, masked)
		}
	})
}
