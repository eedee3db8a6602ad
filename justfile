# plaita developer tasks. `just --list` shows them.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Build the static binary into bin/plaita.
build:
    CGO_ENABLED=0 go build -trimpath -o bin/plaita .

# Install plaita into $(go env GOPATH)/bin (usually ~/go/bin: put it on PATH to type `plaita`).
install:
    CGO_ENABLED=0 go install -trimpath .
    @echo "installed $(go env GOPATH)/bin/plaita"

# Run the default tier: unit tests, contract suites and the in-process cluster's scenarios
# (Redis-backed suites use PLAITA_TEST_REDIS_URL, default redis://127.0.0.1:6379/15).
test:
    go test ./...

# Run the process-level tier: the binary under kill -9, drains, Redis restarts, dev, the browser.
e2e:
    go test -tags e2e -timeout 30m ./test/e2e

# Build the image and run the compose stack and the docker backend against a real daemon
# (deploy/local-docker.sh prepares one where no registry is reachable).
stack:
    go test -tags e2e -timeout 30m -v ./test/stack

# gofmt, go vet and staticcheck; fails on any finding.
lint:
    @out="$(gofmt -l .)"; if [ -n "$out" ]; then echo "gofmt would change:"; echo "$out"; exit 1; fi
    go vet ./...
    go vet -tags e2e ./...
    go vet -tags e2e,chaos,soak ./...
    go tool staticcheck ./...
    go tool staticcheck -tags e2e ./test/e2e ./test/stack

# Regenerate docs/configuration.md and config/keys_gen.go from the registry.
generate:
    go generate ./...

# Fuzz the configuration parsers, the flow parser, templates, the key space, ids, documents and the task decoder.
fuzz time="60s":
    go test ./config -run '^$' -fuzz FuzzParsers -fuzztime {{time}}
    go test ./config -run '^$' -fuzz FuzzMaskURL -fuzztime {{time}}
    go test ./engine -run '^$' -fuzz 'FuzzParse$' -fuzztime {{time}}
    go test ./engine -run '^$' -fuzz FuzzTemplate -fuzztime {{time}}
    go test ./store/keys -run '^$' -fuzz FuzzKeySpaceHasNoOverlap -fuzztime {{time}}
    go test ./queue -run '^$' -fuzz 'FuzzDecode$' -fuzztime {{time}}
    go test ./queue -run '^$' -fuzz FuzzPlainScalars -fuzztime {{time}}
    go test ./queue -run '^$' -fuzz FuzzParseDelayEntry -fuzztime {{time}}
    go test ./queue -run '^$' -fuzz FuzzParseWakeup -fuzztime {{time}}
    go test ./engine -run '^$' -fuzz FuzzNormalize -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzDecodeSchedule -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzParseCron -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzDecodeEvent -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzDecodeNotification -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzDecodeSubscription -fuzztime {{time}}
    go test ./engine/state -run '^$' -fuzz FuzzCheckDocument -fuzztime {{time}}
    go test ./engine/state -run '^$' -fuzz FuzzExactNumber -fuzztime {{time}}
    go test ./engine/state -run '^$' -fuzz FuzzAppendJSON -fuzztime {{time}}
    go test ./store -run '^$' -fuzz FuzzDecodeState -fuzztime {{time}}
    go test ./store/keys -run '^$' -fuzz FuzzValidID -fuzztime {{time}}
    go test ./store/sqlite -run '^$' -fuzz FuzzParsePasswordHash -fuzztime {{time}}
    go test ./store/sqlite -run '^$' -fuzz FuzzDecodeCursor -fuzztime {{time}}
    go test ./store/sqlite -run '^$' -fuzz FuzzParseURL -fuzztime {{time}}
    go test ./engine -run '^$' -fuzz FuzzCorrelationIndexNeverHidesAMatch -fuzztime {{time}}
    go test ./web/api -run '^$' -fuzz FuzzRequestBodies -fuzztime {{time}}

# The long chaos suite: real workers kill -9'd every few seconds, a Redis restart and a drain, over a
# few thousand executions (minutes; PLAITA_CHAOS_EXECUTIONS=n to change the size).
chaos:
    go test -tags e2e,chaos -run TestChaos -count=1 -v -timeout 30m ./test/e2e

# The soak suite: the chaos suite's flows at a steady rate for minutes with nothing failing; checks
# that every execution ends right, the backlog, goroutines and memory of every role stay flat and
# nothing of an execution stays in Redis for ever (PLAITA_SOAK_SECONDS, PLAITA_SOAK_RATE).
soak:
    go test -tags e2e,soak -run TestSoak -count=1 -v -timeout 30m ./test/e2e

# Executor throughput on a 100-node linear flow, with allocations.
bench:
    go test ./engine -run '^$' -bench . -benchmem

# plaita vs asynq on a private redis-server, in rounds (own module; minutes): `just bench-peers --n 20000`.
[positional-arguments]
bench-peers *args:
    cd bench/peers && go run . "$@"

# Every role in one process, for a laptop: on PLAITA_REDIS_URL, or in local mode (docs/dev.md).
dev *args:
    go run . dev {{args}}

# What CI runs, on this machine.
ci:
    bash .ci/run
