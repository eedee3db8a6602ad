package store

import (
	"context"

	"github.com/redis/rueidis"
)

// The notifications of published events, one pub/sub channel per key root (events.go).

// Listen subscribes to the notification channel of the key root and calls fn for each
// notification (with the decoding error of a payload that is not one), until ctx ends or the
// subscription fails. onSubscribed runs on every (re)subscription: the client subscribes again
// by itself after a lost connection, and what was published meanwhile reached nobody.
func (e *Events) Listen(ctx context.Context, onSubscribed func(), fn func(EventRef, error)) error {
	channel := e.platform().EventBusNotify()
	if onSubscribed != nil {
		ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == channel {
				onSubscribed()
			}
		})
	}
	err := e.c.Receive(ctx, e.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
		fn(DecodeNotification(m.Message))
	})
	if err != nil && ctx.Err() == nil {
		return transient(ErrRedis, "subscribe to "+channel, err)
	}
	return nil
}
