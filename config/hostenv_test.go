package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoEnvironmentReadsOutsideConfig keeps the registry the one reader of the environment:
// product code outside config/ uses config keys or HostEnv. Test support (test/: the
// scenarios and their helpers; _test.go files) may read its own variables.
func TestNoEnvironmentReadsOutsideConfig(t *testing.T) {
	re := regexp.MustCompile(`os\.(Getenv|LookupEnv|Environ)\(`)
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || path == filepath.Join("..", "config") || path == filepath.Join("..", "test")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := re.FindIndex(b); loc != nil {
			t.Errorf("%s reads the environment directly (line %d): use a config key or config.HostEnv", path, 1+strings.Count(string(b[:loc[0]]), "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHostEnvRefusesPlaitaVariables(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("HostEnv(PLAITA_…) must panic")
		}
	}()
	HostEnv("PLAITA_QUEUE_NAME")
}
