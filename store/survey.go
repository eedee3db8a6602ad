package store

import (
	"context"
	"slices"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// KeySurvey is what SurveyKeys found in a Redis database: whether it holds anything besides
// plaita's own keys. plaita dev uses it before it writes anything to a Redis nobody told it to
// use (roles/dev.go): a Redis that answers on the default URL may be somebody else's.
type KeySurvey struct {
	// Keys is the database's size (DBSIZE, summed over the nodes).
	Keys int64 `json:"keys"`
	// Examined is how many keys the SCAN looked at.
	Examined int `json:"examined"`
	// Foreign are keys found outside plaita's key space (keys.IsOwnKey), at most
	// SurveyForeignMax; the survey stops at the last of them.
	Foreign []string `json:"foreign,omitempty"`
	// Complete: the SCAN went through every key (or there was none).
	Complete bool `json:"complete"`
}

// OnlyPlaita reports whether the survey found no key but plaita's: an empty database, or a
// SCAN (bounded: it may not have seen every key, Complete says) that found plaita's keys only.
func (s KeySurvey) OnlyPlaita() bool { return len(s.Foreign) == 0 }

// SurveyForeignMax is how many foreign keys a survey names before it stops looking.
const SurveyForeignMax = 2

// surveyBatch is the SCAN COUNT of one step of a survey.
const surveyBatch = 500

// SurveyKeys looks at the keys of c's database, read-only: DBSIZE, then a SCAN of at most
// budget keys (≤0: one batch) on every node, in a fixed order, until it has found
// SurveyForeignMax keys outside plaita's key space under root ("" = keys.DefaultRoot). It
// writes nothing. A Redis failure is ErrRedis (transient).
func SurveyKeys(ctx context.Context, c rueidis.Client, root string, budget int) (KeySurvey, error) {
	if budget <= 0 {
		budget = surveyBatch
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	nodes := c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var s KeySurvey
	for _, a := range addrs {
		n := nodes[a]
		size, err := n.Do(ctx, n.B().Dbsize().Build()).AsInt64()
		if err != nil {
			return s, transient(ErrRedis, "survey keys: DBSIZE of "+a, err)
		}
		s.Keys += size
	}
	if s.Keys == 0 {
		s.Complete = true
		return s, nil
	}
	for _, a := range addrs {
		n := nodes[a]
		var cursor uint64
		for {
			if len(s.Foreign) >= SurveyForeignMax || s.Examined >= budget {
				return s, nil
			}
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Count(int64(min(surveyBatch, budget-s.Examined))).Build()).AsScanEntry()
			if err != nil {
				return s, transient(ErrRedis, "survey keys: SCAN of "+a, err)
			}
			for _, k := range e.Elements {
				s.Examined++
				if !keys.IsOwnKey(root, k) && len(s.Foreign) < SurveyForeignMax {
					s.Foreign = append(s.Foreign, k)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	s.Complete = true
	return s, nil
}
