//go:build unix

package writefile

import "testing"

// TestWhere: the phrase plaita run and plaita dev print names the root and the rule that chose
// it, and how to choose another when it was derived.
func TestWhere(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    Facts
		want string
	}{
		{Facts{WorkspaceRoot: "/srv/ws", Cwd: "/w"}, "under /srv/ws (PLAITA_NODES_WORKSPACE_ROOT)"},
		{Facts{AllowUnrestricted: true, Cwd: "/w"}, "anywhere the process may write (PLAITA_ALLOW_UNRESTRICTED_WRITES=1)"},
		{Facts{Cwd: "/w/other", Checkout: "/w/plaita"}, "under /w/other (the working directory; PLAITA_NODES_WORKSPACE_ROOT sets another)"},
		{Facts{Home: "/home/u"}, "under /home/u (the home directory; PLAITA_NODES_WORKSPACE_ROOT sets another)"},
		{Facts{ProjectRoot: "/srv/app", Cwd: "/w"}, "under /srv/app (PLAITA_PROJECT_ROOT; PLAITA_NODES_WORKSPACE_ROOT sets another)"},
		{Facts{Cwd: "/w/plaita/cmd", Checkout: "/w/plaita"},
			"under /w (the working directory /w/plaita/cmd is inside plaita's checkout /w/plaita, so its parent; PLAITA_NODES_WORKSPACE_ROOT sets another)"},
	} {
		r, err := ResolveRoot(c.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Where(); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.f, got, c.want)
		}
	}
}
