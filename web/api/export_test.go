package api

// What the tests of package api_test (which run the whole console, test/webtest) need of the
// package's own names: a session's CSRF token, to forge one.
var CSRFToken = csrfToken
