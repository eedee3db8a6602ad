package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"plaita/store"
)

// TestOpenRelativeURLOfAnAbsoluteDirectory: sqlite:///abs/dir/test.db is the relative path
// abs/dir/test.db (three slashes: the rule config/registry.go documents). When that relative
// directory does not exist but /abs/dir does, the error says which URL names the absolute path;
// when neither exists, it says nothing of the sort.
func TestOpenRelativeURLOfAnAbsoluteDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // absolute; the same path under the working directory does not exist
	abs := filepath.Join(dir, "test.db")
	rel := strings.TrimPrefix(abs, "/")
	raw := "sqlite:///" + rel
	if _, err := os.Stat(filepath.Dir(rel)); err == nil {
		t.Skipf("%s exists under the working directory", filepath.Dir(rel))
	}

	_, err := Open(ctx(t), raw, WithPasswordParams(cheapPasswords))
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("open %s: %v, want ErrInvalid", raw, err)
	}
	want := raw + " is the relative path " + rel + "; for " + abs + " write sqlite:///" + abs + " (four slashes)"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("open %s:\n  %v\nwant it to say\n  %s", raw, err, want)
	}
	// The parse rule is unchanged: nothing was created at the absolute path.
	if _, err := os.Stat(abs); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v", abs, err)
	}
	// Told to open an existing database only, it says the same.
	if _, err := Open(ctx(t), raw, MustExist()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("open %s (must exist): %v", raw, err)
	}

	// A relative path whose absolute twin does not exist either gets no hint.
	none := "sqlite:///" + strings.TrimPrefix(filepath.Join(dir, "no", "such", "test.db"), "/")
	if _, err := Open(ctx(t), none); !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "four slashes") {
		t.Fatalf("open %s: %v", none, err)
	}
	// Four slashes open the absolute path.
	db, err := Open(ctx(t), "sqlite:///"+abs, WithPasswordParams(cheapPasswords))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}
