package ui_test

import (
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/test/webtest"
)

// TestUIWrongPasswordReads: a refused login reads as a sentence with its code apart, "wrong
// login or password (bad_credentials)" — the code was once glued to the message.
func TestUIWrongPasswordReads(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	jar, _ := cookiejar.New(nil)
	c := &uiClient{F: f, HC: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, body := c.logIn(t, "nobody", "not the password")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d\n%s", res.StatusCode, body)
	}
	m := regexp.MustCompile(`(?s)<div class="problem".*?</div>`).FindString(body)
	text := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m, "")), " ")
	if !strings.Contains(text, "wrong login or password (bad_credentials)") {
		t.Fatalf("the problem reads %q\n%s", text, m)
	}
}
