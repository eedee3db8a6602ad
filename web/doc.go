// Package web is the console's HTTP server (`plaita console`, docs/console.md): New builds one
// echo server with the API (package api: the routes, their access rules, audit and Problems,
// the OpenAPI document) and the web UI (package ui: the pages, which call the API's routes in
// process) mounted on it; Server serves it as a service, drains it and reconciles the tenants'
// statuses for roles/console.go. waiting.go is what the console serves on its port while it
// waits for Redis at start (a database that has served with Redis gets no local mode): 503
// everywhere, with the reason.
//
// The dependencies go one way: web imports api and ui, ui imports api (its wire types, its
// Problem, the session check), and api imports neither (imports_test.go).
package web
