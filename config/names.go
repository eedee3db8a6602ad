package config

import "strings"

// notConfiguration reports PLAITA_ names plaita uses that are not configuration of a role:
// the test harness's Redis and PostgreSQL (CI exports them), which must not show up as typos in
// every shell that runs the tests.
func notConfiguration(name string) bool {
	return name == "PLAITA_TEST_REDIS_URL" || name == "PLAITA_TEST_POSTGRES_URL"
}

// closestName returns the registered name an unknown one most likely misspells, or "" when
// none is close. Names are compared upper-cased and without the common PLAITA_ prefix (it
// would make every pair look alike); the distance allowed grows with the length — one edit
// for short names, up to three for long ones — so PLAITA_MAX_DELIVERY finds
// PLAITA_MAX_DELIVERIES while PLAITA_FOO finds nothing. Ties go to the earlier registry entry.
func closestName(name string, order []*entry) string {
	want := strings.TrimPrefix(strings.ToUpper(name), "PLAITA_")
	best, bestDist := "", -1
	for _, e := range order {
		cand := strings.TrimPrefix(e.v.Name, "PLAITA_")
		d := editDistance(want, cand)
		if d > min(3, max(1, max(len(want), len(cand))/4)) {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = e.v.Name, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two adjacent characters each cost one, the usual typing mistakes.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows suffice: a swap looks two rows back.
	prev2, prev, cur := make([]int, len(t)+1), make([]int, len(t)+1), make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
