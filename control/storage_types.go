package control

import (
	"plaita/queue"
	"plaita/store"
	"plaita/store/sqlite"
)

// The storage types some of control's results carry, by control's names: a front end reads
// their values and copies them into its own wire types, and imports no storage package.
type (
	// Draft is a flow's draft in the console database (Catalog).
	Draft = sqlite.Draft
	// ScheduleRecord is a schedule with its firing state (Plane's schedule operations).
	ScheduleRecord = store.ScheduleRecord
	// DeadLetter is an entry of the dead-letter stream (Plane's dead-letter operations).
	DeadLetter = queue.DLQEntry
)

// AlreadyPublished is the result of a publication whose version holds that definition already.
const AlreadyPublished = store.AlreadyPublished
