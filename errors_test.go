package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"plaita/engine/state"
	"plaita/internal/keyring"
	"plaita/model"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/postgres"
	"plaita/store/sqlite"
)

// sentinelFiles are where the storage and queue packages declare their sentinels: every Err…
// variable of these files must be below, with its class. (engine/state's other files declare
// the document errors of the engine, which classed errors wrap.)
var sentinelFiles = map[string]string{
	"store": "store/*.go", "sqlite": "store/sqlite/*.go", "postgres": "store/postgres/*.go", "keys": "store/keys/*.go", "queue": "queue/*.go",
	"state": "engine/state/errors.go", "keyring": "internal/keyring/*.go",
}

// sentinels are every sentinel of those packages, by package.name, with its class.
var sentinels = map[string]struct {
	err   error
	class model.Class
}{
	"state.ErrNotFound":           {state.ErrNotFound, model.NotFound},
	"state.ErrStateSerialization": {state.ErrStateSerialization, model.Internal},
	"state.ErrStateTooLarge":      {state.ErrStateTooLarge, model.Internal},
	"state.ErrLeaseLost":          {state.ErrLeaseLost, model.Conflict},

	"keyring.ErrBadKey":    {keyring.ErrBadKey, model.Invalid},
	"keyring.ErrWrongKey":  {keyring.ErrWrongKey, model.Conflict},
	"keyring.ErrMalformed": {keyring.ErrMalformed, model.Invalid},
	"keyring.ErrNoKeyFile": {keyring.ErrNoKeyFile, model.Invalid},

	"keys.ErrBadTenant": {keys.ErrBadTenant, model.Invalid},
	"keys.ErrBadID":     {keys.ErrBadID, model.Invalid},
	"keys.ErrBadName":   {keys.ErrBadName, model.Invalid},

	"store.ErrStateSerialization": {store.ErrStateSerialization, model.Internal},
	"store.ErrNotFound":           {store.ErrNotFound, model.NotFound},
	"store.ErrStateTooLarge":      {store.ErrStateTooLarge, model.Internal},
	"store.ErrLeaseLost":          {store.ErrLeaseLost, model.Conflict},
	"store.ErrStateCorrupt":       {store.ErrStateCorrupt, model.Internal},
	"store.ErrStateSave":          {store.ErrStateSave, model.Unavailable},
	"store.ErrStateLoad":          {store.ErrStateLoad, model.Unavailable},
	"store.ErrStateDelete":        {store.ErrStateDelete, model.Unavailable},
	"store.ErrRedis":              {store.ErrRedis, model.Unavailable},
	"store.ErrNeedsRedis":         {store.ErrNeedsRedis, model.Conflict},
	"store.ErrCredentialNotFound": {store.ErrCredentialNotFound, model.NotFound},
	"store.ErrCredentialExists":   {store.ErrCredentialExists, model.Conflict},
	"store.ErrCredentialChanged":  {store.ErrCredentialChanged, model.Conflict},
	"store.ErrCredentialCorrupt":  {store.ErrCredentialCorrupt, model.Internal},
	"store.ErrLeaseHeld":          {store.ErrLeaseHeld, model.Conflict},
	"store.ErrInvalid":            {store.ErrInvalid, model.Invalid},
	"store.ErrConflict":           {store.ErrConflict, model.Unavailable},
	"store.ErrEventNotFound":      {store.ErrEventNotFound, model.NotFound},
	"store.ErrEventConflict":      {store.ErrEventConflict, model.Invalid},
	"store.ErrBadEvent":           {store.ErrBadEvent, model.Invalid},
	"store.ErrFlowNotFound":       {store.ErrFlowNotFound, model.NotFound},
	"store.ErrVersionConflict":    {store.ErrVersionConflict, model.Invalid},
	"store.ErrReservedFlowKey":    {store.ErrReservedFlowKey, model.Invalid},
	"store.ErrScheduleNotFound":   {store.ErrScheduleNotFound, model.NotFound},
	"store.ErrScheduleExists":     {store.ErrScheduleExists, model.Invalid},
	"store.ErrBadSchedule":        {store.ErrBadSchedule, model.Invalid},
	"store.ErrScheduleChanged":    {store.ErrScheduleChanged, model.Unavailable},
	"store.ErrBadRecord":          {store.ErrBadRecord, model.Invalid},
	"store.ErrCorruptChanged":     {store.ErrCorruptChanged, model.Invalid},
	"store.ErrStateChanged":       {store.ErrStateChanged, model.Invalid},
	"store.ErrNotFresh":           {store.ErrNotFresh, model.Unavailable},

	"sqlite.ErrExists":            {sqlite.ErrExists, model.Conflict},
	"sqlite.ErrPrecondition":      {sqlite.ErrPrecondition, model.Conflict},
	"sqlite.ErrUnauthenticated":   {sqlite.ErrUnauthenticated, model.Unauthenticated},
	"sqlite.ErrSchema":            {sqlite.ErrSchema, model.Internal},
	"sqlite.ErrDB":                {sqlite.ErrDB, model.Unavailable},
	"sqlite.ErrTenantNotFound":    {sqlite.ErrTenantNotFound, model.NotFound},
	"sqlite.ErrTenantExists":      {sqlite.ErrTenantExists, model.Conflict},
	"sqlite.ErrTenantActive":      {sqlite.ErrTenantActive, model.Conflict},
	"sqlite.ErrDefaultTenant":     {sqlite.ErrDefaultTenant, model.Invalid},
	"sqlite.ErrUserNotFound":      {sqlite.ErrUserNotFound, model.NotFound},
	"sqlite.ErrLoginTaken":        {sqlite.ErrLoginTaken, model.Conflict},
	"sqlite.ErrBadCredentials":    {sqlite.ErrBadCredentials, model.Unauthenticated},
	"sqlite.ErrMemberNotFound":    {sqlite.ErrMemberNotFound, model.NotFound},
	"sqlite.ErrSessionInvalid":    {sqlite.ErrSessionInvalid, model.Unauthenticated},
	"sqlite.ErrAPIKeyInvalid":     {sqlite.ErrAPIKeyInvalid, model.Unauthenticated},
	"sqlite.ErrAPIKeyNotFound":    {sqlite.ErrAPIKeyNotFound, model.NotFound},
	"sqlite.ErrDraftNotFound":     {sqlite.ErrDraftNotFound, model.NotFound},
	"sqlite.ErrDraftChanged":      {sqlite.ErrDraftChanged, model.Conflict},
	"sqlite.ErrDraftExists":       {sqlite.ErrDraftExists, model.Conflict},
	"sqlite.ErrVersionNotFound":   {sqlite.ErrVersionNotFound, model.NotFound},
	"sqlite.ErrVersionExists":     {sqlite.ErrVersionExists, model.Conflict},
	"sqlite.ErrJobNotFound":       {sqlite.ErrJobNotFound, model.NotFound},
	"sqlite.ErrJobFinished":       {sqlite.ErrJobFinished, model.Conflict},
	"sqlite.ErrJobLeased":         {sqlite.ErrJobLeased, model.Conflict},
	"sqlite.ErrExecutionChanged":  {sqlite.ErrExecutionChanged, model.Conflict},
	"sqlite.ErrBadCursor":         {sqlite.ErrBadCursor, model.Invalid},
	"sqlite.ErrBadPasswordHash":   {sqlite.ErrBadPasswordHash, model.Invalid},
	"sqlite.ErrBadURL":            {sqlite.ErrBadURL, model.Invalid},
	"sqlite.ErrNotEmbedded":       {sqlite.ErrNotEmbedded, model.Invalid},
	"sqlite.ErrCopyUnverified":    {sqlite.ErrCopyUnverified, model.Conflict},
	"sqlite.ErrLocalState":        {sqlite.ErrLocalState, model.Conflict},
	"postgres.ErrBadURL":          {postgres.ErrBadURL, model.Invalid},
	"postgres.ErrUnreachable":     {postgres.ErrUnreachable, model.Unavailable},
	"postgres.ErrRefused":         {postgres.ErrRefused, model.Invalid},
	"sqlite.ErrNoDatabase":        {sqlite.ErrNoDatabase, model.NotFound},
	"sqlite.ErrMigrationNotFound": {sqlite.ErrMigrationNotFound, model.Invalid},

	"queue.ErrRedis":              {queue.ErrRedis, model.Unavailable},
	"queue.ErrNoGroup":            {queue.ErrNoGroup, model.NotFound},
	"queue.ErrNotAStream":         {queue.ErrNotAStream, model.Conflict},
	"queue.ErrListDrain":          {queue.ErrListDrain, model.Conflict},
	"queue.ErrDLQEntryNotFound":   {queue.ErrDLQEntryNotFound, model.NotFound},
	"queue.ErrBadDLQCursor":       {queue.ErrBadDLQCursor, model.Invalid},
	"queue.ErrReplayRefused":      {queue.ErrReplayRefused, model.Conflict},
	"queue.ErrBadWakeup":          {queue.ErrBadWakeup, model.Invalid},
	"queue.ErrBadDelayEntry":      {queue.ErrBadDelayEntry, model.Invalid},
	"queue.ErrInvalidEnvelope":    {queue.ErrInvalidEnvelope, model.Invalid},
	"queue.ErrMissingExecutionID": {queue.ErrMissingExecutionID, model.Invalid},
	"queue.ErrMalformed":          {queue.ErrMalformed, model.Invalid},
	"queue.ErrNewerSchema":        {queue.ErrNewerSchema, model.Invalid},
	"queue.ErrInputTooLarge":      {queue.ErrInputTooLarge, model.Invalid},
	"queue.ErrBadInput":           {queue.ErrBadInput, model.Invalid},
}

// Every sentinel of storage and the queue has exactly one class, the one above, wrapped or
// not, and model.IsTransient follows that class; the list names every Err… variable those
// packages declare, so a new one cannot ship without a class (or with one nobody chose).
func TestEverySentinelHasOneClass(t *testing.T) {
	for name, s := range sentinels {
		for _, err := range []error{s.err, errors.Join(errors.New("context"), s.err)} {
			if got := model.ClassOf(err); got != s.class {
				t.Errorf("%s: class %v, want %v", name, got, s.class)
			}
			if model.IsTransient(err) != s.class.Transient() {
				t.Errorf("%s: IsTransient %v, want %v", name, model.IsTransient(err), s.class.Transient())
			}
			if model.CodeOf(err) == "" {
				t.Errorf("%s: no code", name)
			}
		}
	}
	declared := map[string]bool{}
	fset := token.NewFileSet()
	for pkg, glob := range sentinelFiles {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v (%d files)", glob, err, len(files))
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, spec := range g.Specs {
						for _, n := range spec.(*ast.ValueSpec).Names {
							if strings.HasPrefix(n.Name, "Err") {
								declared[pkg+"."+n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		if _, ok := sentinels[name]; !ok {
			t.Errorf("%s is declared but has no class in this test", name)
		}
	}
	for name := range sentinels {
		if !declared[name] {
			t.Errorf("%s is listed here but not declared", name)
		}
	}
}
