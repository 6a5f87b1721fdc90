#!/usr/bin/python3
"""Hostile models and configs (issue 16: models, configs, runtime limits). Every case must exit with the
expected code (2 for a bad input, 0 where the input is valid after all), print exactly one non-empty line on
stderr naming the problem, finish quickly (no hang, no gigabytes allocated) and leave its inputs byte-identical.

usage: hostile_models.py QTOOL SCRATCH_DIR

Classes: corrupt tensors and nodes (every subcommand that loads a model), crashes (BatchNormalization
parameters shorter than the Conv's channels, --threads 100000, 10,000-level JSON, 1e400), RE2 regexes
(nested quantifiers on a 20,000-character node name, syntax RE2 refuses), signed overflow in shape arithmetic,
resource limits (--max-memory, --max-loop-iterations, constant folding) and fixed QConfig scales / calibration
tables of another model.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

qtool, scratch = sys.argv[1:3]
shutil.rmtree(scratch, ignore_errors=True)
inputs_dir = os.path.join(scratch, "in")
out_dir = os.path.join(scratch, "out")
os.makedirs(inputs_dir)
os.makedirs(out_dir)
failures = []
count = 0
# A sanitizer build runs qtool several times slower: its tests get QTOOL_TIMEOUT_SCALE (tests/CMakeLists.txt),
# which multiplies every time limit below; a Release build keeps them as written (no variable: 1).
SCALE = float(os.environ.get("QTOOL_TIMEOUT_SCALE", "1"))
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def snapshot():
    h = {}
    for root, _, files in os.walk(inputs_dir):
        for f in files:
            p = os.path.join(root, f)
            h[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return h


def check(args, names, expect_rc=2, max_seconds=20):
    """Runs qtool ARGS; `names`: strings the stderr line must contain (all of them)."""
    global count
    count += 1
    before = snapshot()
    t0 = time.time()
    try:
        # -q: only errors on stderr (quantize --random would log its calibration first).
        p = subprocess.run([qtool, "-q"] + args, capture_output=True, text=True, timeout=max_seconds * SCALE + 10)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = "timeout", ""
    seconds = time.time() - t0
    lines = err.splitlines()
    problems = []
    if rc != expect_rc:
        problems.append(f"exit code {rc}, expected {expect_rc}")
    if expect_rc == 2 and (len(lines) != 1 or not lines[0].strip()):
        problems.append(f"stderr has {len(lines)} lines, expected exactly one")
    if expect_rc == 0 and err.strip():  # with -q: nothing (a sanitizer report would show here)
        problems.append("stderr is not empty")
    for n in names if expect_rc != 0 else []:
        if n not in err:
            problems.append(f"stderr does not name {n!r}")
    if seconds > max_seconds * SCALE:
        problems.append(f"took {seconds:.1f} s (limit {max_seconds * SCALE:g} s)")
    if snapshot() != before:
        problems.append("an input file changed")
    status = "ok  " if not problems else "FAIL"
    short = [os.path.relpath(a, scratch) if a.startswith(scratch) else a for a in args]
    print(f"{status} qtool {' '.join(short)} ({seconds:.2f} s)\n       stderr: {err.strip()[:300]}")
    if problems:
        failures.append(f"qtool {' '.join(short)}: {'; '.join(problems)}")


def save(name, model, check_model=False):
    path = os.path.join(inputs_dir, name)
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    with open(path, "wb") as f:
        f.write(data)
    return path


def model(nodes, inits, inputs, outputs, opset=17, sparse=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits, sparse_initializer=list(sparse))
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    m = helper.make_model(g, opset_imports=opsets, producer_name="hostile")
    m.ir_version = 8
    return m


def fvi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def conv_model(w=None, extra_inits=(), nodes=None, name_w="W"):
    """x[1,2,4,4] -> Conv(W[2,2,1,1], B) -> Relu -> y."""
    if w is None:
        w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), name_w)
    b = numpy_helper.from_array(np.zeros(2, np.float32), "B")
    if nodes is None:
        nodes = [helper.make_node("Conv", ["x", name_w, "B"], ["c"], name="conv"),
                 helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return model(nodes, [w, b, *extra_inits], [fvi("x", [1, 2, 4, 4])], [fvi("y", None)])


def config(path, doc):
    return save(path, json.dumps({"format": "qtool-qconfig", "version": 1, "global": {}, **doc}).encode())


def input_file(shape, dtype=TensorProto.FLOAT):
    """x=FILE for `qtool run`: ones of `shape`."""
    np_dtype = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64}[dtype]
    path = os.path.join(inputs_dir, f"x_{'_'.join(map(str, shape))}_{np.dtype(np_dtype).name}.npy")
    np.save(path, np.ones(shape, np_dtype))
    return "x=" + path


def out(name):
    return os.path.join(out_dir, name)


def loaders(path, names):
    """Every subcommand that loads a model must reject it the same way."""
    check(["inspect", path], names)
    check(["convert", path, "-o", out("c.onnx")], names)
    check(["run", path, "-i", input_file([1, 2, 4, 4])], names)
    check(["calibrate", path, "--random", "1", "-o", out("c.json")], names)
    check(["quantize", path, "-o", out("q.onnx"), "--prepare-only"], names)


def raw_tensor(name, dtype, dims, raw):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


# ---- 1. corrupt tensors and nodes: rejected once, at load -------------------------------------------------
valid = save("valid.onnx", conv_model())
check(["inspect", valid], [], expect_rc=0)
check(["quantize", valid, "-o", out("v.onnx"), "--prepare-only"], [], expect_rc=0)

loaders(save("raw_short.onnx", conv_model(raw_tensor("W", TensorProto.FLOAT, [2, 2, 1, 1], b"\0" * 3))),
        ["initializer 'W'", "raw_data holds 3 bytes", "raw_short.onnx"])
w = helper.make_tensor("W", TensorProto.FLOAT, [2, 2, 1, 1], [1.0] * 4)
del w.float_data[3]
loaders(save("typed_short.onnx", conv_model(w)), ["initializer 'W'", "float_data holds 3 values", "typed_short.onnx"])
loaders(save("neg_dim.onnx", conv_model(raw_tensor("W", TensorProto.FLOAT, [-2, 2, 1, 1], b""))),
        ["initializer 'W'", "negative dimension", "neg_dim.onnx"])
loaders(save("numel_overflow.onnx", conv_model(raw_tensor("W", TensorProto.FLOAT, [2**40, 2**40, 1, 1], b"\0" * 16))),
        ["initializer 'W'", "more elements than a 64-bit count", "numel_overflow.onnx"])
loaders(save("bytes_overflow.onnx", conv_model(raw_tensor("W", TensorProto.DOUBLE, [2**31, 2**31], b"\0" * 16))),
        ["initializer 'W'", "overflow a 64-bit byte count"])
loaders(save("dtype0.onnx", conv_model(raw_tensor("W", 0, [2, 2, 1, 1], b"\0" * 16))),
        ["initializer 'W'", "data_type 0"])
loaders(save("dtype99.onnx", conv_model(raw_tensor("W", 99, [2, 2, 1, 1], b"\0" * 16))),
        ["initializer 'W'", "data_type 99"])
dup = numpy_helper.from_array(np.ones(2, np.float32), "B")
loaders(save("dup_init.onnx", conv_model(extra_inits=[dup])), ["initializer 'B'", "defined twice"])
sp = helper.make_sparse_tensor(numpy_helper.from_array(np.ones((2, 2), np.float32), "S"),
                               numpy_helper.from_array(np.array([0, 1], np.int64), ""), [2, 2])
m = conv_model()
m.graph.sparse_initializer.append(sp)
loaders(save("bad_sparse.onnx", m), ["sparse initializer 'S'", "sparse values must be 1-D"])
loaders(save("conv_no_w.onnx", conv_model(nodes=[helper.make_node("Conv", ["x"], ["c"], name="conv"),
                                                 helper.make_node("Relu", ["c"], ["y"], name="relu")])),
        ["node 'conv' (Conv)", "has 1 inputs", "at least 2"])
loaders(save("empty_out.onnx", conv_model(nodes=[helper.make_node("Conv", ["x", "W", "B"], [""], name="conv"),
                                                 helper.make_node("Relu", ["c"], ["y"], name="relu")])),
        ["node 'conv' (Conv)", "empty output names"])
loaders(save("empty_req_input.onnx", conv_model(nodes=[helper.make_node("Conv", ["x", "", "B"], ["c"], name="conv"),
                                                       helper.make_node("Relu", ["c"], ["y"], name="relu")])),
        ["node 'conv' (Conv)", "required input 1"])

# 64 tensors aliasing one 256 KiB range of a 256 KiB data file: the loader would read 16 MiB.
blob = np.arange(65536, dtype=np.float32)
with open(os.path.join(inputs_dir, "alias.data"), "wb") as f:
    f.write(blob.tobytes())
inits = []
for i in range(64):
    t = raw_tensor(f"w{i}", TensorProto.FLOAT, [65536], b"")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "alias.data"), ("offset", "0"), ("length", str(blob.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    inits.append(t)
nodes = [helper.make_node("Add", ["x", "w0"], ["a0"], name="add0")]
for i in range(1, 64):
    nodes.append(helper.make_node("Add", [f"a{i - 1}", f"w{i}"], [f"a{i}"], name=f"add{i}"))
nodes.append(helper.make_node("Identity", ["a63"], ["y"], name="id"))
loaders(save("alias.onnx", model(nodes, inits, [fvi("x", [65536])], [fvi("y", None)])),
        ["alias.data", "alias the same bytes", "alias.onnx"])

# ---- 2. crashes --------------------------------------------------------------------------------------------
bn_inits = [numpy_helper.from_array(np.ones((4, 2, 1, 1), np.float32), "W"),
            numpy_helper.from_array(np.ones(4, np.float32), "gamma"),
            numpy_helper.from_array(np.ones(2, np.float32), "beta"),
            numpy_helper.from_array(np.zeros(4, np.float32), "mean"),
            numpy_helper.from_array(np.ones(1, np.float32), "var")]
bn = model([helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
            helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"], name="bn")],
           bn_inits, [fvi("x", [1, 2, 4, 4])], [fvi("y", None)])
bn_path = save("bn_short.onnx", bn)
check(["quantize", bn_path, "-o", out("q.onnx"), "--prepare-only"], ["BatchNormalization", "bn", "B has 2 values"])
check(["quantize", bn_path, "-o", out("q.onnx"), "--random", "1"], ["bn"])
check(["run", valid, "-i", input_file([1, 2, 4, 4]), "--threads", "100000"], ["--threads 100000"])
check(["calibrate", valid, "--random", "1", "--threads", "100000", "-o", out("c.json")], ["--threads 100000"])
check(["quantize", valid, "-o", out("q.onnx"), "--random", "1", "--threads", "100000"], ["--threads 100000"])

deep = save("deep.json", ("[" * 10000 + "]" * 10000).encode())
check(["quantize", valid, "-o", out("q.onnx"), "--config", deep, "--random", "1"], ["deep.json", "nested more than"])
check(["quantize", valid, "-o", out("q.onnx"), "--calib", deep], ["deep.json", "nested more than"])
check(["inspect", valid, "--explain", "--calib", deep], ["deep.json", "nested more than"])
big = save("big_number.json", b'{"format": "qtool-qconfig", "version": 1, "global": {"activation": {"scale": 1e400, "zero_point": 0}}}')
check(["quantize", valid, "-o", out("q.onnx"), "--config", big, "--random", "1"],
      ["big_number.json", "$.global.activation.scale", "1e400"])
calib_big = save("calib_big.json", b'{"format": "qtool-calibration", "version": 1, "tensors": {"x": {"min": -1e999}}}')
check(["quantize", valid, "-o", out("q.onnx"), "--calib", calib_big], ["calib_big.json", "$.tensors.x.min"])


# ---- 3. regexes: RE2, compiled once, linear time --------------------------------------------------------------

long_name = "a" * 20000 + "!"
long_model = save("long_name.onnx", conv_model(nodes=[helper.make_node("Conv", ["x", "W", "B"], ["c"], name=long_name),
                                                      helper.make_node("Relu", ["c"], ["y"], name="relu")]))
# (a+)+$ against "aaa...a!" is the textbook exponential backtrack; RE2 answers in linear time.
nested = config("nested_regex.json", {"node_name_regex": [{"pattern": "(a+)+$", "rule": None}]})
check(["quantize", long_model, "-o", out("q.onnx"), "--config", nested, "--random", "1"],
      ["$.node_name_regex[0].pattern", "matches no node name"], max_seconds=10)
matching = config("matching_regex.json", {"node_name_regex": [{"pattern": "(a+)+!$", "rule": None}]})
check(["quantize", long_model, "-o", out("q.onnx"), "--config", matching, "--random", "1"], [], expect_rc=0,
      max_seconds=10)
nomatch = config("nomatch_regex.json", {"node_name_regex": [{"pattern": "(a+)+b$", "rule": None}]})
check(["quantize", long_model, "-o", out("q.onnx"), "--config", nomatch, "--random", "1"],
      ["$.node_name_regex[0].pattern", "matches no node name"], max_seconds=10)
for i, pat in enumerate(["(?<=a)b", "(a", "a{2,100000}", "(\\w)\\1"]):
    bad = config(f"bad_regex{i}.json", {"node_name_regex": [{"pattern": "conv", "rule": None}, {"pattern": pat, "rule": None}]})
    check(["quantize", valid, "-o", out("q.onnx"), "--config", bad, "--random", "1"],
          [f"bad_regex{i}.json", "$.node_name_regex[1].pattern", "bad regular expression"])

# ---- 4. signed overflow in shape arithmetic (UBSan-clean; exit 2 or a valid result) --------------------------
def run_model(name, nodes, inits, x_shape, expect_rc, names, x_dtype=TensorProto.FLOAT, extra=()):
    path = save(name, model(nodes, inits, [fvi("x", x_shape, x_dtype)], [fvi("y", None)]))
    check(["run", path, "-i", input_file(x_shape, x_dtype), *extra], names, expect_rc=expect_rc)
    return path


w1 = numpy_helper.from_array(np.ones((2, 2, 2, 2), np.float32), "W")
for attr, value, rc in (("pads", [I64_MAX, 0, 0, 0], 2), ("dilations", [I64_MAX, 1], 2),
                        ("strides", [I64_MAX, 1], 0)):  # a huge stride is valid: one output row
    run_model(f"conv_{attr}.onnx", [helper.make_node("Conv", ["x", "W"], ["y"], name="conv", **{attr: value})], [w1],
              [1, 2, 4, 4], rc, ["conv", "Conv", "integer overflow"])
w_g = numpy_helper.from_array(np.ones((2, 4, 1, 1), np.float32), "W")
run_model("conv_group.onnx", [helper.make_node("Conv", ["x", "W"], ["y"], name="conv", group=2**62)], [w_g],
          [1, 2, 4, 4], 2, ["conv", "W channels * group"])
pads = numpy_helper.from_array(np.array([0, I64_MAX, 0, 1], np.int64), "pads")
run_model("pad_max.onnx", [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")], [pads], [2, 2], 2,
          ["pad", "padded size"])
for i, (st, en, step) in enumerate([(I64_MIN, I64_MAX, 1), (I64_MAX, I64_MIN, -1), (0, I64_MAX, I64_MAX),
                                    (I64_MAX, I64_MIN, I64_MIN), (I64_MIN, I64_MIN, I64_MIN)]):
    sl = [numpy_helper.from_array(np.array([v], np.int64), n) for v, n in ((st, "s"), (en, "e"), (step, "st"))]
    sl.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
    run_model(f"slice{i}.onnx", [helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"], name="slice")], sl,
              [5], 0, [])
rg = [numpy_helper.from_array(np.array(v, np.int64), n) for v, n in ((I64_MIN, "a"), (I64_MAX, "b"), (1, "d"))]
run_model("range_i64.onnx", [helper.make_node("Range", ["a", "b", "d"], ["r"], name="range"),
                             helper.make_node("Identity", ["r"], ["y"], name="id")], rg, [1], 2, ["range", "Range"])
for name, divisor, rc in (("div_m1.onnx", -1, 0), ("div_0.onnx", 0, 2)):
    d = [numpy_helper.from_array(np.array([I64_MIN, 7], np.int64), "n"),
         numpy_helper.from_array(np.array([divisor, 1], np.int64), "d")]
    run_model(name, [helper.make_node("Div", ["n", "d"], ["q"], name="div"),
                     helper.make_node("Add", ["q", "x"], ["y"], name="add")], d, [2], rc,
              ["div", "division by zero"], x_dtype=TensorProto.INT64)
bs = config("block_size.json", {"global": {"weight": {"dtype": "int4", "granularity": "per_block", "block_size": I64_MAX}}})
check(["quantize", valid, "-o", out("q.onnx"), "--config", bs, "--random", "1"], [], expect_rc=0)
# The same for the block of double-quantized scales (a 2-D MatMul weight: scale_bits applies to those only).
mm_w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
mm_path = save("matmul.onnx", model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [mm_w],
                                    [fvi("x", [1, 4])], [fvi("y", [1, 4])], opset=21))
dq = config("scale_block.json", {"global": {"weight": {"dtype": "int4", "granularity": "per_block", "block_size": 2,
                                                        "scale_bits": 8, "scale_block_size": I64_MAX}}})
check(["quantize", mm_path, "-o", out("q.onnx"), "--config", dq, "--random", "1"], [], expect_rc=0)

# ---- 5. resource limits: sizes checked before allocating ----------------------------------------------------
def const_i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


one = numpy_helper.from_array(np.ones(1, np.float32), "one")
bombs = {
    "expand": ([helper.make_node("Expand", ["one", "shape"], ["big"], name="expand")],
               [one, const_i64("shape", [65536, 65536, 4])]),
    "const_of_shape": ([helper.make_node("ConstantOfShape", ["shape"], ["big"], name="cos",
                                         value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))],
                       [const_i64("shape", [65536, 65536])]),
    "tile": ([helper.make_node("Tile", ["one", "reps"], ["big"], name="tile")], [one, const_i64("reps", [2**34])]),
    "range": ([helper.make_node("Range", ["a", "b", "d"], ["big"], name="range")],
              [numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((0, "a"), (1e10, "b"), (1, "d"))]),
    "onehot": ([helper.make_node("OneHot", ["idx", "depth", "vals"], ["big"], name="onehot")],
               [const_i64("idx", [1]), const_i64("depth", [2**40]),
                numpy_helper.from_array(np.array([0, 1], np.float32), "vals")]),
}
for name, (nodes, inits) in bombs.items():
    nodes = nodes + [helper.make_node("ReduceMax", ["big"], ["m"], name="reduce", keepdims=0),
                     helper.make_node("Add", ["x", "m"], ["y"], name="add")]
    path = run_model(f"bomb_{name}.onnx", nodes, inits, [1], 2, ["--max-memory"])
    # Constant folding must not compute it either: --prepare-only is fast and keeps the node.
    check(["quantize", path, "-o", out("q.onnx"), "--prepare-only"], [], expect_rc=0, max_seconds=10)
resize = [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", mode="nearest")]
run_model("resize_1e6.onnx", resize, [numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "scales")],
          [1, 1, 4, 4], 2, ["resize", "--max-memory"])
wt = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "W")
run_model("convt_huge.onnx", [helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="convt",
                                               output_shape=[2**20, 2**20])], [wt], [1, 1, 4, 4], 2,
          ["convt", "--max-memory"])
check(["run", valid, "-i", input_file([1, 2, 4, 4]), "--max-memory", "200"], ["--max-memory", "200 B"])
check(["run", valid, "-i", input_file([1, 2, 4, 4]), "--max-memory", "lots"], [], expect_rc=1)

body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
                          helper.make_node("Identity", ["v_in"], ["v_out"], name="carry")], "body",
                         [fvi("i", [], TensorProto.INT64), fvi("cond_in", [], TensorProto.BOOL), fvi("v_in", [1])],
                         [fvi("cond_out", [], TensorProto.BOOL), fvi("v_out", [1])])
loop = [helper.make_node("Loop", ["M", "", "x"], ["y"], name="loop", body=body)]
loop_path = run_model("loop_2p62.onnx", loop, [const_i64("M", 2**62)], [1], 2,
                      ["--max-loop-iterations", "1000"], extra=["--max-loop-iterations", "1000"])
check(["run", loop_path, "-i", input_file([1]), "--max-loop-iterations", "0"], [], expect_rc=1)

# ---- 6. fixed scales and calibration tables ------------------------------------------------------------------
for i, (scale, zp, names) in enumerate([(1e-40, 0, ["smallest normal float"]), (1e39, 0, ["absurdly large"]),
                                        (1e35, 0, ["absurdly large"]), (0, 0, ["must be positive"]),
                                        (-0.5, 0, ["must be positive"]),
                                        (0.1, -1, ["zero_point -1", "uint8"]), (0.1, 70000, ["zero_point 70000"])]):
    cfg = config(f"scale{i}.json", {"global": {"activation": {"scale": scale, "zero_point": zp}}})
    check(["quantize", valid, "-o", out("q.onnx"), "--config", cfg, "--random", "1"], [f"scale{i}.json"] + names)
cfg = config("zp_int8.json", {"op_types": {"Conv": {"activation": {"dtype": "int8", "scale": 0.1, "zero_point": 200}}}})
check(["quantize", valid, "-o", out("q.onnx"), "--config", cfg, "--random", "1"], ["$.op_types.Conv", "int8"])

calib_valid = out("valid_calib.json")
check(["calibrate", valid, "--random", "2", "-o", calib_valid], [], expect_rc=0)
shutil.copy(calib_valid, os.path.join(inputs_dir, "valid_calib.json"))
calib_valid = os.path.join(inputs_dir, "valid_calib.json")
other_m = conv_model(nodes=[helper.make_node("Conv", ["x2", "W", "B"], ["c"], name="conv"),
                             helper.make_node("Relu", ["c"], ["y"], name="relu")])
other_m.graph.input[0].name = "x2"
other = save("other.onnx", other_m)
check(["quantize", other, "-o", out("q.onnx"), "--calib", calib_valid], ["valid_calib.json", "made for model", "other.onnx"])
check(["quantize", other, "-o", out("q.onnx"), "--calib", calib_valid, "--allow-calib-mismatch"],
      ["has no entry for 'x2'", "re-run qtool calibrate"])
check(["quantize", valid, "-o", out("q.onnx"), "--calib", calib_valid], [], expect_rc=0)

# ---- 7. kernels added with opsets 17-23 and ORT's contrib ops (docs/reliability.md, "Newer kernels") ---------
def ms_node(op, ins, outs=("y",), **kw):
    return helper.make_node(op, list(ins), list(outs), name=op.lower(), domain="com.microsoft", **kw)


def f32(name, v):
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


# DFT of an empty signal: onesided made one bin out of none and read past the row (SIGSEGV).
run_model("dft_empty.onnx", [helper.make_node("DFT", ["x"], ["y"], name="dft", onesided=1)], [], [1, 0, 1], 2,
          ["DFT 'dft'", "signal axis of [1,0,1] is empty", "dft_length"])
# ORT's RotaryEmbedding with one start position near 2^63: start + s overflowed (UBSan) before the range check.
x_rope = [1, 4, 8]
rope = [ms_node("RotaryEmbedding", ["x", "p", "c", "s"], num_heads=2)]
run_model("rope_start.onnx", rope, [const_i64("p", [I64_MAX]), f32("c", np.ones((4, 2))), f32("s", np.ones((4, 2)))],
          x_rope, 2, ["RotaryEmbedding 'rotaryembedding'", f"position {I64_MAX} is outside the caches' 4 rows"])
# Attention: qkv_hidden_sizes whose sum overflows (UBSan), weights without columns (num_heads = 2^62 went on to
# loop 2^62 heads), and scores quadratic in the sequence, checked against --max-memory before they are taken.
w_att = f32("w", np.ones((8, 24)))
run_model("attn_qkv.onnx", [ms_node("Attention", ["x", "w"], num_heads=1, qkv_hidden_sizes=[2**62] * 3)], [w_att],
          x_rope, 2, ["Attention 'attention'", "qkv_hidden_sizes", "integer overflow"])
run_model("attn_w0.onnx", [ms_node("Attention", ["x", "w"], num_heads=2**62)], [f32("w", np.ones((8, 0)))], x_rope,
          2, ["Attention 'attention'", "weights [8,0] have no columns"])
run_model("attn_long.onnx", [ms_node("Attention", ["x", "w"], num_heads=1)], [f32("w", np.ones((1, 3)))],
          [1, 4096, 1], 2, ["Attention 'attention'", "4096 queries x 4096 keys", "--max-memory"],
          extra=["--max-memory", "64M"])
# Unique's working arrays are 40 bytes per element of a byte tensor: checked like tensors.
uniq = [helper.make_node("Expand", ["u8", "shape"], ["big"], name="expand"),
        helper.make_node("Unique", ["big"], ["u"], name="unique"),
        helper.make_node("Cast", ["u"], ["uf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["uf"], ["r"], name="sum", keepdims=0),
        helper.make_node("Add", ["x", "r"], ["y"], name="add")]
run_model("unique_big.onnx", uniq, [numpy_helper.from_array(np.ones(1, np.uint8), "u8"), const_i64("shape", [2**22])],
          [1], 2, ["Unique 'unique'", "working arrays", "--max-memory"], extra=["--max-memory", "64M"])
# RoiAlign visits bins·sampling_ratio² samples per roi and channel: 2^62 ran for centuries.
roi = [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="roialign", sampling_ratio=2**31)]
roi_inits = [f32("rois", [[0, 0, 3, 3]]), const_i64("bi", [0])]
run_model("roialign_2p31.onnx", roi, roi_inits, [1, 2, 4, 4], 2, ["RoiAlign 'roialign'", "sampling grid", "overflow"])
roi[0] = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="roialign", sampling_ratio=100000)
run_model("roialign_1e5.onnx", roi, roi_inits, [1, 2, 4, 4], 2, ["RoiAlign 'roialign'", "sampling_ratio", "--max-memory"])
# Found by UBSan: a ±3e38 roi made the adaptive sample counts ~9e15 and their product overflowed; an infinite
# GridSample coordinate on a 1-pixel axis with align_corners became inf·0 = NaN and overflowed int64 as a tap.
roi[0] = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="roialign")
run_model("roialign_huge.onnx", roi, [f32("rois", [[-3e38, -3e38, 3e38, 3e38]]), const_i64("bi", [0])], [1, 2, 4, 4],
          0, [])
inf_grid = numpy_helper.from_array(np.array([np.inf, -np.inf] * 16, np.float32).reshape(1, 4, 4, 2), "grid")
run_model("grid_inf_1px.onnx", [helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", mode="bicubic",
                                                 align_corners=1)], [inf_grid], [1, 2, 1, 1], 0, [])
# NonMaxSuppression with iou_threshold 1 suppresses nothing: no O(kept) scan per box (20,000 boxes took 34 s).
rng = np.random.default_rng(0)
nms = [helper.make_node("NonMaxSuppression", ["b", "sc", "mo", "iou"], ["sel"], name="nms"),
       helper.make_node("Cast", ["sel"], ["self"], name="cast", to=TensorProto.FLOAT),
       helper.make_node("ReduceSum", ["self"], ["r"], name="sum", keepdims=0),
       helper.make_node("Add", ["x", "r"], ["y"], name="add")]
run_model("nms_iou1.onnx", nms, [f32("b", rng.random((1, 20000, 4))), f32("sc", rng.random((1, 1, 20000))),
                                 const_i64("mo", [I64_MAX]), f32("iou", [1.0])], [1], 0, [])
# QuantizeLinear-23's output_dtype 2^32 + 2 passed as uint8 (2) after narrowing to the ONNX enum.
qd = [helper.make_node("QuantizeLinear", ["x", "qs"], ["q"], name="q", output_dtype=2**32 + 2),
      helper.make_node("DequantizeLinear", ["q", "qs"], ["y"], name="dq")]
q_path = save("q_dtype.onnx", model(qd, [f32("qs", 0.1)], [fvi("x", [1, 2, 4, 4])], [fvi("y", None)], opset=23))
check(["run", q_path, "-i", input_file([1, 2, 4, 4])], ["QuantizeLinear 'q'", "output_dtype' = 4294967298"])
# quantize --random: a kernel's bad input found by the accuracy guard's runs is exit 2 (was 3, "internal error").
dft0 = model([helper.make_node("DFT", ["x", "len"], ["y"], name="dft")], [const_i64("len", 0)], [fvi("x", [1, 8, 1])],
             [fvi("y", None)])
check(["quantize", save("dft_len0.onnx", dft0), "-o", out("q.onnx"), "--random", "1"], ["DFT 'dft'", "dft_length"])
# NaN in the float model's own outputs (GridSample at a NaN coordinate) is no quantization error: exit 0 (was 4).
grid = numpy_helper.from_array(np.array([np.nan, 0.5] * 16, np.float32).reshape(1, 4, 4, 2), "grid")
gs = model([helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs")], [grid], [fvi("x", [1, 2, 4, 4])],
           [fvi("y", None)], opset=16)
check(["quantize", save("grid_nan.onnx", gs), "-o", out("q.onnx"), "--random", "2"], [], expect_rc=0)
# --random on a scalar input: no batch axis (was an internal error from vector::at).
ln0 = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [], [fvi("x", [])], [fvi("y", None)])
check(["calibrate", save("scalar_in.onnx", ln0), "--random", "1", "-o", out("c.json")],
      ["--random", "input 'x'", "no batch axis"])

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"\nall {count} hostile-input cases passed")
