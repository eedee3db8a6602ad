package keyring

import "strings"

// Fields seals stored fields under one purpose, each bound to its row (the associated data the
// store gives): sqlite.FieldCipher for the console database's execution states. A sealed field
// is the text Seal writes (pk1.…); a field without that prefix was written before the cipher
// and is read as it is.
type Fields struct {
	Keys    func() (Ring, error)
	Purpose string
}

// Seal seals plain under the ring's current key.
func (f Fields) Seal(ad string, plain []byte) ([]byte, error) {
	r, err := f.Keys()
	if err != nil {
		return nil, err
	}
	s, err := r.Current.Seal(f.Purpose, []byte(ad), plain)
	return []byte(s), err
}

// Open opens a sealed field with the ring's key it names; an unsealed one is returned as it is.
func (f Fields) Open(ad string, stored []byte) ([]byte, error) {
	if !strings.HasPrefix(string(stored), sealedPrefix+".") {
		return stored, nil
	}
	r, err := f.Keys()
	if err != nil {
		return nil, err
	}
	return r.Open(f.Purpose, []byte(ad), string(stored))
}
