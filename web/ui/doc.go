// Package ui is the console's web UI (docs/console.md, "The web UI"): the pages under /ui/
// (h_ui*.go), server-rendered from the html/template templates with htmx for the parts that
// change in place, and the static files (htmx, vendored from npm with its licence; the
// console's stylesheet and script) — all embedded in the binary (ui.go), so that `go build`
// alone yields the UI; the flow pictures come from package graph. Register mounts the pages
// on the server the API is mounted on (package web builds it).
//
// A page holds no rule of its own: it calls the API's routes in process as its caller
// (uiServer.call: their cookie, the page's tenant, their CSRF token), so its access check,
// validation, audit row and refusal are the API's; a live region follows an API stream through
// uiServer.relay (the same route, flushed to the browser, the tenant from the page's cookie).
// Of package api it uses the wire types it decodes, Problem, the header and cookie names, and
// what *api.API offers the pages: Operations (to parse a flow for its picture), HasSession
// (the pages' gate), HasPlane and LocalMode (the console's mode), Log and Now.
package ui
