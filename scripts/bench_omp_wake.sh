#!/usr/bin/env bash
# What one OpenMP parallel region costs under each libgomp wait setting, quiet and with every core busy.
#
# usage: scripts/bench_omp_wake.sh [--load none|busy|both] [--rounds R] [--threads T] [--build DIR]
#                                  [--variants LIST] [--gap-us G,G] [--work N,N] [--iters I]
#
# Runs tests/bench/bench_omp_wake once per variant per round, variants alternating within each round so
# that other load on the machine hits them alike, and prints per (variant, gap, work) the median over
# rounds of the net cost of one parallel region against doing the same work serially (microseconds;
# positive = the threads lose). A variant is PASSIVE, ACTIVE, unset (libgomp's default: spin ~300000
# pause iterations, then sleep) or a number = GOMP_SPINCOUNT with OMP_WAIT_POLICY unset (spin that many
# iterations, then sleep). --load busy runs a busy loop on every core (nproc) meanwhile; both (the
# default) prints the quiet table, then the busy one.
# Build first: cmake --build build --target bench_omp_wake
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
load=both rounds=3 threads=2 build="$root/build" variants="PASSIVE,300,1000,3000,10000,ACTIVE,unset"
gaps=2,20,200 works=0,4096,16384,65536,262144 iters=300
while [[ $# -gt 0 ]]; do
  case "$1" in
    --load) load="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --variants) variants="$2"; shift 2 ;;
    --gap-us) gaps="$2"; shift 2 ;;
    --work) works="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    *) echo "bench_omp_wake: unknown argument $1" >&2; exit 1 ;;
  esac
done
case "$load" in none|busy|both) ;; *) echo "bench_omp_wake: --load must be none, busy or both, got '$load'" >&2; exit 1 ;; esac
bench="$build/tests/bench/bench_omp_wake"
[[ -x "$bench" ]] || cmake --build "$build" -j2 --target bench_omp_wake >/dev/null
tmp="$(mktemp -d)"
busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT
IFS=, read -ra vlist <<< "$variants"

table() {  # $1 = none|busy
  : > "$tmp/all.jsonl"
  for ((r = 0; r < rounds; r++)); do
    for v in "${vlist[@]}"; do
      case "$v" in
        PASSIVE|ACTIVE) e=(env -u GOMP_SPINCOUNT "OMP_WAIT_POLICY=$v") ;;
        unset) e=(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY) ;;
        *) e=(env -u OMP_WAIT_POLICY "GOMP_SPINCOUNT=$v") ;;
      esac
      "${e[@]}" "$bench" --threads "$threads" --gap-us "$gaps" --work "$works" --iters "$iters" --batches 3 |
        sed "s/^{/{\"variant\": \"$v\", /" >> "$tmp/all.jsonl"
    done
  done
  echo "# load=$1 $(uptime | sed 's/.*load average/load average/'), net us per region (median of $rounds rounds), threads=$threads"
  /usr/bin/python3 - "$tmp/all.jsonl" "$variants" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
variants = sys.argv[2].split(",")
keys = sorted({(r["gap_us"], r["work"]) for r in rows})
print("%-8s %8s  " % ("gap_us", "work") + " ".join("%9s" % v for v in variants) + "   serial_us")
for g, w in keys:
    cells, ser = [], []
    for v in variants:
        xs = [r["net_us"] for r in rows if r["variant"] == v and (r["gap_us"], r["work"]) == (g, w)]
        ser += [r["serial_us"] for r in rows if r["variant"] == v and (r["gap_us"], r["work"]) == (g, w)]
        cells.append("%9.1f" % statistics.median(xs) if xs else "%9s" % "-")
    print("%-8d %8d  " % (g, w) + " ".join(cells) + "   %9.1f" % statistics.median(ser))
EOF
}
echo "# $(date -u +%FT%TZ) $(nproc) cores"
if [[ $load != busy ]]; then table none; fi
if [[ $load != none ]]; then
  for ((c = 0; c < $(nproc); c++)); do (while :; do :; done) & busy+=($!); done
  table busy
  stop_busy
fi
