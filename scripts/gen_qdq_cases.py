#!/usr/bin/python3
"""Builds one ONNX model (opset 21) holding many QuantizeLinear / DequantizeLinear / Cast cases, plus the
inputs both ONNX Runtime and qtool need, for the bit-exact comparison test (tests/numerics/tests.cmake).

usage: /usr/bin/python3 scripts/gen_qdq_cases.py OUTDIR

Writes OUTDIR/qdq_cases.onnx, OUTDIR/ort_args.txt (the --input arguments for scripts/ort/ort_run.mjs),
OUTDIR/manifest.json and per-case tensors: float inputs as .npy (read by ORT and qtool), scales, zero points and
quantized inputs as ONNX TensorProto .pb files (initializers in the model, read by qtool via tensorio).
Outputs of types ORT's JS API cannot hand back (int4, uint4, FP8) are Cast to int8/uint8/float in the model.
Uses onnx 1.12's protobuf classes only: the checker does not know opset 21 and is not run.
"""
import json
import os
import struct
import sys

import numpy as np
from onnx import TensorProto, helper

FLOAT, FLOAT16, INT8, UINT8, INT16, UINT16 = 1, 10, 3, 2, 5, 4
E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, UINT4, INT4 = 17, 18, 19, 20, 21, 22
QRANGE = {INT8: (-128, 127), UINT8: (0, 255), INT16: (-32768, 32767), UINT16: (0, 65535), INT4: (-8, 7),
          UINT4: (0, 15)}
NP_INT = {INT8: np.int8, UINT8: np.uint8, INT16: np.int16, UINT16: np.uint16}
NAMES = {INT8: "int8", UINT8: "uint8", INT16: "int16", UINT16: "uint16", INT4: "int4", UINT4: "uint4",
         E4M3FN: "e4m3fn", E5M2: "e5m2", E4M3FNUZ: "e4m3fnuz", E5M2FNUZ: "e5m2fnuz"}

rng = np.random.default_rng(20261121)
nodes, inputs, outputs, inits = [], [], [], []
manifest = []
ort_args = []
outdir = sys.argv[1]
os.makedirs(outdir, exist_ok=True)


def tensor_proto(name, dtype, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = bytes(raw)
    return t


def pack4(vals):
    v = (np.asarray(vals, dtype=np.int64).ravel() & 0xF).astype(np.uint8)
    if v.size % 2:
        v = np.append(v, 0)
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8).tobytes()


def raw_of(dtype, vals):
    """Raw little-endian bytes of integer values (or FP8 codes) of an ONNX dtype."""
    if dtype in (INT4, UINT4):
        return pack4(vals)
    if dtype in (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ):
        return np.asarray(vals, dtype=np.uint8).tobytes()
    return np.asarray(vals).astype(NP_INT[dtype]).tobytes()


def add_init(name, dtype, dims, raw):
    """An initializer in the model and the same tensor as NAME.pb for qtool."""
    t = tensor_proto(name, dtype, dims, raw)
    inits.append(t)
    with open(os.path.join(outdir, name + ".pb"), "wb") as f:
        f.write(t.SerializeToString())
    return name + ".pb"


def special_values(scale_hint):
    s = float(scale_hint)
    return np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30,
                     3.4e38, -3.4e38, 200 * s, -200 * s, 40000 * s, -70000 * s, 0.5 * s, -0.5 * s, 1.5 * s,
                     -2.5 * s, 449.0, -464.0, 465.0, 57344.0, 61440.0, -61441.0, 240.0, 1e-3, 2.0 ** -10,
                     2.0 ** -9 * 1.5, 2.0 ** -17, 2.0 ** -16 * 1.25], dtype=np.float32)


def random_scales(n, fp8):
    """Half powers of two (exact ties), half random; FP8 cases use scales near 1 to cover the format's range."""
    if fp8:
        pow2 = 2.0 ** rng.integers(-2, 3, n)
        rnd = rng.uniform(0.3, 3.0, n)
    else:
        pow2 = 2.0 ** rng.integers(-6, -1, n)
        rnd = rng.uniform(0.002, 0.2, n)
    return np.where(rng.random(n) < 0.5, pow2, rnd).astype(np.float32)


def float_input(shape, scale_of_elem, qlo, qhi):
    """Random values covering the range, exact ties (k + 0.5) * s, near ties, out-of-range and specials."""
    n = int(np.prod(shape))
    s = scale_of_elem.astype(np.float64)
    span = (qhi - qlo) * 0.6 + 4
    k = rng.integers(int(-span), int(span), n).astype(np.float64)
    kind = rng.random(n)
    x = np.where(kind < 0.35, (k + 0.5) * s,                          # ties (exact when s is a power of two)
                 np.where(kind < 0.7, rng.normal(0, span / 2, n) * s,   # random
                          np.where(kind < 0.85, (k + 0.5 + rng.choice([-1, 1], n) * 2.0 ** -20) * s,
                                   rng.uniform(-3, 3, n) * span * s)))  # far beyond the range
    x = x.astype(np.float32)
    sp = special_values(float(np.median(s)))
    idx = rng.choice(n, size=min(n, sp.size), replace=False)
    x[idx] = sp[: idx.size]
    return x.reshape(shape)


def scale_layout(shape, gran, axis, block):
    if gran == "tensor":
        return []
    if gran == "axis":
        return [shape[axis]]
    s = list(shape)
    s[axis] = (shape[axis] + block - 1) // block
    return s


def expand_to_elems(vals, shape, gran, axis, block):
    """Per-element view of a per-tensor / per-axis / blocked parameter (for building ties)."""
    if gran == "tensor":
        return np.full(int(np.prod(shape)), vals.ravel()[0])
    if gran == "axis":
        bshape = [1] * len(shape)
        bshape[axis] = shape[axis]
        return np.broadcast_to(vals.reshape(bshape), shape).ravel()
    return np.repeat(vals, block, axis=axis).take(range(shape[axis]), axis=axis).ravel()


def io_value(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def add_q_case(name, qtype, gran, shape, axis=0, block=0, saturate=None, with_zp=True, out_attr=None, xtype=FLOAT):
    fp8 = qtype in (E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ)
    sshape = scale_layout(shape, gran, axis, block)
    ns = int(np.prod(sshape)) if sshape else 1
    scale = random_scales(ns, fp8)
    if fp8:
        zp = np.zeros(ns, dtype=np.int64)
        qlo, qhi = -600, 600
    else:
        qlo, qhi = QRANGE[qtype]
        zp = rng.integers(qlo, qhi + 1, ns) if with_zp else np.zeros(ns, dtype=np.int64)
        if qhi - qlo > 1000:  # 16-bit: keep zero points moderate so ties stay exact
            zp = rng.integers(-200, 200, ns) + (0 if qlo < 0 else 1000)
    s_el = expand_to_elems(scale.reshape(sshape) if sshape else scale, shape, gran, axis, block)
    x = float_input(shape, s_el, qlo if not fp8 else -500, qhi if not fp8 else 500)
    npdt = np.float16 if xtype == FLOAT16 else np.float32
    x = x.astype(npdt)
    xname, sname, zname, yname = f"{name}_x", f"{name}_scale", f"{name}_zp", f"{name}_y"
    np.save(os.path.join(outdir, xname + ".npy"), x)
    inputs.append(io_value(xname, xtype, list(shape)))
    ort_args.append(f"--input {xname}={os.path.join(outdir, xname + '.npy')}")
    sfile = add_init(sname, xtype, sshape, scale.astype(npdt).tobytes())
    zfile = None
    if with_zp:
        zfile = add_init(zname, qtype, sshape, raw_of(qtype, zp))
    attrs = {}
    if gran != "tensor":
        attrs["axis"] = axis
    if block:
        attrs["block_size"] = block
    if saturate is not None:
        attrs["saturate"] = saturate
    if out_attr is not None:
        attrs["output_dtype"] = out_attr
    node_in = [xname, sname] + ([zname] if with_zp else [])
    out_type = qtype if (with_zp or out_attr) else UINT8
    compare = "bytes"
    if out_type in (INT4, UINT4) or fp8:
        nodes.append(helper.make_node("QuantizeLinear", node_in, [yname + "_q"], **attrs))
        to = {INT4: INT8, UINT4: UINT8}.get(out_type, FLOAT)
        nodes.append(helper.make_node("Cast", [yname + "_q"], [yname], to=to))
        outputs.append(io_value(yname, to, list(shape)))
        compare = "int4_as_int8" if out_type in (INT4, UINT4) else "fp8_as_float"
    else:
        nodes.append(helper.make_node("QuantizeLinear", node_in, [yname], **attrs))
        outputs.append(io_value(yname, out_type, list(shape)))
    manifest.append({"name": name, "op": "QuantizeLinear", "x": xname + ".npy", "scale": sfile, "zero_point": zfile,
                     "axis": axis, "block_size": block, "saturate": 1 if saturate is None else saturate,
                     "output_dtype": out_attr or 0, "ort_output": yname + ".npy", "compare": compare})


def add_dq_case(name, qtype, gran, shape, axis=0, block=0, stype=FLOAT, codes=None):
    fp8 = qtype in (E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ)
    sshape = scale_layout(shape, gran, axis, block)
    ns = int(np.prod(sshape)) if sshape else 1
    n = int(np.prod(shape))
    scale = random_scales(ns, fp8)
    if fp8:
        xq = codes if codes is not None else rng.integers(0, 256, n)
        zp = np.zeros(ns, dtype=np.int64)
    else:
        qlo, qhi = QRANGE[qtype]
        xq = rng.integers(qlo, qhi + 1, n)
        xq[: min(n, 4)] = [qlo, qhi, 0, qlo + 1][: min(n, 4)]
        zp = rng.integers(qlo, qhi + 1, ns)
    npdt = np.float16 if stype == FLOAT16 else np.float32
    xname, sname, zname, yname = f"{name}_xq", f"{name}_scale", f"{name}_zp", f"{name}_y"
    xfile = add_init(xname, qtype, list(shape), raw_of(qtype, xq))
    sfile = add_init(sname, stype, sshape, scale.astype(npdt).tobytes())
    zfile = add_init(zname, qtype, sshape, raw_of(qtype, zp))
    attrs = {}
    if gran != "tensor":
        attrs["axis"] = axis
    if block:
        attrs["block_size"] = block
    nodes.append(helper.make_node("DequantizeLinear", [xname, sname, zname], [yname], **attrs))
    outputs.append(io_value(yname, stype, list(shape)))
    manifest.append({"name": name, "op": "DequantizeLinear", "x": xfile, "scale": sfile, "zero_point": zfile,
                     "axis": axis, "block_size": block, "saturate": 1, "output_dtype": 0,
                     "ort_output": yname + ".npy", "compare": "bytes"})


def add_cast_case(name, qtype):
    """All 256 codes of an FP8 type Cast to float by ORT; qtool decodes the same codes."""
    xname, yname = f"{name}_codes", f"{name}_y"
    xfile = add_init(xname, qtype, [256], bytes(range(256)))
    nodes.append(helper.make_node("Cast", [xname], [yname], to=FLOAT))
    outputs.append(io_value(yname, FLOAT, [256]))
    manifest.append({"name": name, "op": "Cast", "x": xfile, "ort_output": yname + ".npy", "compare": "bytes"})


# ---- the cases ----
GRANS = [("tensor", [4, 6, 10], 0, 0), ("axis", [3, 5, 8], 1, 0), ("axislast", [6, 33], 1, 0),
         ("block", [10, 7], 0, 4), ("blocklast", [5, 37], 1, 8)]


def gran_kind(g):
    return {"tensor": "tensor", "axis": "axis", "axislast": "axis", "block": "block", "blocklast": "block"}[g]


for qt in (INT8, UINT8, INT16, UINT16, INT4, UINT4):
    for g, shape, axis, block in GRANS:
        add_q_case(f"q_{NAMES[qt]}_{g}", qt, gran_kind(g), shape, axis, block)
        add_dq_case(f"dq_{NAMES[qt]}_{g}", qt, gran_kind(g), shape, axis, block)
for qt in (E4M3FN, E5M2):
    for sat in (1, 0):
        for g, shape, axis, block in GRANS:
            add_q_case(f"q_{NAMES[qt]}_sat{sat}_{g}", qt, gran_kind(g), shape, axis, block, saturate=sat)
    for g, shape, axis, block in GRANS:
        add_dq_case(f"dq_{NAMES[qt]}_{g}", qt, gran_kind(g), shape, axis, block)
    add_dq_case(f"dq_{NAMES[qt]}_allcodes", qt, "tensor", [256], codes=np.arange(256))
for qt in (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ):
    add_cast_case(f"cast_{NAMES[qt]}", qt)
# no zero point: output_dtype attribute (opset 21) and the uint8 default
add_q_case("q_noz_outdtype_int8", INT8, "tensor", [50], with_zp=False, out_attr=INT8)
add_q_case("q_noz_default_uint8", UINT8, "axis", [4, 9], 1, with_zp=False)
# float16 input and scale; float16 scale for DequantizeLinear (output float16)
add_q_case("q_f16_int8_axis", INT8, "axis", [3, 5, 8], 1, xtype=FLOAT16)
add_dq_case("dq_f16_uint8_block", UINT8, "block", [10, 7], 0, 4, stype=FLOAT16)
# one larger case so the multithreaded path runs (quantize_linear with 2 threads is compared too)
add_q_case("q_int8_axis_large", INT8, "axis", [8, 64, 257], 1)
add_q_case("q_int4_block_large", INT4, "block", [64, 1031], 1, 32)

graph = helper.make_graph(nodes, "qdq_cases", inputs, outputs, initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="qtool-gen_qdq_cases")
model.ir_version = 10
with open(os.path.join(outdir, "qdq_cases.onnx"), "wb") as f:
    f.write(model.SerializeToString())
with open(os.path.join(outdir, "ort_args.txt"), "w") as f:
    f.write(" ".join(ort_args) + "\n")
with open(os.path.join(outdir, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print(f"{len(manifest)} cases, {len(nodes)} nodes -> {outdir}")
