// Package keyring keeps plaita's secrets sealed at rest (docs/credentials.md): a master key —
// PLAITA_CREDENTIALS_KEY, or the file PLAITA_CREDENTIALS_KEY_FILE names — from which purpose
// subkeys are derived by HKDF-SHA256, and an envelope per secret: a fresh data key encrypts the
// value with AES-256-GCM, and the purpose subkey wraps the data key, also with AES-256-GCM. The
// caller's associated data (a tenant and a credential's name, say) is bound into both seals, so
// a sealed value moved to another tenant or name does not open. Rotating the master key re-wraps
// each data key (Rewrap) without touching the sealed values.
//
// The primitives are the standard library's (crypto/aes, crypto/cipher, crypto/hkdf,
// crypto/sha256): AES-GCM with random 96-bit nonces is safe for far more seals than a
// credential store makes, and the standard library's implementation is constant-time and
// audited with Go itself. tink-go's keysets were weighed and not taken: they bring a protobuf
// keyset format and a dependency tree for what these few lines do.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"plaita/model"
)

// KeySize is the master key's size: 32 bytes, written as url-safe base64 — the runbook's
// Fernet key format (`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key())"`
// makes one; so does `plaita credentials new-key`).
const KeySize = 32

// Errors. A wrong key is never a partial result: nothing is opened.
var (
	// ErrBadKey: the master key is not 32 bytes of url-safe base64.
	ErrBadKey = model.New(model.Invalid, "bad_credentials_key", "the credentials key is not a key")
	// ErrWrongKey: the sealed value was sealed under another master key, or with other
	// associated data, or was altered.
	ErrWrongKey = model.New(model.Conflict, "credentials_key_mismatch", "the sealed value does not open with this key")
	// ErrMalformed: the sealed value is not one this package wrote.
	ErrMalformed = model.New(model.Invalid, "sealed_value_malformed", "the sealed value is malformed")
)

// Key is a master key: its material and its id (a fingerprint that names it in every value it
// seals, so a value says which key it needs without revealing anything of it).
type Key struct {
	material []byte
	id       string
}

// ParseKey reads a master key written as url-safe base64 of 32 bytes (padding optional,
// surrounding space ignored). Any other text is ErrBadKey, which never quotes the text.
func ParseKey(text string) (Key, error) {
	s := strings.TrimRight(strings.TrimSpace(text), "=")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != KeySize {
		n := len(b)
		if err != nil {
			return Key{}, fmt.Errorf("%w: not url-safe base64 (%d characters)", ErrBadKey, len(s))
		}
		return Key{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, n, KeySize)
	}
	return newKey(b), nil
}

// NewKey makes a random master key.
func NewKey() Key {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return newKey(b)
}

func newKey(b []byte) Key {
	id, err := hkdf.Key(sha256.New, b, nil, "plaita key id", 6)
	if err != nil {
		panic(err) // only for a length above 255·32 bytes
	}
	return Key{material: b, id: "k" + hex.EncodeToString(id)}
}

// ID names the key in the values it seals ("k" and 12 hex digits).
func (k Key) ID() string { return k.id }

// String is the key as ParseKey reads it (padded url-safe base64): what a key file holds.
func (k Key) String() string { return base64.URLEncoding.EncodeToString(k.material) }

// Valid says whether k holds a key.
func (k Key) Valid() bool { return len(k.material) == KeySize }

// Subkey derives the key of one purpose ("credentials", "console-fields", "contract-keys" …)
// by HKDF-SHA256: each purpose's seals are apart from the others' even under one master key.
func (k Key) Subkey(purpose string) []byte {
	sub, err := hkdf.Key(sha256.New, k.material, nil, "plaita/"+purpose, KeySize)
	if err != nil {
		panic(err) // only for a length above 255·32 bytes
	}
	return sub
}

// sealedPrefix starts every value Seal writes: the format's version.
const sealedPrefix = "pk1"

// Seal seals value for purpose under k, with ad bound: pk1.<key id>.<wrapped data key>.<sealed
// value>, each part url-safe base64 without padding. Every call uses a new data key and new
// nonces: sealing the same value twice gives two different texts.
func (k Key) Seal(purpose string, ad, value []byte) (string, error) {
	if !k.Valid() {
		return "", ErrBadKey
	}
	dek := make([]byte, KeySize)
	_, _ = rand.Read(dek)
	data, err := sealWith(dek, value, ad)
	if err != nil {
		return "", err
	}
	wrapped, err := k.wrap(purpose, dek, ad)
	if err != nil {
		return "", err
	}
	return strings.Join([]string{sealedPrefix, k.id, wrapped, b64(data)}, "."), nil
}

// Open opens a value Seal wrote for purpose with ad: ErrWrongKey when k is not the key it names,
// or ad or the value differs from what was sealed; ErrMalformed when it is not such a value.
func (k Key) Open(purpose string, ad []byte, sealed string) ([]byte, error) {
	p, err := parse(sealed)
	if err != nil {
		return nil, err
	}
	if p.keyID != k.id {
		return nil, fmt.Errorf("%w: sealed under key %s, this key is %s", ErrWrongKey, p.keyID, k.id)
	}
	dek, err := openWith(k.Subkey(purpose), p.wrapped, wrapAD(k.id, ad))
	if err != nil {
		return nil, fmt.Errorf("%w: the data key does not open", ErrWrongKey)
	}
	value, err := openWith(dek, p.data, ad)
	if err != nil {
		return nil, fmt.Errorf("%w: the value does not open", ErrWrongKey)
	}
	return value, nil
}

// Ring is the master keys a process holds: Current seals, and every key of the ring opens what
// it sealed. A rotation puts the new key first and keeps the old one after it until every
// value is rewrapped (RewrapTo), then drops it.
type Ring struct {
	Current Key
	Older   []Key
}

// ParseRing reads keys as ParseKey does, one per line or separated by commas; the first is the
// current one. Blank lines and lines starting with # are skipped. No key, or any bad one, is
// ErrBadKey (nothing is half-read).
func ParseRing(text string) (Ring, error) {
	var r Ring
	n := 0
	for _, line := range strings.Split(strings.ReplaceAll(text, ",", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKey(line)
		if err != nil {
			return Ring{}, fmt.Errorf("key %d: %w", n+1, err)
		}
		if n == 0 {
			r.Current = k
		} else {
			r.Older = append(r.Older, k)
		}
		n++
	}
	if n == 0 {
		return Ring{}, fmt.Errorf("%w: no key", ErrBadKey)
	}
	return r, nil
}

// Key is the ring's key of id.
func (r Ring) Key(id string) (Key, bool) {
	if r.Current.id == id && r.Current.Valid() {
		return r.Current, true
	}
	for _, k := range r.Older {
		if k.id == id {
			return k, true
		}
	}
	return Key{}, false
}

// IDs are the ring's key ids, the current one first.
func (r Ring) IDs() []string {
	out := []string{r.Current.id}
	for _, k := range r.Older {
		out = append(out, k.id)
	}
	return out
}

// Open opens a sealed value with the ring's key it names; ErrWrongKey when the ring has none.
func (r Ring) Open(purpose string, ad []byte, sealed string) ([]byte, error) {
	id, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	k, ok := r.Key(id)
	if !ok {
		return nil, fmt.Errorf("%w: sealed under key %s, which this process does not hold (it holds %s)", ErrWrongKey, id, strings.Join(r.IDs(), ", "))
	}
	return k.Open(purpose, ad, sealed)
}

// RewrapTo moves a sealed value to the current key (changed false: it is there already).
func (r Ring) RewrapTo(purpose string, ad []byte, sealed string) (string, bool, error) {
	id, err := KeyID(sealed)
	if err != nil {
		return "", false, err
	}
	if id == r.Current.id {
		return sealed, false, nil
	}
	old, ok := r.Key(id)
	if !ok {
		return "", false, fmt.Errorf("%w: sealed under key %s, which this process does not hold (it holds %s)", ErrWrongKey, id, strings.Join(r.IDs(), ", "))
	}
	out, err := Rewrap(old, r.Current, purpose, ad, sealed)
	return out, err == nil, err
}

// KeyID is the id of the key a sealed value needs.
func KeyID(sealed string) (string, error) {
	p, err := parse(sealed)
	return p.keyID, err
}

// Rewrap moves a sealed value from the key old to the key to: its data key is opened with old
// and wrapped again with to; the sealed value itself is not decrypted. A value already under to
// is returned as it is.
func Rewrap(old, to Key, purpose string, ad []byte, sealed string) (string, error) {
	p, err := parse(sealed)
	if err != nil {
		return "", err
	}
	if p.keyID == to.id {
		return sealed, nil
	}
	if p.keyID != old.id {
		return "", fmt.Errorf("%w: sealed under key %s, neither %s nor %s", ErrWrongKey, p.keyID, old.id, to.id)
	}
	dek, err := openWith(old.Subkey(purpose), p.wrapped, wrapAD(old.id, ad))
	if err != nil {
		return "", fmt.Errorf("%w: the data key does not open", ErrWrongKey)
	}
	// The value must open with this data key and ad: a rewrap never blesses a broken value.
	if _, err := openWith(dek, p.data, ad); err != nil {
		return "", fmt.Errorf("%w: the value does not open", ErrWrongKey)
	}
	wrapped, err := to.wrap(purpose, dek, ad)
	if err != nil {
		return "", err
	}
	return strings.Join([]string{sealedPrefix, to.id, wrapped, b64(p.data)}, "."), nil
}

// wrap seals a data key under the purpose subkey, bound to the key id and ad.
func (k Key) wrap(purpose string, dek, ad []byte) (string, error) {
	w, err := sealWith(k.Subkey(purpose), dek, wrapAD(k.id, ad))
	if err != nil {
		return "", err
	}
	return b64(w), nil
}

// wrapAD binds a wrapped data key to its master key's id and the value's associated data.
func wrapAD(keyID string, ad []byte) []byte {
	return append([]byte(keyID+"\x00"), ad...)
}

type parsed struct {
	keyID         string
	wrapped, data []byte
}

func parse(sealed string) (parsed, error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 4 || parts[0] != sealedPrefix || len(parts[1]) != 13 || parts[1][0] != 'k' {
		return parsed{}, fmt.Errorf("%w: not a %s value", ErrMalformed, sealedPrefix)
	}
	if _, err := hex.DecodeString(parts[1][1:]); err != nil {
		return parsed{}, fmt.Errorf("%w: key id", ErrMalformed)
	}
	wrapped, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(wrapped) != nonceSize+KeySize+tagSize {
		return parsed{}, fmt.Errorf("%w: data key", ErrMalformed)
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil || len(data) < nonceSize+tagSize {
		return parsed{}, fmt.Errorf("%w: value", ErrMalformed)
	}
	return parsed{keyID: parts[1], wrapped: wrapped, data: data}, nil
}

const (
	nonceSize = 12
	tagSize   = 16
)

// sealWith is AES-256-GCM: a random nonce, then the ciphertext with its tag.
func sealWith(key, value, ad []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, nonceSize, nonceSize+len(value)+tagSize)
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, value, ad), nil
}

func openWith(key, sealed, ad []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < nonceSize+tagSize {
		return nil, ErrMalformed
	}
	return aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], ad)
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return cipher.NewGCM(block)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
