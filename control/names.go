package control

import (
	"plaita/store"
	"plaita/store/keys"
)

// DefaultTenant is the tenant a request without one addresses.
const DefaultTenant = keys.DefaultTenant

// MaxEventDataBytes bounds the data of one published event.
const MaxEventDataBytes = store.MaxEventDataBytes

// ValidName checks an author-supplied name that becomes part of a key (an event type, a flow
// id, a flow version); kind names it in the error.
func ValidName(kind, name string) error { return keys.ValidName(kind, name) }

// ValidID checks an id that becomes part of a key: an execution, event or schedule id.
func ValidID(id string) error { return keys.ValidID(id) }

// ValidTenant checks a tenant slug ("" and "default" are the default tenant).
func ValidTenant(t string) error { return keys.ValidTenant(t) }
