//go:build unix

package writefile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResolveRoot(t *testing.T) {
	const checkout = "/w/plaita"
	tests := []struct {
		name      string
		f         Facts
		want      Root
		skipped   int
		wantError bool
	}{
		{
			name: "explicit used verbatim, even inside the checkout",
			f:    Facts{WorkspaceRoot: "/w/plaita/sub/../x/", ProjectRoot: "/srv", Cwd: "/w/plaita", Checkout: checkout},
			want: Root{Path: "/w/plaita/sub/../x/", Rule: RuleExplicit},
		},
		{
			name: "explicit equal to the checkout is not stepped up",
			f:    Facts{WorkspaceRoot: checkout, Checkout: checkout},
			want: Root{Path: checkout, Rule: RuleExplicit},
		},
		{
			name: "explicit relative is verbatim too",
			f:    Facts{WorkspaceRoot: "work", Cwd: "/srv"},
			want: Root{Path: "work", Rule: RuleExplicit},
		},
		{
			name: "explicit wins over unrestricted",
			f:    Facts{WorkspaceRoot: "/jail", AllowUnrestricted: true},
			want: Root{Path: "/jail", Rule: RuleExplicit},
		},
		{
			name: "unrestricted",
			f:    Facts{AllowUnrestricted: true, ProjectRoot: "/srv", Cwd: "/srv", Home: "/home/u"},
			want: Root{Unrestricted: true, Rule: RuleUnrestricted},
		},
		{
			name: "project root first",
			f:    Facts{ProjectRoot: "/srv/app", Cwd: "/w/other", Home: "/home/u", Checkout: checkout},
			want: Root{Path: "/srv/app", Rule: RuleProjectRoot},
		},
		{
			name: "project root cleaned",
			f:    Facts{ProjectRoot: "/srv/app/", Cwd: "/w/other"},
			want: Root{Path: "/srv/app", Rule: RuleProjectRoot},
		},
		{
			name: "relative project root joins the working directory",
			f:    Facts{ProjectRoot: "app", Cwd: "/srv"},
			want: Root{Path: "/srv/app", Rule: RuleProjectRoot},
		},
		{
			name:    "relative project root without a working directory is skipped",
			f:       Facts{ProjectRoot: "app", Home: "/home/u"},
			want:    Root{Path: "/home/u", Rule: RuleHome},
			skipped: 1,
		},
		{
			name: "working directory",
			f:    Facts{Cwd: "/w/other", Home: "/home/u", Checkout: checkout},
			want: Root{Path: "/w/other", Rule: RuleCwd},
		},
		{
			name: "home directory",
			f:    Facts{Home: "/home/u", Checkout: checkout},
			want: Root{Path: "/home/u", Rule: RuleHome},
		},
		{
			name:    "/ is never a boundary",
			f:       Facts{ProjectRoot: "/", Cwd: "/", Home: "/home/u"},
			want:    Root{Path: "/home/u", Rule: RuleHome},
			skipped: 2,
		},
		{
			name:    "/ spelt otherwise is still /",
			f:       Facts{ProjectRoot: "//", Cwd: "/./", Home: "/home/u"},
			want:    Root{Path: "/home/u", Rule: RuleHome},
			skipped: 2,
		},
		{
			name: "working directory inside the checkout: its parent",
			f:    Facts{Cwd: "/w/plaita/engine/nodes", Home: "/home/u", Checkout: checkout},
			want: Root{Path: "/w", Rule: RuleCwd, SteppedFrom: "/w/plaita/engine/nodes", Checkout: checkout},
		},
		{
			name: "working directory equal to the checkout: its parent",
			f:    Facts{Cwd: "/w/plaita", Checkout: checkout},
			want: Root{Path: "/w", Rule: RuleCwd, SteppedFrom: "/w/plaita", Checkout: checkout},
		},
		{
			name: "project root equal to the checkout (trailing slash): its parent",
			f:    Facts{ProjectRoot: "/w/plaita/", Cwd: "/elsewhere", Checkout: checkout + "/"},
			want: Root{Path: "/w", Rule: RuleProjectRoot, SteppedFrom: "/w/plaita", Checkout: checkout},
		},
		{
			name: "home inside the checkout: its parent",
			f:    Facts{Home: "/w/plaita/home", Checkout: checkout},
			want: Root{Path: "/w", Rule: RuleHome, SteppedFrom: "/w/plaita/home", Checkout: checkout},
		},
		{
			name: "a sibling sharing the checkout's prefix is not inside",
			f:    Facts{Cwd: "/w/plaita-other", Checkout: checkout},
			want: Root{Path: "/w/plaita-other", Rule: RuleCwd},
		},
		{
			name: "the checkout's parent above it is not inside",
			f:    Facts{Cwd: "/w", Checkout: checkout},
			want: Root{Path: "/w", Rule: RuleCwd},
		},
		{
			name:    "stepping up to / is no boundary either: next candidate",
			f:       Facts{Cwd: "/plaita/engine", Home: "/home/u", Checkout: "/plaita"},
			want:    Root{Path: "/home/u", Rule: RuleHome},
			skipped: 1,
		},
		{
			name: "unknown checkout: nothing is stepped up",
			f:    Facts{Cwd: "/w/plaita"},
			want: Root{Path: "/w/plaita", Rule: RuleCwd},
		},
		{
			name:      "nothing set",
			f:         Facts{},
			wantError: true,
		},
		{
			name:      "only / everywhere",
			f:         Facts{ProjectRoot: "/", Cwd: "/", Home: "/"},
			wantError: true,
		},
		{
			name:      "only the checkout at /plaita",
			f:         Facts{Cwd: "/plaita", Home: "/plaita/home", Checkout: "/plaita"},
			wantError: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveRoot(tc.f)
			if tc.wantError {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				if !strings.Contains(err.Error(), VarWorkspaceRoot) {
					t.Errorf("error %q does not name %s", err, VarWorkspaceRoot)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Skipped) != tc.skipped {
				t.Errorf("skipped %q, want %d entries", got.Skipped, tc.skipped)
			}
			got.Skipped = nil
			got.Guarded = nil // from Facts.Checkout here; TestResolveRootGuards checks it
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLogLine(t *testing.T) {
	tests := []struct {
		r    Root
		want string
	}{
		{Root{Path: "/srv/app", Rule: RuleProjectRoot}, "writefile jail: /srv/app (PLAITA_PROJECT_ROOT)"},
		{Root{Path: "/jail", Rule: RuleExplicit}, "writefile jail: /jail (PLAITA_NODES_WORKSPACE_ROOT)"},
		{Root{Path: "/w", Rule: RuleCwd, SteppedFrom: "/w/plaita", Checkout: "/w/plaita"},
			"writefile jail: /w (working directory /w/plaita is inside plaita's checkout /w/plaita: its parent)"},
		{Root{Unrestricted: true, Rule: RuleUnrestricted},
			"writefile jail: unrestricted (PLAITA_ALLOW_UNRESTRICTED_WRITES=1): flows may write anywhere the process can"},
	}
	for _, tc := range tests {
		if got := tc.r.LogLine(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
	if (Root{Unrestricted: true, Rule: RuleUnrestricted}).Warning() == "" {
		t.Error("unrestricted has no warning")
	}
	if (Root{Path: "/srv", Rule: RuleCwd}).Warning() != "" {
		t.Error("a jailed root warns")
	}
}

func TestFindCheckout(t *testing.T) {
	base := t.TempDir()
	co := filepath.Join(base, "plaita")
	deep := filepath.Join(co, "engine", "nodes", "x")
	nested := filepath.Join(co, "tools") // a nested module of its own
	other := filepath.Join(base, "other", "sub")
	for _, d := range []string{deep, nested, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(co, "go.mod"), "// plaita\nmodule plaita // the engine\n\ngo 1.26\n")
	write(filepath.Join(nested, "go.mod"), "module plaita/tools\n")
	write(filepath.Join(base, "other", "go.mod"), "module \"other\"\n")

	for start, want := range map[string]string{
		co:                        co,
		deep:                      co,
		nested:                    co,
		other:                     "",
		filepath.Join(base, "x"):  "", // need not exist
		"":                        "",
		filepath.Join(deep, ".."): co,
	} {
		if got := FindCheckout(start); got != want {
			t.Errorf("FindCheckout(%q) = %q, want %q", start, got, want)
		}
	}

	// The package itself lives in plaita's checkout.
	wd, _ := os.Getwd()
	if got := FindCheckout(wd); got == "" || modulePath(filepath.Join(got, "go.mod")) != "plaita" {
		t.Errorf("FindCheckout(%q) = %q: not plaita's checkout", wd, got)
	}
	if f := HostFacts("", false, ""); f.Checkout == "" || f.Cwd != wd {
		t.Errorf("HostFacts = %+v", f)
	}
}
