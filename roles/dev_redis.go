package roles

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/store"
	"plaita/store/keys"
)

// devSurveyBudget bounds the keys dev looks at in a Redis it was not told to use: enough to
// see a development Redis through, bounded for one that holds millions.
const devSurveyBudget = 10000

// devRedis is plaita dev's choice of a Redis, and why.
type devRedis struct {
	URL string
	// Told: the URL was given (--redis-url, PLAITA_REDIS_URL, REDIS_URL), not defaulted.
	Told bool
	// Answered: a Redis answered at URL (Err: why not).
	Answered bool
	Err      error
	// Survey is what the Redis holds, looked at (read-only) when dev was not told to use it.
	Survey store.KeySurvey
	// Use: dev runs every role on it; otherwise the console in local mode.
	Use bool
}

// chooseDevRedis decides where plaita dev runs. A Redis is used when it answers and dev was
// told to use it, or, at the default URL, when it holds nothing but plaita's keys (an empty
// database, or a bounded SCAN that finds only keys of plaita's key space, keys.IsOwnKey): dev
// seeds what it runs on, and must not write tenants, an admin, flow versions and a consumer
// group into somebody else's Redis because it answers on localhost. Looking at the keys writes
// nothing.
func chooseDevRedis(ctx context.Context, url string, told bool, connect func(string) (rueidis.Client, error)) devRedis {
	d := devRedis{URL: url, Told: told}
	c, err := connect(url)
	if err != nil {
		d.Err = err
		return d
	}
	defer c.Close()
	d.Answered = true
	if told {
		d.Use = true
		return d
	}
	if d.Survey, d.Err = store.SurveyKeys(ctx, c, keys.DefaultRoot, devSurveyBudget); d.Err != nil {
		return d // it answered and then failed: not a Redis to build a demo on
	}
	d.Use = d.Survey.OnlyPlaita()
	return d
}

// where says, for the first line of dev, where it runs and why; for a Redis it left alone, what
// it holds and how to choose (program: how the commands invoke plaita).
func (d devRedis) where(program string) string {
	masked := config.MaskURL(d.URL)
	switch {
	case d.Use && d.Told:
		return "every role runs in this process on the Redis at " + masked + " (given)"
	case d.Use:
		return "every role runs in this process on the Redis at " + masked + " (the default URL; it holds plaita's keys only)"
	case !d.Answered:
		return "executions run in this process on the console database (local mode): no Redis answers at PLAITA_REDIS_URL (" + masked + ")"
	case d.Err != nil:
		return fmt.Sprintf("executions run in this process on the console database (local mode): the Redis at %s answered, then failed (%v); "+
			"plaita dev did not touch it", masked, d.Err)
	}
	quoted := make([]string, len(d.Survey.Foreign))
	for i, k := range d.Survey.Foreign {
		quoted[i] = strconv.Quote(shorten(k, 60))
	}
	return fmt.Sprintf("executions run in this process on the console database (local mode): a Redis answers at %s but holds keys that are "+
		"not plaita's (%s among its %d keys), so plaita dev did not touch it — to run on it all the same: `%s dev --redis-url %s`; "+
		"to keep plaita apart in another database of it: `%s dev --redis-url %s`; to stay in local mode: nothing",
		masked, strings.Join(quoted, ", "), d.Survey.Keys, program, masked, program, config.MaskURL(otherDatabase(d.URL)))
}

// why is what the console reports on /health as the reason for local mode.
func (d devRedis) why() string {
	if d.Answered {
		return "plaita dev runs local mode: the Redis at " + config.MaskURL(d.URL) + " holds keys that are not plaita's (--redis-url uses it)"
	}
	return "plaita dev found no Redis answering at PLAITA_REDIS_URL (" + config.MaskURL(d.URL) + ")"
}

// otherDatabase is url with the next database number (redis://h:6379/0 → redis://h:6379/1).
func otherDatabase(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	n, _ := strconv.Atoi(strings.Trim(u.Path, "/"))
	u.Path = "/" + strconv.Itoa((n+1)%16)
	return u.String()
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
