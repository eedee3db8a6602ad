package health

import (
	"bytes"
	"strings"
)

// Help texts of /metrics. VictoriaMetrics/metrics (v1.45) writes "# HELP <family>" with no text
// once metadata is on (main.go) and has no way to give one, so every exposition plaita serves —
// a role's /metrics (Server) and the console's cluster series (GET /api/metrics) — goes through
// FillHelp, which takes the text from this one table. A family missing here keeps its empty
// HELP line, which promtool refuses in .ci/run; TestEveryDeclaredMetricHasHelp (help_test.go)
// fails first, on any family named anywhere in the code, and test/e2e's
// TestE2EEveryRoleMetricHasHelp on what each role really serves.
//
// A text says what is counted and, where a reader would ask, what a rise means. The families
// a role declares are documented beside their declaration (the package's constructor); keep
// both in step.
var helpTexts = withPresence(map[string]string{
	// ---- task queue (queue/metrics.go; labelled queue="<stream>") ----
	"plaita_queue_acked_total":                  "Deliveries of the task stream acknowledged (XACK) by this worker.",
	"plaita_queue_reclaimed_total":              "Deliveries this worker reclaimed from another consumer after PLAITA_CLAIM_MIN_IDLE_MS idle (a consumer that died or stalled).",
	"plaita_queue_dead_lettered_total":          "Messages this worker moved to the dead-letter stream (PLAITA_DLQ_KEY).",
	"plaita_queue_lease_conflicts_total":        "Deliveries skipped because another holder has the execution's lease (left pending, no delivery spent).",
	"plaita_queue_failed_total":                 "Deliveries whose run failed transiently and were left pending for a redelivery.",
	"plaita_queue_residue_swept_total":          "Stream entries acknowledged but not deleted (a worker killed between XACK and XDEL) that the residue sweeper removed.",
	"plaita_queue_malformed_total":              "Messages that are no valid task envelope, dead-lettered as malformed.",
	"plaita_queue_too_old_total":                "Tasks older than PLAITA_TASK_MAX_AGE_SECONDS (or of unknown age) dropped without running.",
	"plaita_queue_newer_schema_total":           "Tasks of a newer task schema than this worker understands, dead-lettered.",
	"plaita_queue_config_family_mismatch_total": "First deliveries of another config_family left pending (not run here): two fleets share one stream.",
	"plaita_queue_config_budget_stale_total":    "Redeliveries of another budget_generation left pending for a worker of that budget (no delivery spent).",
	"plaita_queue_config_legacy_total":          "Deliveries without config generations (older producers, a drained List): never gated.",
	// Gauges read on each scrape: by the worker (its queue) and by the console (GET /api/metrics).
	"plaita_queue_stream_length":           "Entries in the task stream (XLEN), read at scrape time; residue included.",
	"plaita_queue_pending":                 "Entries delivered to the consumer group and not acknowledged yet (XPENDING), read at scrape time.",
	"plaita_queue_dlq_length":              "Entries in the dead-letter stream, read at scrape time.",
	"plaita_queue_depth_read_failed_total": "Scrapes whose read of the queue depth failed; the queue gauges then keep their last values.",
	"plaita_queue_lag":                     "Entries of the task stream the consumer group has not been handed yet (an upper bound when Redis cannot say), read at scrape time.",
	"plaita_queue_residue":                 "Entries acknowledged but not deleted from the task stream (not work: the workers' sweeper removes them), read at scrape time.",

	// ---- worker: dispatch, gates, settle (roles/worker) ----
	"plaita_dispatch_runs_total":            "Runs of an execution started by this worker (a start or a resume taken under the lease).",
	"plaita_dispatch_acked_total":           "Deliveries the dispatcher settled by acknowledging them.",
	"plaita_dispatch_lease_conflicts_total": "Deliveries the dispatcher did not run because another holder has the execution's lease.",
	"plaita_dispatch_noop_acks_total":       "Deliveries acknowledged without running anything (a stale or duplicate resume, a wake-up that no longer fits).",
	"plaita_dispatch_failed_total":          "Deliveries whose run failed (transient failures and exhausted delivery budgets).",
	"plaita_dispatch_target_left_total":     "Messages addressed to another live instance (target_instance_id) and left for it.",
	"plaita_dispatch_target_dead_total":     "Messages addressed to an instance that is not alive, run here instead.",
	"plaita_affinity_handover_total":        "Messages whose flow's repo is missing under this worker's workspace root, handed over to another worker.",
	"plaita_affinity_run_anyway_total":      "Messages run here although their repo is missing, after the workspace affinity's handovers were used up.",
	"plaita_affinity_invalid_repo_total":    "Messages whose flow names a repo that is no valid repo name (the affinity check is skipped).",
	"plaita_tenant_status_refused_total":    "Starts and resumes refused because their tenant is disabled (plaita:tenant_status).",
	"plaita_tenant_status_stale_epoch_total": "Messages held because the deployment epochs disagree (PLAITA_DEPLOYMENT_EPOCH): " +
		"this worker is older than Redis's epoch, or a non-default tenant's status is not proven current.",
	"plaita_tenant_quota_admitted_total":      "Starts admitted under their tenant's running quota.",
	"plaita_tenant_quota_deferred_total":      "Starts deferred because their tenant runs its quota of executions (PLAITA_TENANT_MAX_RUNNING).",
	"plaita_tenant_quota_bypass_total":        "Starts run over their tenant's quota after PLAITA_TENANT_QUOTA_DEFER_MAX deferrals.",
	"plaita_worker_stale_wakeups_total":       "Delay-queue wake-ups that no longer fit their execution's suspension (an answered approval's timeout …), acknowledged as no-ops.",
	"plaita_worker_wakeups_deferred_total":    "Delay-queue wake-ups that met a held lease and went back on the delay queue for a second.",
	"plaita_step_duration_seconds":            "Duration of one node step (attempts and retries), in seconds.",
	"plaita_executions_total":                 "Executions this worker ended, by terminal status.",
	"plaita_execution_events_published_total": "Live execution events published for watchers (the console's live views).",
	"plaita_execution_events_failed_total":    "Live execution events that could not be encoded or published.",
	"plaita_execution_events_dropped_total":   "Live execution events dropped because the publishing queue was full.",

	// ---- delay role (roles/delay/mover.go) and the delay queue ----
	"plaita_delay_fired_total":            "Due delay-queue entries whose resume was enqueued on the task stream.",
	"plaita_delay_enqueue_failures_total": "Due entries whose enqueue failed; each is retried later with back-off.",
	"plaita_delay_dead_total":             "Entries given up (malformed, or their enqueue failed too often) and moved to the queue's :dead hash.",
	"plaita_delay_skipped_total":          "Due entries another mover took or that were rescheduled between the read and the move.",
	"plaita_delay_pass_failures_total":    "Passes of the mover that could not read the delay queue.",
	"plaita_delay_lateness_seconds":       "How long after its due time an entry was sent, in seconds.",
	"plaita_delay_scheduled":              "Entries waiting on the delay queue (delays, and wait and approval timeouts — some for waits already over, dropped when due), read at scrape time.",
	"plaita_delay_due":                    "Entries of the delay queue whose time has come and that are not sent yet (the backlog), read at scrape time.",
	"plaita_delay_dead_entries":           "Entries in the delay queue's :dead hash (given up: their executions stay suspended until resumed by hand), read at scrape time.",
	"plaita_delay_dead":                   "Entries in the delay queue's :dead hash (given up: their executions stay suspended until resumed by hand), read at scrape time.",
	"plaita_delay_oldest_due_age_seconds": "How long ago the oldest due entry became due (0 with nothing due), in seconds, read at scrape time.",

	// ---- schedule role (roles/schedule/scheduler.go) ----
	"plaita_schedule_passes_total":                "Passes of the scheduler over the due schedules.",
	"plaita_schedule_pass_errors_total":           "Passes that met an error; what was not done stays due.",
	"plaita_schedule_fired_total":                 "Schedule ticks whose start was enqueued.",
	"plaita_schedule_claim_conflicts_total":       "Ticks another schedule process claimed first (or whose schedule was edited meanwhile).",
	"plaita_schedule_enqueue_failures_total":      "Claimed ticks whose start could not be enqueued (recovered by a later pass).",
	"plaita_schedule_bad_records_total":           "Schedule records that do not decode: not fired until written again or deleted.",
	"plaita_schedule_skipped_total":               "Ticks skipped, by reason (tenant disabled, flow not published, start refused).",
	"plaita_schedule_recovered_total":             "Claims left pending by a process that stopped, completed later, by how.",
	"plaita_schedule_fire_lag_seconds":            "How long after its tick time a schedule's start was enqueued, in seconds.",
	"plaita_schedule_last_pass_timestamp_seconds": "When the scheduler's last pass ended (Unix seconds).",

	// ---- filter role (roles/filter) ----
	"plaita_filter_events_total":                       "Published events the filter handled (notifications and reconcile passes).",
	"plaita_filter_events_expired_total":               "Events whose record had expired before the filter read it.",
	"plaita_filter_wakeups_total":                      "Resumes the filter enqueued for executions waiting on an event.",
	"plaita_filter_duplicates_total":                   "Wake-ups another filter had already claimed or sent (not enqueued again).",
	"plaita_filter_takeovers_total":                    "Wake-ups claimed by another filter and never marked sent, taken over and enqueued.",
	"plaita_filter_no_match_total":                     "Events checked against a waiting execution whose match was false or could not be evaluated.",
	"plaita_filter_stale_subscriptions_total":          "Index entries of waits their execution no longer has, removed.",
	"plaita_filter_events_before_wait_total":           "Events published before the wait they were checked against began (not for it).",
	"plaita_filter_timed_out_waits_total":              "Events that came after their wait timed out (the delay role resumes it with the timeout).",
	"plaita_filter_tenant_skipped_total":               "Events of a disabled tenant, not delivered (the reconciler delivers them once it is active).",
	"plaita_filter_unchecked_total":                    "Events delivered without the match checked here (the flow cannot be parsed by the filter): the worker checks it.",
	"plaita_filter_errors_total":                       "Events whose delivery failed (Redis, a state that cannot be read); the reconciler tries again.",
	"plaita_filter_invalid_subscriptions_total":        "Wait index members no wait can have, skipped.",
	"plaita_filter_wakeups_refused_total":              "Resumes the queue refused as invalid envelopes (not enqueued).",
	"plaita_filter_uncorrelated_checked_total":         "Uncorrelated waits checked against an event (every event of the type is checked against them).",
	"plaita_filter_notifications_total":                "Event notifications received on the pub/sub channel.",
	"plaita_filter_notifications_dropped_total":        "Notifications dropped because the handling queue was full (the reconciler delivers their events).",
	"plaita_filter_notifications_malformed_total":      "Notifications that are no event reference, ignored.",
	"plaita_filter_reconcile_passes_total":             "Reconcile passes over the published events (periodic, and asked for after dropped notifications).",
	"plaita_filter_reconcile_events_total":             "Events read by reconcile passes.",
	"plaita_filter_reconcile_failures_total":           "Reconcile passes, or tenants of a pass, that could not be completed; the next pass goes on from the same cursor.",
	"plaita_filter_reconcile_overflow_passes_total":    "Reconcile passes run because notifications were dropped.",
	"plaita_filter_reconcile_invalid_members_total":    "Event feed or tenant list members no event or tenant can have, skipped by reconcile passes.",
	"plaita_event_index_sweep_checked_total":           "Event feed members the index sweeper checked.",
	"plaita_event_index_sweep_removed_total":           "Event feed members of expired events the index sweeper removed.",
	"plaita_event_index_sweep_tenants_forgotten_total": "Idle tenants whose whole event feed had expired, removed from the tenant list by the sweeper.",
	"plaita_event_index_sweep_invalid_total":           "Event feed or tenant list members no event or tenant can have, removed by the sweeper.",

	// ---- alerts (internal/alert) ----
	"plaita_alerts_sent_total":    "Alerts posted to PLAITA_ALERT_WEBHOOK.",
	"plaita_alerts_failed_total":  "Alerts whose post failed (or that were still queued when the process stopped).",
	"plaita_alerts_dropped_total": "Alerts dropped because the sending queue was full.",

	// ---- the console's cluster series (web/api/h_cluster.go, GET /api/metrics) ----
	"plaita_instances":                            "Live instances in the registry, by role and status.",
	"plaita_workers_registered_total":             "Worker (and dev) instances running, per the registry.",
	"plaita_generation_mismatches":                "Configuration generations that differ among the live instances of one queue (see plaita status).",
	"plaita_console_scrape_failed_commands_total": "Parts of the cluster a GET /api/metrics could not read, by part (their series are then missing).",
	"plaita_console_scrape_degraded":              "1 when the last GET /api/metrics could not read a part of the cluster (a 0 elsewhere may then be missing data).",

	// ---- the library's process and Go runtime series (metrics.WriteProcessMetrics) ----
	"go_gc_duration_seconds":                        "Duration of the stop-the-world pauses of garbage collections, in seconds.",
	"go_gc_pauses_seconds":                          "Distribution of garbage collection pause times, in seconds.",
	"go_gc_cpu_seconds_total":                       "CPU time spent by the garbage collector, in seconds.",
	"go_gc_mark_assist_cpu_seconds_total":           "CPU time goroutines spent assisting the garbage collector's marking, in seconds.",
	"go_scavenge_cpu_seconds_total":                 "CPU time spent returning memory to the operating system, in seconds.",
	"go_sched_latencies_seconds":                    "Time goroutines waited runnable before they ran, in seconds.",
	"go_mutex_wait_seconds_total":                   "Time goroutines spent blocked on a mutex, in seconds.",
	"go_memlimit_bytes":                             "The Go runtime's soft memory limit (GOMEMLIMIT), in bytes.",
	"go_gomaxprocs":                                 "GOMAXPROCS: the CPUs Go code may run on at once.",
	"go_goroutines":                                 "Goroutines that exist now.",
	"go_threads":                                    "Operating system threads the Go runtime created.",
	"go_info":                                       "The Go version the binary was built with (in the version label); always 1.",
	"go_info_ext":                                   "The compiler, GOARCH, GOOS and GOROOT of the binary (in the labels); always 1.",
	"go_memstats_alloc_bytes":                       "Bytes of heap objects allocated and still in use.",
	"go_memstats_alloc_bytes_total":                 "Bytes allocated for heap objects since the process started.",
	"go_memstats_buck_hash_sys_bytes":               "Bytes used by the profiling bucket hash table.",
	"go_memstats_frees_total":                       "Heap objects freed since the process started.",
	"go_memstats_gc_cpu_fraction":                   "Fraction of the available CPU time used by the garbage collector since the process started.",
	"go_memstats_gc_sys_bytes":                      "Bytes of garbage collection metadata.",
	"go_memstats_heap_alloc_bytes":                  "Bytes of heap objects allocated and still in use.",
	"go_memstats_heap_idle_bytes":                   "Bytes of heap spans with no objects (idle).",
	"go_memstats_heap_inuse_bytes":                  "Bytes of heap spans with at least one object.",
	"go_memstats_heap_objects":                      "Heap objects allocated and not freed yet.",
	"go_memstats_heap_released_bytes":               "Bytes of heap memory returned to the operating system.",
	"go_memstats_heap_sys_bytes":                    "Bytes of heap memory obtained from the operating system.",
	"go_memstats_last_gc_time_seconds":              "When the last garbage collection ended (Unix seconds).",
	"go_memstats_lookups_total":                     "Pointer lookups performed by the runtime.",
	"go_memstats_mallocs_total":                     "Heap objects allocated since the process started.",
	"go_memstats_mcache_inuse_bytes":                "Bytes of mcache structures in use.",
	"go_memstats_mcache_sys_bytes":                  "Bytes of memory obtained from the operating system for mcache structures.",
	"go_memstats_mspan_inuse_bytes":                 "Bytes of mspan structures in use.",
	"go_memstats_mspan_sys_bytes":                   "Bytes of memory obtained from the operating system for mspan structures.",
	"go_memstats_next_gc_bytes":                     "Heap size at which the next garbage collection starts, in bytes.",
	"go_memstats_other_sys_bytes":                   "Bytes of other runtime allocations.",
	"go_memstats_stack_inuse_bytes":                 "Bytes of stack spans in use.",
	"go_memstats_stack_sys_bytes":                   "Bytes of stack memory obtained from the operating system.",
	"go_memstats_sys_bytes":                         "Bytes of memory the Go runtime obtained from the operating system.",
	"process_cpu_seconds_total":                     "CPU time of the process, user and system, in seconds.",
	"process_cpu_seconds_user_total":                "User CPU time of the process, in seconds.",
	"process_cpu_seconds_system_total":              "System CPU time of the process, in seconds.",
	"process_major_pagefaults_total":                "Page faults of the process that needed a disk read.",
	"process_minor_pagefaults_total":                "Page faults of the process served without a disk read.",
	"process_num_threads":                           "Operating system threads of the process.",
	"process_open_fds":                              "File descriptors the process has open.",
	"process_max_fds":                               "The process's limit of open file descriptors.",
	"process_resident_memory_bytes":                 "Resident memory of the process, in bytes.",
	"process_resident_memory_peak_bytes":            "Peak resident memory of the process, in bytes.",
	"process_resident_memory_anon_bytes":            "Anonymous resident memory of the process, in bytes.",
	"process_resident_memory_file_bytes":            "File-backed resident memory of the process, in bytes.",
	"process_resident_memory_shared_bytes":          "Shared resident memory of the process, in bytes.",
	"process_virtual_memory_bytes":                  "Virtual memory of the process, in bytes.",
	"process_virtual_memory_peak_bytes":             "Peak virtual memory of the process, in bytes.",
	"process_start_time_seconds":                    "When the process started (Unix seconds).",
	"process_io_read_bytes_total":                   "Bytes the process read (read syscalls, caches included).",
	"process_io_written_bytes_total":                "Bytes the process wrote (write syscalls, caches included).",
	"process_io_read_syscalls_total":                "Read syscalls of the process.",
	"process_io_write_syscalls_total":               "Write syscalls of the process.",
	"process_io_storage_read_bytes_total":           "Bytes the process caused to be read from storage.",
	"process_io_storage_written_bytes_total":        "Bytes the process caused to be written to storage.",
	"process_pressure_cpu_waiting_seconds_total":    "Time some tasks of the process's cgroup waited for a CPU (PSI), in seconds.",
	"process_pressure_cpu_stalled_seconds_total":    "Time all tasks of the process's cgroup were stalled on CPU (PSI), in seconds.",
	"process_pressure_io_waiting_seconds_total":     "Time some tasks of the process's cgroup waited for I/O (PSI), in seconds.",
	"process_pressure_io_stalled_seconds_total":     "Time all tasks of the process's cgroup were stalled on I/O (PSI), in seconds.",
	"process_pressure_memory_waiting_seconds_total": "Time some tasks of the process's cgroup waited for memory (PSI), in seconds.",
	"process_pressure_memory_stalled_seconds_total": "Time all tasks of the process's cgroup were stalled on memory (PSI), in seconds.",
	"process_cgroup_cpu_throttled_seconds_total":    "Time the process's cgroup was throttled by its CPU limit, in seconds.",
})

// presenceRoles are the roles whose instances register (internal/presence): each has the
// families of presenceHelp, named plaita_<role>_<suffix> at run time.
var presenceRoles = []string{"console", "delay", "dev", "filter", "schedule", "worker"}

// presenceHelp are internal/presence's per-role families, by suffix.
var presenceHelp = map[string]string{
	"heartbeat_timestamp_seconds": "When this instance last wrote its registry heartbeat (Unix seconds).",
	"draining":                    "1 while this instance drains or stops (not ready, takes no new work), 0 while it runs.",
	"active_tasks":                "Tasks this instance is handling now.",
	"registered":                  "1 while this instance's registry record is written, 0 once it deregistered.",
	"heartbeat_failures_total":    "Registry heartbeats of this instance that failed (its record expires when they fail for longer than its TTL).",
}

// withPresence adds the presence families of every role to the table.
func withPresence(t map[string]string) map[string]string {
	for _, role := range presenceRoles {
		for suffix, help := range presenceHelp {
			t["plaita_"+role+"_"+suffix] = help
		}
	}
	return t
}

// Help is the help text of a metric family (false when the table has none).
func Help(family string) (string, bool) {
	h, ok := helpTexts[family]
	return h, ok
}

// FillHelp returns the exposition text b with each empty "# HELP <family>" line given its
// text from the table (a family it lacks keeps the empty line, for promtool to name). The
// metadata of a family is kept once: metrics.WriteGaugeUint64 and its kin write it again for
// every series, which Prometheus's format does not allow.
func FillHelp(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/4)
	seen := map[string]bool{}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
			kind, rest, _ := bytes.Cut(rest, []byte(" "))
			family, text, _ := bytes.Cut(bytes.TrimRight(rest, "\n"), []byte(" "))
			if k := string(kind) + " " + string(family); string(kind) == "HELP" || string(kind) == "TYPE" {
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			if string(kind) == "HELP" && len(bytes.TrimSpace(text)) == 0 {
				if help, ok := helpTexts[string(family)]; ok {
					out.WriteString("# HELP " + string(family) + " " + escapeHelp(help) + "\n")
					continue
				}
			}
		}
		out.Write(line)
	}
	return out.Bytes()
}

// escapeHelp escapes what the text format wants escaped in a help text (the table holds none:
// TestHelpTextsAreOneLine; this keeps the output valid whatever it holds).
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
