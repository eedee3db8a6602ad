package store

import (
	"context"
	"strings"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// LiveEvents publishes an execution's live events on its pub/sub channel
// (<prefix>execution_events:{<id>}) for the console's live view. Best effort: a lost message
// only thins a live view; the state is the record.
type LiveEvents struct {
	c    rueidis.Client
	root string
}

// NewLiveEvents returns the publisher over c under root ("" = keys.DefaultRoot).
func NewLiveEvents(c rueidis.Client, root string) *LiveEvents {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &LiveEvents{c: c, root: root}
}

// Publish sends one event (JSON) on the execution's channel.
func (l *LiveEvents) Publish(ctx context.Context, tenant, executionID string, msg []byte) error {
	sp, err := keys.For(l.root, tenant)
	if err != nil {
		return err
	}
	channel, err := sp.ExecutionEvents(executionID)
	if err != nil {
		return err
	}
	if err := l.c.Do(ctx, l.c.B().Publish().Channel(channel).Message(rueidis.BinaryString(msg)).Build()).Error(); err != nil {
		return transient(ErrRedis, "publish live event of "+executionID, err)
	}
	return nil
}

// Listened is the set of executions whose live-event channel has a subscriber now (every node
// of a cluster is asked: a subscription lives on the node it was made on). Publishing only to
// those spares a PUBLISH per event when nobody watches — the usual case.
func (l *LiveEvents) Listened(ctx context.Context) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	pattern := l.root + ":*execution_events:*"
	for addr, node := range l.c.Nodes() {
		chans, err := node.Do(ctx, node.B().PubsubChannels().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			return nil, transient(ErrRedis, "PUBSUB CHANNELS on "+addr, err)
		}
		for _, ch := range chans {
			if i := strings.LastIndexByte(ch, '{'); i >= 0 && strings.HasSuffix(ch, "}") {
				out[ch[i+1:len(ch)-1]] = struct{}{}
			}
		}
	}
	return out, nil
}
