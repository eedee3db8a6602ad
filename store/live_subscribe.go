package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// LiveMessage is one message heard on a subscription: the JSON a worker published
// (roles/worker/events.go, LiveEvent).
type LiveMessage struct {
	Channel string
	Payload []byte
}

// SubscriptionBuffer is how many messages a subscription holds for a reader that is behind;
// beyond it messages are dropped (Lost says so) rather than held up: the messages come off a
// connection the reader must never stall.
const SubscriptionBuffer = 256

// LiveSubscription is one channel subscription on a connection of its own. C delivers its
// messages and is closed when the subscription ends: Close, the context given to Subscribe
// ending, or the connection failing (Err says why). It is for one reader.
//
// Why a connection of its own (rueidis Dedicate) and not the client's shared one: on a shared
// connection Receive does not unsubscribe when it returns, and an UNSUBSCRIBE of a channel ends
// every Receive of that channel on the connection — two live views of one execution would end
// each other, or the channel would stay subscribed for ever (and the worker would keep
// publishing to it). A dedicated connection is unsubscribed as a whole when it goes back to
// the pool, and a reader that falls behind holds up nothing but its own subscription. The
// price is one Redis connection per subscription, which the console bounds (web: the stream
// limit).
type LiveSubscription struct {
	C <-chan LiveMessage

	cancel context.CancelFunc
	done   chan struct{}
	lost   atomic.Bool
	err    error // set before done is closed
}

// SubscribeExecution subscribes to the live events of one execution of tenant.
func (l *LiveEvents) SubscribeExecution(ctx context.Context, tenant, executionID string) (*LiveSubscription, error) {
	sp, err := keys.For(l.root, tenant)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", executionID, err)
	}
	channel, err := sp.ExecutionEvents(executionID)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", executionID, err)
	}
	return l.e.Subscribe(ctx, channel)
}

// SubscribeStatus subscribes to the status changes of tenant's executions (the live list).
func (l *LiveEvents) SubscribeStatus(ctx context.Context, tenant string) (*LiveSubscription, error) {
	sp, err := keys.For(l.root, tenant)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the status of tenant %q: %w", tenant, err)
	}
	return l.e.Subscribe(ctx, sp.ExecutionStatus())
}

// subscribe returns once Redis has confirmed the subscription: a message published after
// that is heard (a reader that reads a state after Subscribe returns misses nothing between
// the two, as far as pub/sub delivers at all). The instances' control channels (control.go)
// are subscribed the same way.
func subscribe(ctx context.Context, c rueidis.Client, channel string) (*LiveSubscription, error) {
	sctx, cancel := context.WithCancel(ctx)
	msgs := make(chan LiveMessage, SubscriptionBuffer)
	s := &LiveSubscription{C: msgs, cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	var once sync.Once
	hooked := rueidis.WithOnSubscriptionHook(sctx, func(ps rueidis.PubSubSubscription) {
		if ps.Kind == "subscribe" && ps.Channel == channel {
			once.Do(func() { close(ready) })
		}
	})
	dc, release := c.Dedicate()
	go func() {
		defer close(s.done)
		defer close(msgs)
		defer release() // back to the pool, unsubscribed (rueidis cleans a dedicated connection's subscriptions)
		err := dc.Receive(hooked, dc.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			select {
			case msgs <- LiveMessage{Channel: m.Channel, Payload: []byte(m.Message)}:
			default:
				s.lost.Store(true)
			}
		})
		if err != nil && sctx.Err() == nil {
			s.err = transient(ErrRedis, "subscription to "+channel, err)
		}
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		cancel()
		if s.err == nil {
			s.err = transient(ErrRedis, "subscription to "+channel, errors.New("ended before it was confirmed"))
		}
		return nil, s.err
	case <-ctx.Done():
		cancel()
		<-s.done
		return nil, fmt.Errorf("subscribe to %s: %w", channel, ctx.Err())
	}
}

// Lost reports whether messages were dropped since the last call because the reader was behind
// (and clears it): the reader should re-read what the messages would have told it.
func (s *LiveSubscription) Lost() bool { return s.lost.Swap(false) }

// Done is closed when the subscription has ended and its connection is back in the pool.
func (s *LiveSubscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended by itself (the connection failed); nil while it runs and
// after Close.
func (s *LiveSubscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription and waits until its connection is back in the pool; safe twice.
func (s *LiveSubscription) Close() {
	s.cancel()
	<-s.done
}
