#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each.
# Usage: scripts/fuzz.sh [duration]   (default 20s)
set -euo pipefail
dur=${1:-20s}
cd "$(dirname "$0")/.."
found=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
    found=$((found+1))
    echo "fuzz: $pkg $target for $dur"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$dur" "$pkg"
  done
done
echo "fuzz: $found targets"
