#!/usr/bin/env bash
# A/B of qtool builds on single Resize nodes (the figures of docs/interpreter.md "Resize equals ONNX Runtime bit for
# bit"): linear 2x up and down, cubic, nearest 2x, alternating the builds within each round as scripts/bench_ab.sh does
# for whole models (use that for ppocrv4-det).
#
# usage: scripts/bench_resize.sh [--rounds R] [--repeat N] [--threads T] LABEL=BINARY [LABEL=BINARY ...]
#   e.g. scripts/bench_resize.sh --threads 1 main=/work/main/build/bin/qtool mine=build/bin/qtool
# Prints per (case, LABEL) the median over rounds of `qtool run --repeat N` medians, the minimum, then the rounds.
set -euo pipefail
rounds=5 repeat=20 threads=1
while [[ $# -gt 0 && $1 == --* ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "bench_resize: unknown argument $1" >&2; exit 1 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "bench_resize: give at least one LABEL=BINARY" >&2; exit 1; }
dir="$(mktemp -d)" out="$(mktemp)"
trap 'rm -rf "$dir" "$out"' EXIT
/usr/bin/python3 - "$dir" <<'PY'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
# name: input shape, output sizes, attributes (opset 13, roi and scales empty)
CASES = {'linear_up2x': ([1, 32, 256, 256], [1, 32, 512, 512], dict(mode='linear')),
         'linear_down': ([1, 32, 512, 512], [1, 32, 300, 200], dict(mode='linear')),
         'cubic': ([1, 16, 128, 128], [1, 16, 256, 200], dict(mode='cubic')),
         'nearest_up2x': ([1, 32, 256, 256], [1, 32, 512, 512], dict(mode='nearest'))}
for name, (shape, sizes, attrs) in CASES.items():
    inits = [numpy_helper.from_array(np.array([], np.float32), 'roi'),
             numpy_helper.from_array(np.array([], np.float32), 'scales'),
             numpy_helper.from_array(np.array(sizes, np.int64), 'sizes')]
    g = helper.make_graph([helper.make_node('Resize', ['x', 'roi', 'scales', 'sizes'], ['y'], **attrs)], name,
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8)
    open(f'{sys.argv[1]}/{name}.onnx', 'wb').write(m.SerializeToString())
    np.save(f'{sys.argv[1]}/{name}.npy', np.random.RandomState(0).randn(*shape).astype(np.float32))
PY
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uptime | sed 's/.*load average/load average/'), threads=$threads," \
     "$rounds rounds of $repeat runs"
for ((r = 0; r < rounds; r++)); do
  for c in linear_up2x linear_down cubic nearest_up2x; do
    for spec in "$@"; do
      ms=$("${spec#*=}" run "$dir/$c.onnx" --input "x=$dir/$c.npy" --threads "$threads" --repeat "$repeat" --json |
             grep -o '"median_ms":[0-9.]*' | cut -d: -f2)
      echo "$c ${spec%%=*} $ms" >> "$out"
    done
  done
done
/usr/bin/python3 "$(dirname "$0")/bench/ab_summary.py" "$out" --width 14 --digits 2
