package keyring

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"plaita/model"
)

// ErrNoKeyFile: the key file does not exist and this process may not create it (a worker: it
// fails closed — a key made up here would seal what nothing else can open).
var ErrNoKeyFile = model.New(model.Invalid, "credentials_key_file_missing", "the credentials key file does not exist")

// KeyFileMode is the mode a key file is created with, and the loosest one it is read with.
const KeyFileMode fs.FileMode = 0o600

// FileResult is what LoadFile did besides reading the key: it created the file, or it tightened
// a looser mode (each a WARNING for the caller to log).
type FileResult struct {
	Created   bool
	Tightened fs.FileMode // the mode it had, when it was looser than 0600 (0: it was not)
}

// LoadFile reads the master keys from path (ParseRing: the current one first, then the older
// ones a rotation still needs). When create is set (the console) and there is no file, a new
// key is written to it, mode 0600 from the start (createExclusive) — two consoles starting
// together make one key: the one that loses the race reads the winner's, whole. A
// file readable or writable by others is tightened to 0600 before it is read. An empty or
// malformed file is ErrBadKey, and it is not overwritten.
func LoadFile(path string, create bool) (Ring, FileResult, error) {
	var res FileResult
	if create {
		k := NewKey()
		created, err := createExclusive(path, k.String()+"\n")
		switch {
		case err != nil:
			return Ring{}, res, fmt.Errorf("credentials key file %s: create: %w", path, err)
		case created:
			res.Created = true
			return Ring{Current: k}, res, nil
		}
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Ring{}, res, fmt.Errorf("%w: %s", ErrNoKeyFile, path)
	case err != nil:
		return Ring{}, res, fmt.Errorf("credentials key file %s: %w", path, err)
	case !info.Mode().IsRegular():
		return Ring{}, res, fmt.Errorf("%w: %s is not a regular file", ErrBadKey, path)
	}
	if mode := info.Mode().Perm(); mode&^KeyFileMode != 0 {
		if err := os.Chmod(path, KeyFileMode); err != nil {
			return Ring{}, res, fmt.Errorf("credentials key file %s: tighten mode %v to 0600: %w", path, mode, err)
		}
		res.Tightened = mode
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Ring{}, res, fmt.Errorf("credentials key file %s: %w", path, err)
	}
	r, err := ParseRing(string(b))
	if err != nil {
		return Ring{}, res, fmt.Errorf("credentials key file %s: %w", path, err)
	}
	return r, res, nil
}

// createExclusive writes content to path unless path exists (created false), so that no reader
// ever sees the file half-written: the content goes to a temporary file of the same directory,
// created 0600 with O_EXCL, and is linked to path — a link that fails when path exists, which is
// the race two consoles starting together run.
func createExclusive(path, content string) (bool, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(KeyFileMode); err != nil {
		tmp.Close()
		return false, err
	}
	_, werr := tmp.WriteString(content)
	if err := tmp.Sync(); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return false, werr
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
