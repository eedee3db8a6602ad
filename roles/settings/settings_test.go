package settings

import (
	"testing"

	"plaita/config"
	"plaita/queue"
)

// config_family hashes config.TaskSchemaVersion; the queue writes and reads queue.SchemaVersion:
// they are one number.
func TestSchemaVersionsAgree(t *testing.T) {
	if config.TaskSchemaVersion != queue.SchemaVersion {
		t.Fatalf("config.TaskSchemaVersion %d, queue.SchemaVersion %d", config.TaskSchemaVersion, queue.SchemaVersion)
	}
}
