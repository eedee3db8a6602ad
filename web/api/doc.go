// Package api is the console's HTTP API (`plaita console`, docs/console.md): huma for typed
// handlers, request validation and the OpenAPI 3.1 document generated from them (GET
// /api/openapi.json; its snapshot is docs/openapi.json), on the echo server package web builds
// (New mounts the API on it). It is an adapter over package control and nothing else — the
// operations the CLI runs, refused with the same words; control.Catalog for flow drafts and
// the record of published versions; control.Accounts for tenants, users, members, sessions,
// API keys, the audit trail and the tenant-status reconcile — it imports no storage package,
// holds no business rule of its own, and reads no configuration (roles/console.go builds its
// Deps and Settings). h_ctl.go asks one instance of the cluster over its control channel
// (status, drain), as `plaita ctl` does. The web UI (package ui) calls these routes as its
// callers would; this package knows nothing of the pages.
//
// # Adding an endpoint
//
// Every endpoint is one register call in routes.go (a group of its own calls its register
// function from there: registerLiveRoutes in h_live.go, registerJobRoutes in h_jobs.go):
//
//	register(a, Route{ID: "execution-cancel", Method: http.MethodPost, Path: "/api/executions/{id}/cancel",
//		Summary: "Cancel an execution", Access: TenantEditor, Action: "execution.cancel", Redis: true, Bounded: true},
//		a.cancelExecution)
//
// with a handler func(ctx context.Context, c *Call, in *In) (*Out, error) over typed input and
// output structs (huma tags: path, query, header, Body; validation tags). The Route says who may
// call it (Access: Public … Platform), whether it needs Redis (Redis: 503 while the console has
// none; Bounded: its work has Settings.RedisTimeout, so a Redis that went away is a 503, not a
// hang — every route but a streaming one), its audit action (every write is audited: allowed when the handler succeeds, denied
// with the refusal's code when it fails) and its body bound (MaxBody, default 1 MiB). The
// register helper documents the route's error responses, runs authentication and the access
// check before the body is read, and renders every error as one Problem.
//
// # Wire types
//
// A body is a type of this package (dto_*.go, or beside its handler), copied field by field from
// control's result: a storage type is never one, at any depth (TestBodiesAreNoStorageTypes), so
// a change of storage changes no answer. A list answers one page shape, control.Page's items and
// next_cursor; its limit is bounded by control's list policy (control/pages.go,
// TestListLimitsAreThePolicy).
//
// # The request path
//
// echo: request id (X-Request-Id, echoed or minted) → recover → huma: the access middleware
// (draining: writes refused; credentials; tenant; role; CSRF for cookie writes; denials
// audited) → huma's strict decoding and validation (unknown fields, wrong types, bounds → 400
// naming each location) → the handler → the audit row of a write → the response. Every 4xx
// and 5xx body is a Problem (problem.go): RFC 9457 problem details with a code, the request
// id and, for a control refusal, what is accepted instead, how to unblock it and its fields.
//
// # Streams
//
// h_live.go serves Server-Sent Events (control.Follow, control.FollowStatus): a stream takes a
// slot of the console's bound (LiveSettings.MaxStreams, 503 beyond), clears the server's read
// deadline and sets one per write, and ends with an end event when the console drains (Drain).
// registerOp documents its text/event-stream response, one schema per event.
//
// # Auth
//
// auth.go: a session cookie from POST /api/login (HttpOnly, SameSite=Lax, Secure under TLS or
// X-Forwarded-Proto: https) with a CSRF token derived from the session, required in
// X-CSRF-Token on cookie-authenticated writes; tenant API keys (Authorization: Bearer plk_…);
// the platform admin key (X-Admin-API-Key, compared in constant time). X-Tenant-ID picks the
// tenant of a session or the admin key; an API key is bound to its tenant. POST /api/login
// takes a token of its client address's bucket first (throttle.go).
package api
