package api

import (
	"net/http"

	"plaita/engine"
)

const (
	get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
)

// FlowBodyLimit bounds a body that carries a flow definition: the definition's bound and room
// for the rest.
const FlowBodyLimit = int64(engine.MaxFlowBytes) + 64<<10

// registerRoutes is the API: one register call per endpoint, with who may call it, what it
// needs and what it audits (api.go: Route). The OpenAPI document is generated from these.
func registerRoutes(a *API) {
	registerAccountRoutes(a)
	registerFlowRoutes(a)
	registerOperationRoutes(a)
	registerLiveRoutes(a)
	registerJobRoutes(a)
}

// registerAccountRoutes: health, sessions, tenants, users, members, API keys, the audit trail.
func registerAccountRoutes(a *API) {
	health := []string{"health"}
	register(a, Route{ID: "healthz", Method: get, Path: "/healthz", Summary: "The process runs", Tags: health}, a.healthz)
	register(a, Route{ID: "readyz", Method: get, Path: "/readyz", Summary: "The console takes traffic (not while starting or draining)", Tags: health}, a.readyz)
	register(a, Route{ID: "health", Method: get, Path: "/health", Summary: "A summary: database, Redis, mode, draining", Tags: health}, a.health)

	auth := []string{"auth"}
	register(a, Route{ID: "login", Method: post, Path: "/api/login", Summary: "Log in: a session cookie and its CSRF token",
		Tags: auth, Access: Public, Action: "auth.login", Limited: true}, a.login)
	register(a, Route{ID: "logout", Method: post, Path: "/api/logout", Summary: "End the session",
		Tags: auth, Access: Authenticated, Action: "auth.logout", Status: http.StatusNoContent}, a.logout)
	register(a, Route{ID: "session", Method: get, Path: "/api/session", Summary: "Who the caller is: user, memberships, CSRF token",
		Tags: auth, Access: Authenticated}, a.session)

	tenants := []string{"tenants"}
	register(a, Route{ID: "tenant-list", Method: get, Path: "/api/tenants", Summary: "List tenants", Tags: tenants, Access: Platform}, a.listTenants)
	register(a, Route{ID: "tenant-create", Method: post, Path: "/api/tenants", Summary: "Create a tenant (active; its status is published)",
		Tags: tenants, Access: Platform, Action: "tenant.create", Status: http.StatusCreated}, a.createTenant)
	register(a, Route{ID: "tenant-get", Method: get, Path: "/api/tenants/{slug}", Summary: "Read a tenant", Tags: tenants, Access: Platform}, a.getTenant)
	register(a, Route{ID: "tenant-rename", Method: patch, Path: "/api/tenants/{slug}", Summary: "Rename a tenant",
		Tags: tenants, Access: Platform, Action: "tenant.rename"}, a.renameTenant)
	register(a, Route{ID: "tenant-disable", Method: post, Path: "/api/tenants/{slug}/disable",
		Summary: "Disable a tenant: its sessions and keys get 403 at once, its status is published, its schedules are disabled",
		Tags:    tenants, Access: Platform, Action: "tenant.disable"}, a.setTenantStatus(false))
	register(a, Route{ID: "tenant-enable", Method: post, Path: "/api/tenants/{slug}/enable", Summary: "Enable a tenant (its schedules stay as they are)",
		Tags: tenants, Access: Platform, Action: "tenant.enable"}, a.setTenantStatus(true))
	register(a, Route{ID: "tenant-delete", Method: del, Path: "/api/tenants/{slug}", Summary: "Delete a disabled tenant",
		Tags: tenants, Access: Platform, Action: "tenant.delete", Status: http.StatusNoContent}, a.deleteTenant)

	users := []string{"users"}
	register(a, Route{ID: "user-list", Method: get, Path: "/api/users", Summary: "List users", Tags: users, Access: Platform}, a.listUsers)
	register(a, Route{ID: "user-create", Method: post, Path: "/api/users", Summary: "Create a user",
		Tags: users, Access: Platform, Action: "user.create", Status: http.StatusCreated}, a.createUser)
	register(a, Route{ID: "user-get", Method: get, Path: "/api/users/{id}", Summary: "Read a user and their memberships", Tags: users, Access: Platform}, a.getUser)
	register(a, Route{ID: "user-update", Method: patch, Path: "/api/users/{id}", Summary: "Set a user's password (ends their sessions), platform admin flag, or unlock them",
		Tags: users, Access: Platform, Action: "user.update"}, a.updateUser)
	register(a, Route{ID: "user-delete", Method: del, Path: "/api/users/{id}", Summary: "Delete a user with their memberships and sessions",
		Tags: users, Access: Platform, Action: "user.delete", Status: http.StatusNoContent}, a.deleteUser)

	members := []string{"members"}
	register(a, Route{ID: "member-list", Method: get, Path: "/api/members", Summary: "List the tenant's members", Tags: members, Access: TenantAdmin}, a.listMembers)
	register(a, Route{ID: "member-set", Method: put, Path: "/api/members", Summary: "Add a user to the tenant, or change their role",
		Tags: members, Access: TenantAdmin, Action: "tenant.set_member"}, a.setMember)
	register(a, Route{ID: "member-remove", Method: del, Path: "/api/members/{user_id}", Summary: "Remove a member from the tenant",
		Tags: members, Access: TenantAdmin, Action: "tenant.remove_member", Status: http.StatusNoContent}, a.removeMember)

	apikeys := []string{"api keys"}
	register(a, Route{ID: "api-key-list", Method: get, Path: "/api/api-keys", Summary: "List the tenant's API keys (never their secrets)", Tags: apikeys, Access: TenantAdmin}, a.listAPIKeys)
	register(a, Route{ID: "api-key-create", Method: post, Path: "/api/api-keys", Summary: "Create an API key: the key is in this answer only",
		Tags: apikeys, Access: TenantAdmin, Action: "api_key.create", Status: http.StatusCreated}, a.createAPIKey)
	register(a, Route{ID: "api-key-revoke", Method: del, Path: "/api/api-keys/{id}", Summary: "Revoke an API key",
		Tags: apikeys, Access: TenantAdmin, Action: "api_key.revoke"}, a.revokeAPIKey)

	register(a, Route{ID: "audit-list", Method: get, Path: "/api/audit", Summary: "Read the tenant's audit trail, newest first (the read is audited)",
		Tags: []string{"audit"}, Access: TenantAdmin, Action: "audit.read"}, a.listAudit)
}

// registerFlowRoutes: flows, executions, events, dead letters.
func registerFlowRoutes(a *API) {
	flows := []string{"flows"}
	flowBody := FlowBodyLimit
	register(a, Route{ID: "flow-list", Method: get, Path: "/api/flows", Summary: "List published flows, most recently published first",
		Tags: flows, Access: TenantViewer, Redis: true, Bounded: true}, a.listFlows)
	register(a, Route{ID: "flow-get", Method: get, Path: "/api/flows/{id}", Summary: "Read a published flow (a version, or the latest) and its versions",
		Tags: flows, Access: TenantViewer, Redis: true, Bounded: true}, a.getFlow)
	register(a, Route{ID: "flow-validate", Method: post, Path: "/api/flows/validate", Summary: "Validate a definition: every problem with its JSON path",
		Tags: flows, Access: TenantViewer, Redis: true, Bounded: true, Safe: true, MaxBody: flowBody}, a.validateFlow)
	register(a, Route{ID: "flow-publish", Method: post, Path: "/api/flows", Summary: "Publish a definition as an immutable version",
		Tags: flows, Access: TenantEditor, Action: "flow.publish", Redis: true, Bounded: true, MaxBody: flowBody}, a.publishFlow)
	registerDraftRoutes(a, flowBody)

	executions := []string{"executions"}
	register(a, Route{ID: "execution-start", Method: post, Path: "/api/executions", Summary: "Start an execution of a published flow (Idempotency-Key: a retry makes no second one)",
		Tags: executions, Access: TenantEditor, Action: "execution.start", Redis: true, Bounded: true, Status: http.StatusCreated, Limited: true}, a.startExecution)
	register(a, Route{ID: "execution-list", Method: get, Path: "/api/executions", Summary: "List executions, newest first (status, flow, start time, due time, indexed fields, cursor)",
		Tags: executions, Access: TenantViewer, Redis: true, Bounded: true}, a.listExecutions)
	register(a, Route{ID: "execution-get", Method: get, Path: "/api/executions/{id}", Summary: "Read an execution: its state, what wakes it, what can be done next",
		Tags: executions, Access: TenantViewer, Redis: true, Bounded: true}, a.getExecution)
	register(a, Route{ID: "execution-resume", Method: post, Path: "/api/executions/{id}/resume", Summary: "Resume an execution, checked the way the worker will",
		Tags: executions, Access: TenantEditor, Action: "execution.resume", Redis: true, Bounded: true}, a.resumeExecution)
	register(a, Route{ID: "execution-cancel", Method: post, Path: "/api/executions/{id}/cancel", Summary: "Cancel an execution",
		Tags: executions, Access: TenantEditor, Action: "execution.cancel", Redis: true, Bounded: true}, a.cancelExecution)
	deleteAccess := TenantEditor
	if a.s.Env == "prod" {
		deleteAccess = TenantAdmin // PLAITA_CONSOLE_ENV=prod: deleting is an admin's
	}
	register(a, Route{ID: "execution-delete", Method: del, Path: "/api/executions/{id}", Summary: "Delete an execution's state and keys (a tombstone stays)",
		Tags: executions, Access: deleteAccess, Action: "execution.delete", Redis: true, Bounded: true}, a.deleteExecution)

	events := []string{"events"}
	register(a, Route{ID: "event-publish", Method: post, Path: "/api/events", Summary: "Publish an event: it wakes the executions waiting for it (through the filter role)",
		Tags: events, Access: TenantEditor, Action: "event.publish", Redis: true, Bounded: true, Status: http.StatusCreated, MaxBody: EventBodyLimit}, a.publishEvent)
	register(a, Route{ID: "event-list", Method: get, Path: "/api/events", Summary: "List the tenant's events, newest first (type, cursor)",
		Tags: events, Access: TenantViewer, Redis: true, Bounded: true}, a.listEvents)

	dlq := []string{"dead letters"}
	register(a, Route{ID: "dead-letter-list", Method: get, Path: "/api/dead-letters", Summary: "List the tenant's dead letters, newest first (all_tenants: a platform admin's)",
		Tags: dlq, Access: TenantViewer, Redis: true, Bounded: true}, a.listDeadLetters)
	register(a, Route{ID: "dead-letter-get", Method: get, Path: "/api/dead-letters/{id}", Summary: "Read one dead letter with its payload",
		Tags: dlq, Access: TenantViewer, Redis: true, Bounded: true}, a.getDeadLetter)
	register(a, Route{ID: "dead-letter-replay", Method: post, Path: "/api/dead-letters/{id}/replay", Summary: "Enqueue a dead letter again, once (a second replay enqueues nothing)",
		Tags: dlq, Access: TenantAdmin, Action: "dlq.replay", Redis: true, Bounded: true}, a.replayDeadLetter)
}

// registerDraftRoutes: the flow drafts (h_drafts.go). They live in the console database and
// need no Redis, but publishing one does.
func registerDraftRoutes(a *API, flowBody int64) {
	drafts := []string{"flows"}
	register(a, Route{ID: "draft-list", Method: get, Path: "/api/flows/drafts", Summary: "List the tenant's flow drafts by flow id (without their definitions)",
		Tags: drafts, Access: TenantViewer}, a.listDrafts)
	register(a, Route{ID: "draft-create", Method: post, Path: "/api/flows/drafts", Summary: "Create a flow's draft (409 when it has one)",
		Tags: drafts, Access: TenantEditor, Action: "draft.create", Status: http.StatusCreated, MaxBody: flowBody}, a.createDraft)
	register(a, Route{ID: "draft-get", Method: get, Path: "/api/flows/drafts/{id}", Summary: "Read a flow's draft with its definition (its revision is the ETag)",
		Tags: drafts, Access: TenantViewer}, a.getDraft)
	register(a, Route{ID: "draft-save", Method: put, Path: "/api/flows/drafts/{id}", Summary: "Save a flow's draft (If-Match: the revision it started from, else 412)",
		Tags: drafts, Access: TenantEditor, Action: "draft.save", MaxBody: flowBody}, a.saveDraft)
	register(a, Route{ID: "draft-delete", Method: del, Path: "/api/flows/drafts/{id}", Summary: "Delete a flow's draft (its published versions stay)",
		Tags: drafts, Access: TenantEditor, Action: "draft.delete", Status: http.StatusNoContent}, a.deleteDraft)
	register(a, Route{ID: "draft-publish", Method: post, Path: "/api/flows/drafts/{id}/publish", Summary: "Publish a flow's draft as an immutable version (If-Match: that revision)",
		Tags: drafts, Access: TenantEditor, Action: "flow.publish", Redis: true, Bounded: true}, a.publishDraft)
}

// registerOperationRoutes: schedules, credentials, signed triggers, approvals, the cluster.
func registerOperationRoutes(a *API) {
	hooks := []string{"hooks"}
	register(a, Route{ID: "contract-key-list", Method: get, Path: "/api/contract-keys", Summary: "List the tenant's contract keys (never their secrets)",
		Tags: hooks, Access: TenantAdmin, Bounded: true}, a.listContractKeys)
	register(a, Route{ID: "contract-key-create", Method: post, Path: "/api/contract-keys", Summary: "Create a contract key: its whsec_ secret is answered this once",
		Tags: hooks, Access: TenantAdmin, Action: "contract_key.create", Bounded: true, Status: http.StatusCreated}, a.createContractKey)
	register(a, Route{ID: "contract-key-retire", Method: del, Path: "/api/contract-keys/{id}", Summary: "Retire a contract key: requests signed with it are refused",
		Tags: hooks, Access: TenantAdmin, Action: "contract_key.retire", Bounded: true, Status: http.StatusNoContent}, a.retireContractKey)
	for _, scope := range []string{"tenant", "global"} {
		global := scope == "global"
		key := "one of the tenant's contract keys"
		if global {
			key = "the global contract key (PLAITA_CONSOLE_SECRET_KEY; 503 while it is not set)"
		}
		register(a, Route{ID: "hook-" + scope + "-start", Method: post, Path: "/api/hooks/" + scope + "/{tenant}/start/{flow_id}",
			Summary: "Start a flow (the body is its INPUT) with a request signed under " + key + " (Standard Webhooks)",
			Tags:    hooks, Access: Public, Action: "hook.start", Redis: true, Bounded: true}, a.hookStart(global))
		register(a, Route{ID: "hook-" + scope + "-event", Method: post, Path: "/api/hooks/" + scope + "/{tenant}/events/{type}",
			Summary: "Publish an event (the body is its data) with a request signed under " + key + " (Standard Webhooks)",
			Tags:    hooks, Access: Public, Action: "hook.event", Redis: true, Bounded: true}, a.hookEvent(global))
	}
	creds := []string{"credentials"}
	register(a, Route{ID: "credentials-rotate-key", Method: post, Path: "/api/cluster/credentials/rotate-key",
		Summary: "Move every credential and contract key to the current master key (the ring must still hold the old one)",
		Tags:    creds, Access: Platform, Action: "credentials.rotate_key", Redis: true}, a.rotateKey)
	register(a, Route{ID: "credential-list", Method: get, Path: "/api/credentials", Summary: "List the tenant's credentials (names, fingerprints, never values)",
		Tags: creds, Access: TenantViewer, Redis: true, Bounded: true}, a.listCredentials)
	register(a, Route{ID: "credential-create", Method: post, Path: "/api/credentials", Summary: "Create a credential: its value is sealed at once and never answered back",
		Tags: creds, Access: TenantAdmin, Action: "credential.create", Redis: true, Bounded: true, Status: http.StatusCreated}, a.createCredential)
	register(a, Route{ID: "credential-get", Method: get, Path: "/api/credentials/{name}", Summary: "Read a credential's fingerprint, key and revision",
		Tags: creds, Access: TenantViewer, Redis: true, Bounded: true}, a.getCredential)
	register(a, Route{ID: "credential-set", Method: put, Path: "/api/credentials/{name}", Summary: "Replace a credential's value (the executions that open it next send the new one)",
		Tags: creds, Access: TenantAdmin, Action: "credential.set", Redis: true, Bounded: true}, a.setCredential)
	register(a, Route{ID: "credential-delete", Method: del, Path: "/api/credentials/{name}", Summary: "Delete a credential (a node that names it fails from then on)",
		Tags: creds, Access: TenantAdmin, Action: "credential.delete", Redis: true, Bounded: true, Status: http.StatusNoContent}, a.deleteCredential)
	schedules := []string{"schedules"}
	register(a, Route{ID: "schedule-list", Method: get, Path: "/api/schedules", Summary: "List the tenant's cron schedules, oldest first",
		Tags: schedules, Access: TenantViewer, Redis: true, Bounded: true}, a.listSchedules)
	register(a, Route{ID: "schedule-create", Method: post, Path: "/api/schedules", Summary: "Create a cron schedule that starts a flow",
		Tags: schedules, Access: TenantEditor, Action: "schedule.create", Redis: true, Bounded: true, Status: http.StatusCreated}, a.createSchedule)
	register(a, Route{ID: "schedule-get", Method: get, Path: "/api/schedules/{id}", Summary: "Read a schedule with its firing state",
		Tags: schedules, Access: TenantViewer, Redis: true, Bounded: true}, a.getSchedule)
	register(a, Route{ID: "schedule-fires", Method: get, Path: "/api/schedules/{id}/fires", Summary: "A schedule's newest past ticks, each with its execution and that execution's status",
		Tags: schedules, Access: TenantViewer, Redis: true, Bounded: true}, a.scheduleFires)
	register(a, Route{ID: "schedule-update", Method: patch, Path: "/api/schedules/{id}", Summary: "Change a schedule (a new calendar fires only its ticks after the change)",
		Tags: schedules, Access: TenantEditor, Action: "schedule.update", Redis: true, Bounded: true}, a.updateSchedule)
	register(a, Route{ID: "schedule-delete", Method: del, Path: "/api/schedules/{id}", Summary: "Delete a schedule (a start already enqueued still runs)",
		Tags: schedules, Access: TenantEditor, Action: "schedule.delete", Redis: true, Bounded: true, Status: http.StatusNoContent}, a.deleteSchedule)
	register(a, Route{ID: "schedule-enable", Method: post, Path: "/api/schedules/{id}/enable", Summary: "Enable a schedule: ticks from now on fire",
		Tags: schedules, Access: TenantEditor, Action: "schedule.enable", Redis: true, Bounded: true}, a.setScheduleEnabled(true))
	register(a, Route{ID: "schedule-disable", Method: post, Path: "/api/schedules/{id}/disable", Summary: "Disable a schedule: its ticks are skipped until it is enabled again",
		Tags: schedules, Access: TenantEditor, Action: "schedule.disable", Redis: true, Bounded: true}, a.setScheduleEnabled(false))
	register(a, Route{ID: "schedule-run", Method: post, Path: "/api/schedules/{id}/run", Summary: "Start what the schedule starts, now and once (its ticks are left as they are)",
		Tags: schedules, Access: TenantEditor, Action: "schedule.run", Redis: true, Bounded: true, Status: http.StatusCreated}, a.runSchedule)

	approvals := []string{"approvals"}
	register(a, Route{ID: "approval-list", Method: get, Path: "/api/approvals", Summary: "List the tenant's pending approvals, newest first",
		Tags: approvals, Access: TenantViewer, Redis: true, Bounded: true}, a.listApprovals)
	register(a, Route{ID: "approval-answer", Method: post, Path: "/api/approvals/{id}", Summary: "Approve or reject the approval an execution waits for (the caller is recorded as who answered)",
		Tags: approvals, Access: TenantEditor, Action: "approval.answer", Redis: true, Bounded: true}, a.answerApproval)

	cluster := []string{"cluster"}
	register(a, Route{ID: "cluster-status", Method: get, Path: "/api/cluster/status", Summary: "The cluster at a glance: backlog, delay queue, roles, instances, generation mismatches, what needs attention",
		Tags: cluster, Access: Platform, Redis: true, Bounded: true}, a.clusterStatus)
	register(a, Route{ID: "cluster-instances", Method: get, Path: "/api/cluster/instances", Summary: "The registry's live instances, by role, with their generations",
		Tags: cluster, Access: Platform, Redis: true, Bounded: true}, a.clusterInstances)
	register(a, Route{ID: "cluster-instance-status", Method: get, Path: "/api/cluster/instances/{id}/status", Summary: "Ask one instance for its status over its control channel (role, status, draining, uptime, tasks in flight)",
		Tags: cluster, Access: Platform, Redis: true, Bounded: true}, a.instanceStatus)
	register(a, Route{ID: "cluster-instance-drain", Method: post, Path: "/api/cluster/instances/{id}/drain", Summary: "Ask one instance to drain and exit, as SIGTERM does (plaita ctl stop)",
		Tags: cluster, Access: Platform, Action: "instance.drain", Redis: true, Bounded: true}, a.drainInstance)
	register(a, Route{ID: "cluster-config", Method: get, Path: "/api/cluster/config", Summary: "The console's effective configuration (secrets masked) and its generation hashes",
		Tags: cluster, Access: Platform}, a.clusterConfig)
	register(a, Route{ID: "tenant-status-reconcile", Method: post, Path: "/api/cluster/tenant-status/reconcile", Summary: "Publish every tenant's status from the database to Redis now",
		Tags: cluster, Access: Platform, Action: "tenant_status.reconcile", Redis: true, Bounded: true}, a.reconcileTenantStatusesNow)
	register(a, Route{ID: "services", Method: get, Path: "/api/services", Summary: "The live instances by role, with their metrics and health address",
		Tags: cluster, Access: Platform, Redis: true, Bounded: true}, a.services)
	register(a, Route{ID: "metrics", Method: get, Path: "/api/metrics", Summary: "The cluster as Prometheus text: backlogs, dead letters, delay queue, live instances, scrape health",
		Tags: cluster, Access: Platform, Redis: true, Bounded: true}, a.clusterMetrics)
}
