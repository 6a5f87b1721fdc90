#!/usr/bin/python3
"""Writes the seed corpora of the libFuzzer targets (fuzz/*.cc) under OUT/<target>/ (not committed: they are
generated from files in the repo and in the shared folder). Deterministic.

usage: /usr/bin/python3 fuzz/make_seeds.py OUT [--shared DIR] [--calib-table FILE ...]

  model        models/*.onnx and the small shared models, shrunk: every initializer of more than 16 values is
               cut to its first 16 (dims [16]) so a seed stays a few KB to ~100 KB; in every other seed the
               larger initializers are moved to the companion file data.bin (external data). Layout of an
               input: model bytes, data.bin bytes, 4-byte little-endian model length (fuzz_model.cc).
  qconfig      configs/*.json, configs/examples/*.json
  calib_table  the tables given with --calib-table (scripts/fuzz.sh writes two with `qtool calibrate`)
  npy npz pb   tests/tensorio/data/* and the shared tensors of at most 40 KB
"""
import argparse
import glob
import os
import struct

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shrink(model, external):
    """Cuts large initializers to 16 values; with `external`, tensors of >= 8 values go to data.bin."""
    data = bytearray()
    graphs = [model.graph]
    while graphs:
        g = graphs.pop()
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    graphs.append(a.g)
                graphs.extend(a.graphs)
        for i, t in enumerate(g.initializer):
            if t.data_location == onnx.TensorProto.EXTERNAL:
                continue
            arr = numpy_helper.to_array(t)
            if arr.size > 16:
                small = numpy_helper.from_array(arr.reshape(-1)[:16].copy(), t.name)
                g.initializer[i].CopyFrom(small)
                t = g.initializer[i]
            if external and arr.size >= 8 and t.raw_data:
                raw = t.raw_data
                offset = len(data)
                data += raw
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                del t.external_data[:]
                for k, v in (("location", "data.bin"), ("offset", str(offset)), ("length", str(len(raw)))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
    return model.SerializeToString(), bytes(data)


def write(out, target, name, payload):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(payload)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--calib-table", action="append", default=[])
    a = ap.parse_args()

    models = sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx")))
    models += sorted(p for p in glob.glob(os.path.join(a.shared, "models", "*.onnx")) if os.path.getsize(p) < 6 << 20)
    for n, path in enumerate(models):
        m = onnx.load(path, load_external_data=True) if "external" in path else onnx.load(path)
        if "external" in path:
            onnx.load_external_data_for_model(m, os.path.dirname(path))
        proto, data = shrink(m, external=(n % 2 == 1 or "external" in path))
        if len(proto) > 200_000:
            continue
        write(a.out, "model", os.path.basename(path), proto + data + struct.pack("<I", len(proto)))

    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.json")) +
                       glob.glob(os.path.join(ROOT, "configs", "examples", "*.json"))):
        write(a.out, "qconfig", os.path.basename(path), open(path, "rb").read())

    for path in a.calib_table:
        write(a.out, "calib_table", os.path.basename(path), open(path, "rb").read())

    tensors = sorted(glob.glob(os.path.join(ROOT, "tests", "tensorio", "data", "*")))
    tensors += sorted(p for p in glob.glob(os.path.join(a.shared, "data", "tensors", "*")) if os.path.getsize(p) <= 40_000)
    for path in tensors:
        ext = os.path.splitext(path)[1][1:]
        if ext in ("npy", "npz", "pb"):
            write(a.out, ext, os.path.basename(path), open(path, "rb").read())
    # An .npz of the small .npy seeds, stored and deflated, so the npz target starts from both codecs.
    arrays = [np.load(p) for p in tensors if p.endswith(".npy") and os.path.getsize(p) < 4096]
    for compress in (False, True):
        name = os.path.join(a.out, "npz", "seed_%s.npz" % ("deflate" if compress else "stored"))
        (np.savez_compressed if compress else np.savez)(name, *arrays[:4])


if __name__ == "__main__":
    main()
