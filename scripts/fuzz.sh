#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each.
# Usage: scripts/fuzz.sh [duration]   (default 20s)
#
# Each package's fuzz-instrumented test binary is built once (go test -c
# -fuzz) and run once per target, from the package's directory so that its
# testdata/fuzz corpus is found, with the cache directory go test itself
# would use. `go test -fuzz` per target links the binary again each time:
# about 3 s a target on a 2-core machine, a tenth of CI's budget over 53
# targets.
set -euo pipefail
dur=${1:-20s}
cd "$(dirname "$0")/.."
root=$PWD
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
cache=$(go env GOCACHE)/fuzz
found=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/' || true)
  [ -n "$targets" ] || continue
  bin="$bindir/$(echo "$pkg" | tr / _).test"
  echo "fuzz: building $pkg"
  go test -c -fuzz=. -o "$bin" "$pkg"
  for target in $targets; do
    found=$((found+1))
    for try in 1 2 3 4 5; do
      echo "fuzz: $pkg $target for $dur"
      out=$(mktemp)
      # -fuzzminimizetime: Go minimizes every input that adds coverage, for
      # up to 60 s by default; a large one (FuzzRestore's snapshots) used the
      # whole budget (3,460 execs in 20 s instead of ~700,000) and then ended
      # the run with a bare "context deadline exceeded". A failing input is
      # still written, minimized for 1 s at most (2 s let two new inputs of
      # FuzzQueryRequest fill a 4 s run, twice in a row on 2026-12-06).
      if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$dur" \
        -test.fuzzminimizetime=1s -test.fuzzcachedir="$cache/$pkg") 2>&1 | tee "$out"; then
        rm -f "$out"; break
      fi
      # Should Go's fuzzer still end a clean run with a bare "context
      # deadline exceeded" (no failing input written), run the target again,
      # up to five runs in all: it hit 1 and 2 of 55 targets in the two CI
      # runs of 2026-12-02, and 4 of 60 (one of them right at the end of a
      # run that found nothing new) on a quiet machine on 2026-12-06: at
      # that rate three in a row on some target fails about one CI run in
      # 50, five in a row about one in 10,000. Anything else is a real
      # failure.
      if [ "$try" != 5 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
        echo "fuzz: $target: the fuzzer's own deadline error with no failing input; running it once more"
        rm -f "$out"; continue
      fi
      rm -f "$out"; exit 1
    done
  done
done
cd "$root"
echo "fuzz: $found targets"
