package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/model"
	"plaita/web/api"
)

// Tenants and users (platform admins), the tenant's members and API keys (its admins) and the
// audit trail, through the API's routes.

func (u *uiServer) adminRoutes(g *echo.Group) {
	g.GET("/tenants", u.tenantsPage)
	g.POST("/tenants", u.createTenant)
	g.POST("/tenants/:slug/status", u.setTenantStatus)
	g.GET("/users", u.usersPage)
	g.POST("/users", u.createUser)
	g.POST("/users/:id", u.updateUser)
	g.POST("/users/:id/delete", u.deleteUser)
	g.GET("/members", u.membersPage)
	g.POST("/members", u.setMember)
	g.POST("/members/:user_id/remove", u.removeMember)
	g.GET("/apikeys", u.apiKeysPage)
	g.POST("/apikeys", u.createAPIKey)
	g.POST("/apikeys/:id/revoke", u.revokeAPIKey)
	g.GET("/audit", u.auditPage)
}

// listPage renders a page of path's list (GET path?limit=500) into file.
func listPage[T any](u *uiServer, c echo.Context, path, file, title, nav string) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var page control.Page[T]
	if p := u.call(c, http.MethodGet, path+"?limit=500", nil, &page); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, file, "", uiPage{Title: title, Nav: nav, S: s, Data: page})
}

// done sends the page to back once a write succeeded (HX-Redirect), or shows its problem.
func (u *uiServer) done(c echo.Context, p *api.Problem, back string) error {
	if p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", back)
	return c.NoContent(http.StatusOK)
}

func (u *uiServer) tenantsPage(c echo.Context) error {
	return listPage[model.Tenant](u, c, "/api/tenants", "tenants.html", "Tenants", "tenants")
}

func (u *uiServer) createTenant(c echo.Context) error {
	body := map[string]string{"slug": strings.TrimSpace(c.FormValue("slug")), "name": strings.TrimSpace(c.FormValue("name"))}
	return u.done(c, u.call(c, http.MethodPost, "/api/tenants", body, nil), "/ui/tenants")
}

// setTenantStatus disables or enables a tenant (POST /api/tenants/{slug}/disable|enable):
// disabling refuses its users' sessions at once and disables its schedules.
func (u *uiServer) setTenantStatus(c echo.Context) error {
	verb := "disable"
	if c.FormValue("enable") == "true" {
		verb = "enable"
	}
	var out api.TenantChanged
	if p := u.call(c, http.MethodPost, "/api/tenants/"+url.PathEscape(c.Param("slug"))+"/"+verb, nil, &out); p != nil {
		return u.fail(c, p)
	}
	s, _ := u.session(c)
	return u.render(c, http.StatusOK, "tenants.html", "tenant-row", uiPage{S: s, Data: out.Tenant})
}

func (u *uiServer) usersPage(c echo.Context) error {
	return listPage[model.User](u, c, "/api/users", "users.html", "Users", "users")
}

func (u *uiServer) createUser(c echo.Context) error {
	body := map[string]any{"login": strings.TrimSpace(c.FormValue("login")), "name": strings.TrimSpace(c.FormValue("name")),
		"password": c.FormValue("password"), "platform_admin": c.FormValue("platform_admin") == "true"}
	return u.done(c, u.call(c, http.MethodPost, "/api/users", body, nil), "/ui/users")
}

// updateUser sets a user's password (their sessions end), unlocks them, or makes them a
// platform admin or not (PATCH /api/users/{id}): one change per form.
func (u *uiServer) updateUser(c echo.Context) error {
	body := map[string]any{}
	switch c.FormValue("change") {
	case "password":
		body["password"] = c.FormValue("password")
	case "unlock":
		body["unlock"] = true
	case "platform":
		body["platform_admin"] = c.FormValue("platform_admin") == "true"
	default:
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_change", "no change %q: password, unlock or platform", c.FormValue("change")))
	}
	return u.done(c, u.call(c, http.MethodPatch, "/api/users/"+url.PathEscape(c.Param("id")), body, nil), "/ui/users")
}

func (u *uiServer) deleteUser(c echo.Context) error {
	if c.FormValue("confirm") != "yes" {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "unconfirmed", "deleting a user needs confirm=yes"))
	}
	return u.done(c, u.call(c, http.MethodDelete, "/api/users/"+url.PathEscape(c.Param("id")), nil, nil), "/ui/users")
}

func (u *uiServer) membersPage(c echo.Context) error {
	return listPage[model.Membership](u, c, "/api/members", "members.html", "Members", "members")
}

func (u *uiServer) setMember(c echo.Context) error {
	body := map[string]string{"login": strings.TrimSpace(c.FormValue("login")), "role": c.FormValue("role")}
	return u.done(c, u.call(c, http.MethodPut, "/api/members", body, nil), "/ui/members")
}

func (u *uiServer) removeMember(c echo.Context) error {
	return u.done(c, u.call(c, http.MethodDelete, "/api/members/"+url.PathEscape(c.Param("user_id")), nil, nil), "/ui/members")
}

func (u *uiServer) apiKeysPage(c echo.Context) error {
	return listPage[model.APIKey](u, c, "/api/api-keys", "apikeys.html", "API keys", "apikeys")
}

// createAPIKey creates a key (POST /api/api-keys) and shows it: this answer is the only place
// it is ever shown.
func (u *uiServer) createAPIKey(c echo.Context) error {
	body := map[string]string{"name": strings.TrimSpace(c.FormValue("name")), "role": c.FormValue("role")}
	var out api.APIKeyCreated
	if p := u.call(c, http.MethodPost, "/api/api-keys", body, &out); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "apikeys-changed") // the list shows the new key
	return u.render(c, http.StatusOK, "apikeys.html", "created", uiPage{Data: out})
}

func (u *uiServer) revokeAPIKey(c echo.Context) error {
	return u.done(c, u.call(c, http.MethodDelete, "/api/api-keys/"+url.PathEscape(c.Param("id")), nil, nil), "/ui/apikeys")
}

func (u *uiServer) auditPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	// The filters as the form sends them; the times are UTC, written 2026-12-05 09:30 (or RFC
	// 3339), so the page reads in the one time the console shows.
	d := auditData{Filter: url.Values{}}
	q := url.Values{"limit": {"100"}}
	for _, k := range []string{"actor", "action", "target", "outcome"} {
		if v := strings.TrimSpace(c.QueryParam(k)); v != "" {
			q.Set(k, v)
			d.Filter.Set(k, v)
		}
	}
	for _, k := range []string{"since", "until"} {
		v := strings.TrimSpace(c.QueryParam(k))
		if v == "" {
			continue
		}
		t, ok := formTime(v)
		if !ok {
			return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_time", "%s %q: write a UTC time as 2026-12-05 09:30 or 2026-12-05T09:30:00Z", k, v))
		}
		q.Set(k, t)
		d.Filter.Set(k, v)
	}
	if c.QueryParam("all_tenants") == "true" && s.Platform {
		q.Set("all_tenants", "true")
		d.Filter.Set("all_tenants", "true")
	}
	if cur := c.QueryParam("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	if p := u.call(c, http.MethodGet, "/api/audit?"+q.Encode(), nil, &d.Page); p != nil {
		return u.fail(c, p)
	}
	if d.Page.NextCursor != "" {
		next := url.Values{}
		for k, v := range d.Filter {
			next[k] = v
		}
		next.Set("cursor", d.Page.NextCursor)
		d.Older = "/ui/audit?" + next.Encode()
	}
	return u.render(c, http.StatusOK, "audit.html", "", uiPage{Title: "Audit", Nav: "audit", S: s, Data: d})
}

// auditData is the audit page: a page of rows under the filters, and the link to older rows
// under the same filters.
type auditData struct {
	Page   control.Page[model.AuditEntry]
	Filter url.Values
	Older  string
}
