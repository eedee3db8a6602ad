package config

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
)

// TaskSchemaVersion is the task envelope schema this build writes and understands. It is part
// of config_family: workers of different schemas must not take each other's first deliveries.
const TaskSchemaVersion = 1

// Namespace is the key root of the default tenant.
const Namespace = "plaita"

// Generations are the three hashes that tell whether two processes agree on configuration
// (docs/configuration.md lists their inputs). They are deterministic: the same effective values give the same hashes
// on every machine, whatever the order variables were set in.
type Generations struct {
	Family string `json:"config_family"`     // hard compatibility: queue, group, DLQ, schema, namespace
	Config string `json:"config_generation"` // every semantics-affecting variable
	Budget string `json:"budget_generation"` // delivery budget: deliveries, lease, max age, DLQ length
}

// familyFields and budgetFields are the documented inputs of config_family and
// budget_generation; config_generation hashes every variable marked Semantic. Read-only.
var (
	familyFields = []string{"PLAITA_QUEUE_NAME", "PLAITA_CONSUMER_GROUP", "PLAITA_DLQ_KEY"}
	budgetFields = []string{"PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS", "PLAITA_TASK_MAX_AGE_SECONDS", "PLAITA_DLQ_MAX_LEN"}
)

// Generations returns the hashes computed at load time.
func (c *Config) Generations() Generations { return c.gens }

func (c *Config) generations() Generations {
	line := func(name string) string { return name + "=" + fmtValue(c.entries[name].value) }
	var family, budget, semantic []string
	for _, n := range familyFields {
		family = append(family, line(n))
	}
	family = append(family, "task_schema_version="+strconv.Itoa(TaskSchemaVersion), "namespace="+Namespace)
	for _, n := range budgetFields {
		budget = append(budget, line(n))
	}
	for _, e := range c.order {
		if e.v.Semantic {
			semantic = append(semantic, line(e.v.Name))
		}
	}
	sort.Strings(semantic)
	return Generations{
		Family: "cf1-" + digest(family),
		Config: "cfg1-" + digest(semantic),
		Budget: "bg1-" + digest(budget),
	}
}

// SemanticFields lists the inputs of config_generation, sorted.
func SemanticFields() []string {
	var out []string
	for _, v := range registry() {
		if v.Semantic {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

func digest(lines []string) string {
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])[:12]
}
