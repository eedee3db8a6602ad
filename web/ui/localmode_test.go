package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"plaita/engine/state"
	"plaita/test/webtest"
)

// A console in local mode says so on every page (the banner), and shows a running execution as
// running in the console's process; a console on Redis shows no banner.
func TestLocalModeSaysSoOnEveryPage(t *testing.T) {
	f := webtest.New(t, webtest.WithLocal())
	if _, _, err := f.DB.EnsureBootstrapAdmin(context.Background(), "root", "password-root"); err != nil {
		t.Fatal(err)
	}
	running := webtest.LiveState("default", "ex_running_here", 1, state.Running)
	f.Save(t, running)
	ui := uiLogin(t, f, "root", "password-root")
	for _, page := range []string{"/ui/executions", "/ui/flows", "/ui/approvals", "/ui/events", "/ui/schedules", "/ui/deadletters",
		"/ui/jobs", "/ui/cluster", "/ui/tenants", "/ui/users", "/ui/audit", "/ui/executions/ex_running_here"} {
		_, body := ui.get(t, page, http.StatusOK)
		if !strings.Contains(body, `id="mode-banner"`) || !strings.Contains(body, "Local mode.") {
			t.Errorf("%s: no local-mode banner", page)
		}
	}
	_, body := ui.get(t, "/ui/executions/ex_running_here", http.StatusOK)
	if !strings.Contains(body, "running in the console&#39;s process") {
		t.Fatalf("the running execution's page: %s", body)
	}

	onRedis := webtest.New(t)
	if _, _, err := onRedis.DB.EnsureBootstrapAdmin(context.Background(), "root", "password-root"); err != nil {
		t.Fatal(err)
	}
	if _, body := uiLogin(t, onRedis, "root", "password-root").get(t, "/ui/executions", http.StatusOK); strings.Contains(body, `id="mode-banner"`) {
		t.Fatal("a console on Redis shows the local-mode banner")
	}
}
