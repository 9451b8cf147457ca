#!/usr/bin/env bash
# Checks that two builds of candle-graph print the same analysis, byte for byte: `summary`,
# `memory` and `check`, each as text and with --json, on every trace given.
#
#   scripts/same-outputs.sh BASELINE_BINARY CHANGED_BINARY TRACE...
#
# Exit status 0 when every output is identical, 1 naming the first differences otherwise.
# (Issue 47: the analysis was made faster; every figure must stay exact.)
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 BASELINE_BINARY CHANGED_BINARY TRACE..." >&2
    exit 2
fi
base=$1
new=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for trace in "$@"; do
    for cmd in summary memory check; do
        for json in "" --json; do
            name="$(basename "$trace").$cmd${json:+.json}"
            # check exits 1 when it finds a problem: the output is compared all the same
            "$base" $cmd "$trace" $json >"$out/$name.base" 2>"$out/$name.base.err"
            b=$?
            "$new" $cmd "$trace" $json >"$out/$name.new" 2>"$out/$name.new.err"
            n=$?
            if [ $b -ne $n ]; then
                echo "DIFFERENT exit status: $cmd $json $trace ($b vs $n)"
                status=1
            elif ! cmp -s "$out/$name.base" "$out/$name.new"; then
                echo "DIFFERENT: $cmd $json $trace"
                diff "$out/$name.base" "$out/$name.new" | head -20
                status=1
            else
                echo "same: $cmd $json $trace ($(wc -c <"$out/$name.new") bytes, exit $n)"
            fi
        done
    done
done
exit $status
