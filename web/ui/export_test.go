package ui

// What the tests of package ui_test (which run the whole console, test/webtest) need of the
// package's own names.
const (
	TenantCookie = uiTenantCookie
	LoginPath    = uiLoginPath
)

var BodyLimit = uiBodyLimit
