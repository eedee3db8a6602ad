package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"plaita/store/sqlite"
)

// Tenants (platform admins), the tenant's members (its admins) and the audit trail, through
// the API's routes.

func (u *uiServer) adminRoutes(g *echo.Group) {
	g.GET("/tenants", u.tenantsPage)
	g.POST("/tenants", u.createTenant)
	g.POST("/tenants/:slug/status", u.setTenantStatus)
	g.GET("/members", u.membersPage)
	g.POST("/members", u.setMember)
	g.GET("/audit", u.auditPage)
}

func (u *uiServer) tenantsPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var page sqlite.Page[sqlite.Tenant]
	if p := u.call(c, http.MethodGet, "/api/tenants?limit=500", nil, &page); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "tenants.html", "", uiPage{Title: "Tenants", Nav: "tenants", S: s, Data: page})
}

func (u *uiServer) createTenant(c echo.Context) error {
	body := map[string]string{"slug": strings.TrimSpace(c.FormValue("slug")), "name": strings.TrimSpace(c.FormValue("name"))}
	var out TenantChanged
	if p := u.call(c, http.MethodPost, "/api/tenants", body, &out); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/tenants")
	return c.NoContent(http.StatusOK)
}

// setTenantStatus disables or enables a tenant (POST /api/tenants/{slug}/disable|enable):
// disabling refuses its users' sessions at once and disables its schedules.
func (u *uiServer) setTenantStatus(c echo.Context) error {
	verb := "disable"
	if c.FormValue("enable") == "true" {
		verb = "enable"
	}
	var out TenantChanged
	if p := u.call(c, http.MethodPost, "/api/tenants/"+url.PathEscape(c.Param("slug"))+"/"+verb, nil, &out); p != nil {
		return u.fail(c, p)
	}
	s, _ := u.session(c)
	return u.render(c, http.StatusOK, "tenants.html", "tenant-row", uiPage{S: s, Data: out.Tenant})
}

func (u *uiServer) membersPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var page sqlite.Page[sqlite.Membership]
	if p := u.call(c, http.MethodGet, "/api/members?limit=500", nil, &page); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "members.html", "", uiPage{Title: "Members", Nav: "members", S: s, Data: page})
}

func (u *uiServer) setMember(c echo.Context) error {
	body := map[string]string{"login": strings.TrimSpace(c.FormValue("login")), "role": c.FormValue("role")}
	var m sqlite.Membership
	if p := u.call(c, http.MethodPut, "/api/members", body, &m); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/members")
	return c.NoContent(http.StatusOK)
}

func (u *uiServer) auditPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	q := url.Values{"limit": {"100"}}
	if b, err := strconv.ParseInt(c.QueryParam("before_id"), 10, 64); err == nil && b > 0 {
		q.Set("before_id", strconv.FormatInt(b, 10))
	}
	var page sqlite.AuditPage
	if p := u.call(c, http.MethodGet, "/api/audit?"+q.Encode(), nil, &page); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "audit.html", "", uiPage{Title: "Audit", Nav: "audit", S: s, Data: page})
}
