package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/model"
	"plaita/web/api"
)

// Logging in and out, and choosing the tenant: POST /api/login and /api/logout in process, the
// session cookie they set passed on to the browser.

func (u *uiServer) authRoutes(g *echo.Group) {
	g.GET("/login", u.loginPage)
	g.POST("/login", u.loginSubmit)
	g.POST("/logout", u.logoutSubmit)
	g.POST("/tenant", u.switchTenant)
}

type loginData struct {
	Login string
	Next  string
	CSRF  string // the login form's token (loginToken)
}

// loginCookie carries the login form's CSRF token: the form has no session yet to derive one
// from, so the page sets a random token in this cookie and in the form, and a login posted
// without both equal is refused (a form another site posts cannot read the cookie, and an
// Origin check passes a request that carries neither Origin nor Referer).
const loginCookie = "plaita_login"

// loginToken gives the login page its form token: the cookie's when the browser has one, else
// a new one set in the cookie.
func loginToken(c echo.Context) string {
	if ck, err := c.Cookie(loginCookie); err == nil && len(ck.Value) == len(rand.Text()) {
		return ck.Value
	}
	token := rand.Text()
	c.SetCookie(&http.Cookie{Name: loginCookie, Value: token, Path: uiLoginPath, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: api.SecureHTTP(c.Request()), MaxAge: 3600})
	return token
}

// loginFormFresh reports whether a posted login form carries the token of the browser's cookie.
func loginFormFresh(c echo.Context) bool {
	ck, err := c.Cookie(loginCookie)
	form := c.FormValue("csrf")
	return err == nil && ck.Value != "" && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(form)) == 1
}

// safeNext is where to go after logging in: a path of the UI, never another site.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") {
		return next
	}
	return "/ui/"
}

func (u *uiServer) loginPage(c echo.Context) error {
	if s, _ := u.session(c); s != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	notice := ""
	if c.QueryParam("out") == "1" {
		notice = "You are logged out."
	}
	return u.render(c, http.StatusOK, "login.html", "", uiPage{Title: "Log in", Notice: notice,
		Data: loginData{Next: safeNext(c.QueryParam("next")), CSRF: loginToken(c)}})
}

// loginSubmit logs in through the API: its throttling, lock-out and audit rows apply; its
// session cookie is the browser's.
func (u *uiServer) loginSubmit(c echo.Context) error {
	d := loginData{Login: strings.TrimSpace(c.FormValue("login")), Next: safeNext(c.FormValue("next"))}
	if !loginFormFresh(c) {
		d.CSRF = loginToken(c)
		return u.render(c, http.StatusForbidden, "login.html", "", uiPage{Title: "Log in", Data: d,
			Problem: api.NewProblem(http.StatusForbidden, "csrf", "the login form has expired or was not sent from this page: log in again")})
	}
	rec, p := u.send(c, http.MethodPost, "/api/login", map[string]string{"login": d.Login, "password": c.FormValue("password")})
	if p != nil {
		status := p.Status
		if status >= 500 {
			status = http.StatusServiceUnavailable
		}
		d.CSRF = loginToken(c)
		return u.render(c, status, "login.html", "", uiPage{Title: "Log in", Data: d, Problem: p})
	}
	for _, v := range rec.Result().Header.Values("Set-Cookie") {
		c.Response().Header().Add("Set-Cookie", v)
	}
	c.SetCookie(&http.Cookie{Name: loginCookie, Path: uiLoginPath, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: api.SecureHTTP(c.Request()), MaxAge: -1})
	var info api.SessionInfo
	_ = json.Unmarshal(rec.Body.Bytes(), &info) // a login's answer: the API's own api.SessionInfo
	// The pages act in the default tenant when the user has it (or is a platform admin), else
	// in their first.
	tenant := "default"
	if !info.Platform && len(info.Memberships) > 0 && !slices.ContainsFunc(info.Memberships, func(m model.Membership) bool { return m.Tenant == tenant }) {
		tenant = info.Memberships[0].Tenant
	}
	c.SetCookie(tenantCookie(tenant, api.SecureHTTP(c.Request())))
	return c.Redirect(http.StatusSeeOther, d.Next)
}

func (u *uiServer) logoutSubmit(c echo.Context) error {
	rec, p := u.send(c, http.MethodPost, "/api/logout", nil)
	if p != nil && p.Status != http.StatusUnauthorized {
		return u.fail(c, p)
	}
	if rec != nil {
		for _, v := range rec.Result().Header.Values("Set-Cookie") {
			c.Response().Header().Add("Set-Cookie", v)
		}
	}
	return c.Redirect(http.StatusSeeOther, "/ui/login?out=1")
}

// switchTenant remembers the tenant the pages act in. It changes nothing on the server, but
// is a POST with the CSRF token all the same: another site must not steer a user's pages. The
// tenant is checked by every API call that uses it (not_a_member).
func (u *uiServer) switchTenant(c echo.Context) error {
	s, p := u.session(c)
	if p != nil {
		return u.fail(c, p)
	}
	if subtle.ConstantTimeCompare([]byte(csrf(c)), []byte(s.CSRF)) != 1 {
		return u.fail(c, api.NewProblem(http.StatusForbidden, "csrf", "the form's CSRF token does not match the session's: reload the page"))
	}
	t, err := control.NormalizeTenant(c.FormValue("tenant"))
	if err != nil || (!s.Platform && !slices.Contains(s.Tenants, t)) {
		return u.fail(c, api.NewProblem(http.StatusForbidden, "not_a_member", "you are not a member of tenant %s", c.FormValue("tenant")))
	}
	c.SetCookie(tenantCookie(t, api.SecureHTTP(c.Request())))
	back := safeNext(c.FormValue("back"))
	return c.Redirect(http.StatusSeeOther, back)
}
