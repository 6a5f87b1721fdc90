#!/usr/bin/python3
"""Golden values from PyTorch (Debian's python3-torch 1.13) for tests/numerics: observer qparams
(MinMaxObserver / PerChannelMinMaxObserver calculate_qparams) and quantize_per_tensor / quantize_per_channel.

usage: /usr/bin/python3 scripts/golden/gen_torch_qparams.py > tests/numerics/golden/torch_qparams.json
Floats are written as Python floats of the exact float32 values (they round-trip through double).
"""
import json
import sys
import warnings

import numpy as np
import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

torch.manual_seed(0)
warnings.filterwarnings("ignore")
rng = np.random.default_rng(7)
out = {"torch_version": torch.__version__, "observers": [], "per_channel_observers": [], "quantize_per_tensor": [],
       "quantize_per_channel": []}

RANGES = [(-1.0, 1.0), (-0.3, 2.7), (0.0, 0.0), (1.5, 1.5), (-2.5, -2.5), (0.1, 6.0), (-6.0, -0.1), (-1e-9, 1e-9),
          (-123.456, 0.789), (-3e-38, 1e-38), (0.0, 1e-7), (-1000.0, 1000.0), (-0.0078125, 0.5)]
SCHEMES = {"affine": torch.per_tensor_affine, "symmetric": torch.per_tensor_symmetric}
DTYPES = {"uint8": torch.quint8, "int8": torch.qint8}

for lo, hi in RANGES:
    for dname, dtype in DTYPES.items():
        for sname, scheme in SCHEMES.items():
            for reduce_range in (False, True):
                if reduce_range and dname == "uint8" and sname == "symmetric":
                    continue  # torch: "Cannot reduce range for symmetric quantization for quint8"
                for custom in (None, (0, 15) if dname == "uint8" else (-8, 7)):
                    kw = dict(dtype=dtype, qscheme=scheme, reduce_range=reduce_range)
                    if custom:
                        if reduce_range:
                            continue
                        kw.update(quant_min=custom[0], quant_max=custom[1])
                    obs = MinMaxObserver(**kw)
                    obs(torch.tensor([lo, hi], dtype=torch.float32))
                    scale, zp = obs.calculate_qparams()
                    out["observers"].append({
                        "min": float(np.float32(lo)), "max": float(np.float32(hi)), "dtype": dname, "scheme": sname,
                        "reduce_range": reduce_range, "quant_min": obs.quant_min, "quant_max": obs.quant_max,
                        "custom_range": custom is not None, "scale": float(scale.item()), "zero_point": int(zp.item())})

# Per-channel observer over a [4, 6] tensor, axis 0.
x = torch.tensor(rng.normal(0, 2, (4, 6)).astype(np.float32))
x[2] = 0.0  # an all-zero channel
for dname, dtype in DTYPES.items():
    for sname, scheme in {"affine": torch.per_channel_affine, "symmetric": torch.per_channel_symmetric}.items():
        obs = PerChannelMinMaxObserver(ch_axis=0, dtype=dtype, qscheme=scheme)
        obs(x)
        scale, zp = obs.calculate_qparams()
        out["per_channel_observers"].append({
            "x": x.flatten().tolist(), "shape": list(x.shape), "axis": 0, "dtype": dname, "scheme": sname,
            "scale": scale.tolist(), "zero_point": zp.tolist()})


def values_with_ties(n, scale):
    k = rng.integers(-300, 300, n)
    v = np.where(rng.random(n) < 0.4, (k + 0.5) * scale, rng.normal(0, 100 * scale, n))
    return v.astype(np.float32)


for dname, dtype in DTYPES.items():
    for scale, zp in ((0.0625, 3 if dname == "int8" else 131), (0.0173, -7 if dname == "int8" else 90),
                      (1e-3, 0 if dname == "int8" else 128)):
        scale = float(np.float32(scale))
        v = values_with_ties(256, scale)
        q = torch.quantize_per_tensor(torch.tensor(v), scale, zp, dtype)
        out["quantize_per_tensor"].append({"dtype": dname, "scale": scale, "zero_point": zp, "x": v.tolist(),
                                           "q": q.int_repr().flatten().tolist()})
    scales = np.array([0.02, 0.0625, 0.011, 0.5], dtype=np.float32)
    zps = np.array([0, 5, -3, 1] if dname == "int8" else [128, 100, 3, 250])
    v = np.stack([values_with_ties(64, float(s)) for s in scales])
    q = torch.quantize_per_channel(torch.tensor(v), torch.tensor(scales.astype(np.float64)), torch.tensor(zps), 0,
                                   dtype)
    out["quantize_per_channel"].append({"dtype": dname, "axis": 0, "shape": list(v.shape),
                                        "scale": [float(s) for s in scales], "zero_point": zps.tolist(),
                                        "x": v.flatten().tolist(), "q": q.int_repr().flatten().tolist()})

json.dump(out, sys.stdout, indent=None, separators=(",", ":"))
sys.stdout.write("\n")
