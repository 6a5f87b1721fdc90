#!/usr/bin/python3
"""Golden values for qtool's observers from torch.ao.quantization (Debian python3-torch 1.13).

Run with Debian's Python:  /usr/bin/python3 scripts/golden/gen_torch_observers.py
Writes tests/calib/data/torch_observers.json: the (small, seeded) input batches and what each
PyTorch observer answers after seeing them in order. tests/calib/golden_test.cc replays the same
batches through qtool's observers and compares.
"""
import json
import os

import numpy as np
import torch
from torch.ao.quantization.observer import (HistogramObserver, MinMaxObserver,
                                            MovingAverageMinMaxObserver,
                                            PerChannelMinMaxObserver)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "calib", "data", "torch_observers.json")


def f32_list(a):
    # float32 values written with 9 significant digits round-trip exactly.
    return [float("%.9g" % v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def batches_json(batches):
    return [{"shape": list(b.shape), "values": f32_list(b)} for b in batches]


def make_batches(rng, kind, n, shape):
    out = []
    for i in range(n):
        if kind == "normal":
            b = rng.normal(0.3, 1.7, size=shape)
        elif kind == "relu":
            b = np.maximum(rng.normal(0.5, 2.0, size=shape), 0.0)
        elif kind == "outliers":
            b = rng.normal(0.0, 0.4, size=shape)
            flat = b.reshape(-1)
            flat[rng.integers(0, flat.size, 3)] = rng.uniform(-9.0, 14.0, 3)
        elif kind == "growing":  # the range widens batch after batch: exercises upsample/combine
            b = rng.uniform(-0.2 * (i + 1), 0.9 * (i + 1) ** 1.5, size=shape)
        elif kind == "small":  # |x| < 1: torch 1.13 truncates histc's range to int -> (0, 0) -> data range
            b = rng.uniform(-0.6, 0.8, size=shape)
        elif kind == "wide":  # range crosses several integers: histc drops values outside [int(min), int(max)]
            b = rng.normal(1.0, 3.0, size=shape)
        else:
            raise ValueError(kind)
        out.append(b.astype(np.float32))
    return out


def run(observer, batches):
    for b in batches:
        observer(torch.from_numpy(b))
    return observer


def main():
    rng = np.random.default_rng(20261121)
    cases = []

    for kind in ["normal", "relu", "outliers"]:
        batches = make_batches(rng, kind, 4, (3, 17))
        mm = run(MinMaxObserver(), batches)
        cases.append({"observer": "minmax", "name": "minmax_" + kind, "batches": batches_json(batches),
                      "min": [float(mm.min_val)], "max": [float(mm.max_val)]})
        for c in [0.01, 0.25]:
            ma = run(MovingAverageMinMaxObserver(averaging_constant=c), batches)
            cases.append({"observer": "moving_average", "name": "moving_average_%s_%g" % (kind, c),
                          "averaging_constant": c, "batches": batches_json(batches),
                          "min": [float(ma.min_val)], "max": [float(ma.max_val)]})

    for axis, shape in [(1, (2, 3, 4, 5)), (0, (6, 7)), (3, (2, 2, 3, 4))]:
        batches = make_batches(rng, "normal", 3, shape)
        pc = run(PerChannelMinMaxObserver(ch_axis=axis), batches)
        cases.append({"observer": "per_channel_minmax", "name": "per_channel_axis%d" % axis, "axis": axis,
                      "batches": batches_json(batches), "min": f32_list(pc.min_val), "max": f32_list(pc.max_val)})

    for kind in ["normal", "relu", "outliers", "growing", "small", "wide"]:
        batches = make_batches(rng, kind, 5, (3, 100))
        h = run(HistogramObserver(bins=2048), batches)
        new_min, new_max = h._non_linear_param_search()
        scale, zp = h.calculate_qparams()
        cases.append({"observer": "torch_histogram", "name": "torch_histogram_" + kind,
                      "batches": batches_json(batches), "hist_min": float(h.min_val), "hist_max": float(h.max_val),
                      "histogram_nonzero": [[i, v] for i, v in enumerate(f32_list(h.histogram)) if v != 0.0], "min": [float(new_min)], "max": [float(new_max)],
                      "scale": float(scale[0]), "zero_point": int(zp[0])})

    doc = {"generator": "scripts/golden/gen_torch_observers.py", "torch": torch.__version__, "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print("wrote %s (%d cases)" % (OUT, len(cases)))


if __name__ == "__main__":
    main()
