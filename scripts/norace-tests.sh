#!/usr/bin/env bash
# Runs, without -race, every test that skips itself under -race by calling
# testrace.NotUnderRace(t) as the first line of its body (see
# internal/testrace): the second half of make unit, after `go test -race`.
# Fails if it finds none (the search broke) or if any of them did not pass.
# Usage: scripts/norace-tests.sh [go test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=() names=()
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  found=$(awk '
    /^func Test[A-Za-z0-9_]*\(t \*testing\.T\) \{$/ { name = $2; sub(/\(.*/, "", name); next }
    name != "" { if ($0 ~ /^\ttestrace\.NotUnderRace\(t\)$/) print name; name = "" }
  ' "$dir"/*_test.go 2>/dev/null || true)
  if [ -n "$found" ]; then
    pkgs+=("$pkg")
    for n in $found; do names+=("$n"); done
  fi
done
if [ ${#names[@]} -eq 0 ]; then
  echo "norace-tests: no test calls testrace.NotUnderRace(t); the search is broken" >&2
  exit 1
fi
pattern="^($(IFS='|'; echo "${names[*]}"))\$"
echo "norace-tests: ${#names[@]} tests in ${#pkgs[@]} packages without -race: ${names[*]}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -v "$@" -run "$pattern" "${pkgs[@]}" > "$out" 2>&1 || status=$?
grep -E '^(--- |ok |FAIL|panic)' "$out" || true
if [ "$status" != 0 ]; then
  tail -100 "$out"
  exit "$status"
fi
for n in "${names[@]}"; do
  if ! grep -qE "^--- PASS: ${n} " "$out"; then
    echo "norace-tests: $n did not pass (skipped, or not run)" >&2
    exit 1
  fi
done
