package model

import "fmt"

// ValidCredentialName checks a credential's name, the one rule of the store that keeps
// credentials and the nodes that name them: 1–128 letters, digits and _ . -, starting with a
// letter (a name is written in flow definitions).
func ValidCredentialName(name string) error {
	ok := len(name) > 0 && len(name) <= 128 && (name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
	for i := 0; ok && i < len(name); i++ {
		b := name[i]
		ok = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
	}
	if !ok {
		return fmt.Errorf("credential name %q: 1–128 letters, digits and _ . -, starting with a letter", name)
	}
	return nil
}
