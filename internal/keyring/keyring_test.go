package keyring

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSealOpensOnlyWithItsKeyPurposeAndData(t *testing.T) {
	k := NewKey()
	ad := []byte("acme\x00github_token")
	sealed, err := k.Seal("credentials", ad, []byte("ghp_secret"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "ghp_secret") || strings.Contains(sealed, base64.StdEncoding.EncodeToString([]byte("ghp_secret"))) {
		t.Fatalf("the sealed text shows the value: %s", sealed)
	}
	if again, _ := k.Seal("credentials", ad, []byte("ghp_secret")); again == sealed {
		t.Fatal("two seals of one value are the same text")
	}
	got, err := k.Open("credentials", ad, sealed)
	if err != nil || string(got) != "ghp_secret" {
		t.Fatalf("open: %q %v", got, err)
	}
	if id, err := KeyID(sealed); err != nil || id != k.ID() {
		t.Fatalf("key id %q %v, want %s", id, err, k.ID())
	}
	for what, open := range map[string]func() ([]byte, error){
		"another key":     func() ([]byte, error) { return NewKey().Open("credentials", ad, sealed) },
		"another purpose": func() ([]byte, error) { return k.Open("console-fields", ad, sealed) },
		"another tenant":  func() ([]byte, error) { return k.Open("credentials", []byte("other\x00github_token"), sealed) },
		"another name":    func() ([]byte, error) { return k.Open("credentials", []byte("acme\x00gitlab_token"), sealed) },
	} {
		if v, err := open(); !errors.Is(err, ErrWrongKey) || v != nil {
			t.Errorf("%s: %q %v, want ErrWrongKey and nothing", what, v, err)
		}
	}
	// One byte changed anywhere in the value or the wrapped key: nothing opens.
	parts := strings.Split(sealed, ".")
	for _, i := range []int{2, 3} {
		raw, _ := base64.RawURLEncoding.DecodeString(parts[i])
		raw[len(raw)/2] ^= 1
		altered := append([]string{}, parts...)
		altered[i] = base64.RawURLEncoding.EncodeToString(raw)
		if v, err := k.Open("credentials", ad, strings.Join(altered, ".")); !errors.Is(err, ErrWrongKey) || v != nil {
			t.Errorf("part %d altered: %q %v", i, v, err)
		}
	}
	for _, bad := range []string{"", "pk1", "pk0.k000000000000.a.b", "pk1.k00.a.b", "pk1.kzzzzzzzzzzzz.a.b", sealed + ".x"} {
		if _, err := k.Open("credentials", ad, bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", bad, err)
		}
	}
}

func TestRewrapMovesTheDataKeyOnly(t *testing.T) {
	old, next := NewKey(), NewKey()
	ad := []byte("default\x00api")
	sealed, err := old.Seal("credentials", ad, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := Rewrap(old, next, "credentials", ad, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := KeyID(moved); id != next.ID() {
		t.Fatalf("rewrapped under %s, want %s", id, next.ID())
	}
	if strings.Split(moved, ".")[3] != strings.Split(sealed, ".")[3] {
		t.Fatal("the rewrap re-encrypted the value")
	}
	if v, err := next.Open("credentials", ad, moved); err != nil || string(v) != "v" {
		t.Fatalf("open after the rewrap: %q %v", v, err)
	}
	if _, err := old.Open("credentials", ad, moved); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("the old key still opens the rewrapped value: %v", err)
	}
	if again, err := Rewrap(old, next, "credentials", ad, moved); err != nil || again != moved {
		t.Fatalf("a second rewrap: %v", err)
	}
	if _, err := Rewrap(NewKey(), next, "credentials", ad, sealed); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("a rewrap from a key that is not the value's: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	k := NewKey()
	for _, text := range []string{k.String(), " " + k.String() + "\n", strings.TrimRight(k.String(), "=")} {
		got, err := ParseKey(text)
		if err != nil || got.ID() != k.ID() || !bytes.Equal(got.material, k.material) {
			t.Errorf("%q: %v", text, err)
		}
	}
	// A Fernet key from Python's cryptography package is one (url-safe base64 of 32 bytes).
	if _, err := ParseKey("cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="); err != nil {
		t.Fatalf("a Fernet key: %v", err)
	}
	for _, bad := range []string{"", "short", base64.URLEncoding.EncodeToString(make([]byte, 16)), "not base64 at all !!!!!!!!!!!!!!!!!!!!!!!!!"} {
		_, err := ParseKey(bad)
		if !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: %v, want ErrBadKey", bad, err)
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("the error quotes the key text: %v", err)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials.key")
	if _, _, err := LoadFile(path, false); !errors.Is(err, ErrNoKeyFile) {
		t.Fatalf("a missing file without create: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a load without create made the file")
	}
	// Two consoles at once: one key, made once.
	var wg sync.WaitGroup
	keys := make([]Ring, 8)
	created := make([]bool, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, res, err := LoadFile(path, true)
			if err != nil {
				t.Error(err)
			}
			keys[i], created[i] = k, res.Created
		}()
	}
	wg.Wait()
	made := 0
	for i, k := range keys {
		if k.Current.ID() != keys[0].Current.ID() {
			t.Fatalf("two keys: %s and %s", keys[0].Current.ID(), k.Current.ID())
		}
		if created[i] {
			made++
		}
	}
	info, _ := os.Stat(path)
	if made != 1 || info.Mode().Perm() != 0o600 {
		t.Fatalf("created %d times, mode %v", made, info.Mode().Perm())
	}
	// A looser mode is tightened, and said.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	k, res, err := LoadFile(path, false)
	info, _ = os.Stat(path)
	if err != nil || k.Current.ID() != keys[0].Current.ID() || res.Tightened != 0o644 || info.Mode().Perm() != 0o600 {
		t.Fatalf("tighten: %+v %v, mode %v", res, err, info.Mode().Perm())
	}
	// An empty or bad file is a named error, and is left as it is.
	for _, content := range []string{"", "garbage\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadFile(path, true); !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: %v, want ErrBadKey", content, err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("the bad file was overwritten: %q", b)
		}
	}
}

func FuzzOpen(f *testing.F) {
	k := NewKey()
	sealed, _ := k.Seal("credentials", []byte("t"), []byte("v"))
	f.Add(sealed)
	f.Add("pk1.k000000000000..")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := k.Open("credentials", []byte("t"), s)
		if err == nil && s != sealed && string(v) != "v" {
			t.Fatalf("%q opened to %q", s, v)
		}
		if err != nil && v != nil {
			t.Fatalf("a failed open returned %q", v)
		}
	})
}

func FuzzParseKey(f *testing.F) {
	f.Add(NewKey().String())
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err == nil && !k.Valid() {
			t.Fatalf("%q parsed to an invalid key", s)
		}
		if err != nil && !errors.Is(err, ErrBadKey) {
			t.Fatalf("%q: %v is not ErrBadKey", s, err)
		}
	})
}

// A ring seals with its current key and opens with any of its keys; RewrapTo moves a value to
// the current key; a value of a key the ring lacks is ErrWrongKey naming the key.
func TestRing(t *testing.T) {
	old, next := NewKey(), NewKey()
	r, err := ParseRing("# rotation in progress\n" + next.String() + "\n\n" + old.String() + "\n")
	if err != nil || r.Current.ID() != next.ID() || len(r.Older) != 1 || r.Older[0].ID() != old.ID() {
		t.Fatalf("parse: %+v %v", r.IDs(), err)
	}
	if inline, err := ParseRing(next.String() + "," + old.String()); err != nil || len(inline.IDs()) != 2 {
		t.Fatalf("comma-separated: %v", err)
	}
	ad := []byte("t\x00n")
	sealed, _ := old.Seal("credentials", ad, []byte("v"))
	if v, err := r.Open("credentials", ad, sealed); err != nil || string(v) != "v" {
		t.Fatalf("open an older key's value: %q %v", v, err)
	}
	moved, changed, err := r.RewrapTo("credentials", ad, sealed)
	if err != nil || !changed {
		t.Fatalf("rewrap: %v %v", changed, err)
	}
	if id, _ := KeyID(moved); id != next.ID() {
		t.Fatalf("rewrapped under %s", id)
	}
	if _, changed, err := r.RewrapTo("credentials", ad, moved); err != nil || changed {
		t.Fatalf("a second rewrap: %v %v", changed, err)
	}
	stranger, _ := NewKey().Seal("credentials", ad, []byte("v"))
	if _, err := r.Open("credentials", ad, stranger); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), "does not hold") {
		t.Fatalf("a stranger's value: %v", err)
	}
	for _, bad := range []string{"", "# only a comment\n", next.String() + "\nnot-a-key"} {
		if _, err := ParseRing(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
