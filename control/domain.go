package control

import (
	"plaita/queue"
	"plaita/store"
	"plaita/store/sqlite"
)

// The records the operations take and return that storage defines, under the names a front
// end uses: a front end imports no storage package, and names them here. Each is storage's own
// type (an alias), so a value passes through unchanged and encodes as storage encodes it.
type (
	// Event is a published event (PublishEvent takes one; ListEvents pages them).
	Event = store.Event
	// EventPage is a page of ListEvents.
	EventPage = store.EventPage
	// ApprovalPage is a page of Approvals.
	ApprovalPage = store.ApprovalPage
	// Schedule is what AddSchedule creates.
	Schedule = store.Schedule
	// ScheduleRecord is a stored schedule with its ticks (Schedules, Schedule).
	ScheduleRecord = store.ScheduleRecord
	// DeadLetter is one entry of the dead-letter stream (DeadLetters, DeadLetter).
	DeadLetter = queue.DLQEntry
	// Draft is a flow's draft in the console database (Catalog).
	Draft = sqlite.Draft
)

// LatestVersion is the flow version a schedule starts when it names none: the latest
// published at each tick.
const LatestVersion = store.LatestVersion

// What a publication of a flow did (Published.Result).
const (
	// NewlyPublished: the version was published by this call.
	NewlyPublished = store.Published
	// AlreadyPublished: the version was already published with the same definition; it is
	// left as it is.
	AlreadyPublished = store.AlreadyPublished
)

// ReplayAlreadyReplayed is the status of a replay of a dead letter that was replayed before
// (ReplayDeadLetter): nothing was enqueued.
const ReplayAlreadyReplayed = queue.ReplayAlreadyReplayed
