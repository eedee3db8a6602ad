package store

import "context"

// The notifications of published events, one channel per key root (events.go): Publish sends
// them with the index writes (EventsDriver.Index), Listen hears them (EventsDriver.Listen) —
// Redis pub/sub for the cluster, the process's Hub in local mode.

// Listen subscribes to the notification channel of the key root and calls fn for each
// notification (with the decoding error of a payload that is not one), until ctx ends or the
// subscription fails. onSubscribed runs on every (re)subscription, and whenever notifications
// may have been missed: the client subscribes again by itself after a lost connection, and
// what was published meanwhile reached nobody.
func (e *Events) Listen(ctx context.Context, onSubscribed func(), fn func(EventRef, error)) error {
	return e.d.Listen(ctx, e.platform().EventBusNotify(), onSubscribed, func(payload string) {
		fn(DecodeNotification(payload))
	})
}
