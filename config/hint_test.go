package config

import (
	"strings"
	"testing"
)

// TestRejectedFlagSaysOmitTheFlag: the hint of a rejected value says how its giver gets the
// default back: a flag is omitted, a variable unset (a flag was once told to "unset it").
func TestRejectedFlagSaysOmitTheFlag(t *testing.T) {
	t.Parallel()
	_, err := load(t, RoleWorker, true, map[string]string{"PLAITA_DLQ_MAX_LEN": "0"},
		WithFlags(map[string]string{"PLAITA_QUEUE_NAME": "", "PLAITA_WORKER_CONCURRENCY": "many"}))
	if err == nil {
		t.Fatal("an empty --queue-name and --concurrency many were taken")
	}
	msg := err.Error()
	for _, want := range []string{
		`--queue-name: empty value is not allowed (omit the flag to use the default "plaita:flow:queue")`,
		`--concurrency: "many" is not an integer: must be an integer (omit the flag to use the default 1)`,
		`PLAITA_DLQ_MAX_LEN: "0" is zero: must be a positive integer (unset it to use the default`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "--queue-name: empty value is not allowed (unset it") {
		t.Errorf("a flag is told to be unset:\n%s", msg)
	}
	if _, err := ParseLogLevel("verbose"); err == nil || !strings.Contains(err.Error(), "omit the flag to use the default") {
		t.Errorf("--log-level verbose: %v", err)
	}
}
