#!/usr/bin/env bash
# Every GPU check in one command, one JSON file (docs/performance.md, "The GPU check").
#
#   bench/gpu_check.sh [--device cuda|cpu] [--quick] [--out FILE] [--data DIR] [--budget S]
#
# Parts, each a process of its own with its own time limit (a part that fails or runs out of
# time is recorded with the tail of its output, and the next part runs):
#   bench              p2pfl bench: mlp-100, mlp-1000, cnn, resnet18_gn in fp32 and bf16,
#                      vectorized against the per-node loop
#   stacked            python -m bench.stacked: 8 seeds stacked against one after another
#   compile            p2pfl bench --compile: mlp-100 with engine.compile (torch.compile)
#   gloo               p2pfl bench --nproc 1,2: mlp-100 on 2 local ranks (gloo) against one
#   scaling-linear     python -m bench.scaling: logreg, N = 1,000 .. 100,000
#   scaling-consensus  python -m bench.scaling: Push-Sum of d = 1,000, N = 1,000 .. 100,000
# then python -m bench.gpu_report merges them into FILE (default gpu_check.json) with the
# targets and exits 1 when a part did not succeed. --quick: tiny sizes of every part, two at a
# time (under a minute on 2 CPU cores with --device cpu; tests/test_gpu_check.py runs it). --data DIR: where
# Fashion-MNIST is ($P2PFL_DATA). --budget S: all parts together stop within S seconds (default
# 460: the check fits 8 minutes). The Python is ${PYTHON:-python}.
set -euo pipefail

usage="usage: bench/gpu_check.sh [--device cuda|cpu] [--quick] [--out FILE] [--data DIR] [--budget S]"
device=cuda
quick=0
out=gpu_check.json
budget=460
value() {  # value OPTION [VALUE]: OPTION must have one
    if (($# < 2)); then echo "gpu_check.sh: error: $1 needs a value; $usage" >&2; exit 2; fi
}
while (($#)); do
    case "$1" in
        --device) value "$@"; device=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --out) value "$@"; out=$2; shift 2 ;;
        --data) value "$@"; export P2PFL_DATA=$2; shift 2 ;;
        --budget) value "$@"; budget=$2; shift 2 ;;
        -h|--help) echo "$usage"; exit 0 ;;
        *) echo "gpu_check.sh: error: unknown argument '$1'; $usage" >&2; exit 2 ;;
    esac
done
if [[ "$device" != cuda && "$device" != cpu ]]; then
    echo "gpu_check.sh: error: --device must be cuda or cpu, got '$device'" >&2; exit 2
fi
if [[ ! "$budget" =~ ^[0-9]+$ ]] || ((budget < 1)); then
    echo "gpu_check.sh: error: --budget must be a whole number of seconds >= 1, got '$budget'" >&2
    exit 2
fi
if [[ -z "$out" ]]; then
    echo "gpu_check.sh: error: --out needs a file name" >&2; exit 2
fi
out=$(realpath -m -- "$out")

PY=${PYTHON:-python}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
deadline=$((SECONDS + budget))

# part NAME LIMIT_S COMMAND...: run it under `timeout` (the smaller of LIMIT_S and the time
# left), its output in NAME.log; NAME.cmd, NAME.limit, NAME.rc, NAME.wall for bench.gpu_report.
# A part that would get under 5 s is not started (gpu_report: "not run").
part() {
    local name=$1 limit=$2 left start rc
    shift 2
    printf '%s\n' "$*" > "$work/$name.cmd"
    left=$((deadline - SECONDS))
    ((left < limit)) && limit=$left
    if ((limit < 5)); then
        echo "== $name: not run (the time budget of $budget s is spent)"
        return 0
    fi
    echo "$limit" > "$work/$name.limit"
    echo "== $name (at most $limit s): $*"
    start=$(date +%s.%N)
    if timeout --kill-after=10 "$limit" "$@" > "$work/$name.log" 2>&1; then rc=0; else rc=$?; fi
    echo "$rc" > "$work/$name.rc"
    echo "$start $(date +%s.%N)" | awk '{printf "%.3f\n", $2 - $1}' > "$work/$name.wall"
    echo "   exit $rc after $(cat "$work/$name.wall") s"
}

bench=("$PY" -m p2pfl bench --device "$device")
if ((quick)); then  # two lanes at a time: a smoke test, its timings mean nothing
    {
        part bench 120 "${bench[@]}" --quick --only mlp-10 --precision fp32,bf16 --rounds 1 \
            --json-out "$work/bench.json"
        part compile 120 "${bench[@]}" --quick --only mlp-10 --precision fp32 --rounds 1 \
            --compile --json-out "$work/compile.json"
        part scaling-linear 60 "$PY" -m bench.scaling --device "$device" --quick --linear 100 \
            --consensus "" --rounds 1 --json-out "$work/scaling-linear.json"
    } &
    lane=$!
    part stacked 60 "$PY" -m bench.stacked --device "$device" --seeds 2 --rounds 1 \
        --json-out "$work/stacked.json"
    part gloo 60 "$PY" -m p2pfl bench --quick --nproc 2 --only mlp-10 --rounds 1 \
        --json-out "$work/gloo.json"
    part scaling-consensus 60 "$PY" -m bench.scaling --device "$device" --quick --linear "" \
        --consensus 100 --rounds 1 --json-out "$work/scaling-consensus.json"
    wait "$lane" || true
else
    part bench 150 "${bench[@]}" --only mlp-100,mlp-1000,cnn,resnet18_gn --precision fp32,bf16 \
        --rounds 2 --json-out "$work/bench.json"
    part stacked 60 "$PY" -m bench.stacked --device "$device" --json-out "$work/stacked.json"
    part compile 80 "${bench[@]}" --only mlp-100 --precision fp32,bf16 --rounds 2 --compile \
        --json-out "$work/compile.json"
    part gloo 35 "$PY" -m p2pfl bench --nproc 1,2 --only mlp-100 --rounds 3 \
        --json-out "$work/gloo.json"
    part scaling-linear 90 "$PY" -m bench.scaling --device "$device" \
        --linear 1000,10000,100000 --consensus "" --json-out "$work/scaling-linear.json"
    part scaling-consensus 45 "$PY" -m bench.scaling --device "$device" --linear "" \
        --consensus 1000,10000,100000 --json-out "$work/scaling-consensus.json"
fi

report=("$PY" -m bench.gpu_report --dir "$work" --out "$out" --device "$device" --budget "$budget")
((quick)) && report+=(--quick)
"${report[@]}"
