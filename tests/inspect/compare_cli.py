#!/usr/bin/python3
"""qtool inspect QUANT --against FLOAT: JSON fields and numbers, self-comparison, text report, bad input.

usage: compare_cli.py QTOOL SOURCE_DIR SCRATCH_DIR

Quantizes models/tiny_conv.onnx on random samples, compares it with the float model on other samples, and checks
the metrics against numpy on the outputs `qtool run` writes for each model (independent of lib/analysis), and the
sensitivity entries against the model with that activation's DequantizeLinear replaced by Identity.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper

qtool, source, scratch = sys.argv[1:4]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
FLOAT = os.path.join(source, "models", "tiny_conv.onnx")
QUANT = os.path.join(scratch, "tiny_conv_int8.onnx")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def close(a, b, rtol=1e-4, atol=1e-7):
    return abs(a - b) <= atol + rtol * abs(b)


def qt(*args):
    return subprocess.run([qtool, *args], capture_output=True, text=True, timeout=120)


def ok(*args):
    p = qt(*args)
    if p.returncode != 0:
        sys.exit(f"qtool {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


def run_outputs(model, x_path, name):
    out = os.path.join(scratch, name)
    ok("run", model, "-i", f"input={x_path}", "-o", out)
    return np.load(os.path.join(out, "logits.npy")).astype(np.float64)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sqnr(f, q):
    return 10 * np.log10((f ** 2).sum() / ((f - q) ** 2).sum())


# A quantized model and six samples it was not calibrated on.
ok("quantize", FLOAT, "-o", QUANT, "--random", "16", "--seed", "3", "--shape", "input=1,3,32,32")
x = np.random.default_rng(7).standard_normal((6, 3, 32, 32)).astype(np.float32)
x_path = os.path.join(scratch, "x.npy")
np.save(x_path, x)

# 1. JSON: fields and numbers against numpy.
j = json.loads(ok("inspect", QUANT, "--against", FLOAT, "--data", f"input={x_path}", "--json", "--threads", "2"))
check(set(j) == {"model", "against", "samples", "outputs", "skipped_outputs", "sensitivity"}, f"top-level keys {sorted(j)}")
check(j["samples"] == 6 and j["skipped_outputs"] == [], "6 samples, nothing skipped")
check([o["output"] for o in j["outputs"]] == ["logits"], "one output: logits")
o = j["outputs"][0]
check(set(o) == {"output", "state", "elements", "sqnr_db", "cosine", "max_abs_error", "mean_abs_error", "rows",
                 "argmax_agreement", "distribution", "kl_divergence"}, f"output keys {sorted(o)}")
f = run_outputs(FLOAT, x_path, "float_out")
q = run_outputs(QUANT, x_path, "quant_out")
p, s = softmax(f), softmax(q)
want = {
    "sqnr_db": sqnr(f, q),
    "cosine": (f * q).sum() / np.sqrt((f ** 2).sum() * (q ** 2).sum()),
    "max_abs_error": np.abs(f - q).max(),
    "mean_abs_error": np.abs(f - q).mean(),
    "kl_divergence": (p * np.log(p / s)).sum(-1).mean(),
}
for k, v in want.items():
    check(close(o[k], v, rtol=1e-3, atol=1e-6), f"{k} {o[k]:.6g} == numpy {v:.6g}")
check(o["elements"] == 60 and o["rows"] == 6 and o["distribution"] == "logits" and o["state"] is False,
      "60 elements, 6 rows of logits")
check(o["argmax_agreement"] == (f.argmax(-1) == q.argmax(-1)).mean(), f"argmax agreement {o['argmax_agreement']}")
check(5 < o["sqnr_db"] < 200 and o["cosine"] < 1, f"quantized is close but not identical: {o['sqnr_db']:.1f} dB")

# Sensitivity: every activation QuantizeLinear of the quantized model, once, most sensitive first.
qm = onnx.load(QUANT)
consts = {t.name for t in qm.graph.initializer} | {n.output[0] for n in qm.graph.node if n.op_type == "Constant"}
acts = {n.input[0] for n in qm.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in consts}
sens = j["sensitivity"]
check(len(acts) >= 3 and sorted(e["tensor"] for e in sens) == sorted(acts), f"sensitivity lists {sorted(acts)}")
gains = [e["gain_db"] for e in sens]
check(gains == sorted(gains, reverse=True), f"sorted by gain {gains}")
check(all(close(e["gain_db"], e["kept_float_sqnr_db"]["logits"] - o["sqnr_db"], 1e-9, 1e-9) for e in sens),
      "gain = SQNR kept float - SQNR quantized")
# Every entry, rebuilt here: that activation's DequantizeLinear nodes read the float tensor through Identity.
for e in sens:
    m = onnx.load(QUANT)
    q_outs = {n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == e["tensor"]}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in q_outs:
            n.CopyFrom(helper.make_node("Identity", [e["tensor"]], [n.output[0]]))
    kept_path = os.path.join(scratch, "kept_float.onnx")
    onnx.save(m, kept_path)
    want_db = sqnr(f, run_outputs(kept_path, x_path, "kept_out"))
    check(close(e["kept_float_sqnr_db"]["logits"], want_db, rtol=1e-4),
          f"{e['tensor']} kept float: {e['kept_float_sqnr_db']['logits']:.4f} dB == numpy {want_db:.4f} dB")
top = sens[0]["tensor"]

# 2. A model against itself: identical.
for model in (FLOAT, QUANT):
    js = json.loads(ok("inspect", model, "--against", model, "--random", "3", "--shape", "input=2,3,32,32", "--json"))
    m = js["outputs"][0]
    check(m["cosine"] == 1 and m["max_abs_error"] == 0 and m["mean_abs_error"] == 0 and m["argmax_agreement"] == 1
          and m["kl_divergence"] == 0 and m["sqnr_db"] == 200 and js["samples"] == 3,
          f"{os.path.basename(model)} against itself: cosine 1, error 0, argmax 1, KL 0, SQNR 200")
    if model == FLOAT:
        check(js["sensitivity"] == [], "float model against itself: no activation with Q/DQ")
    else:  # the reference is the quantized model itself: keeping anything float can only move away from it
        check(len(js["sensitivity"]) == len(acts) and all(e["gain_db"] <= 0 for e in js["sensitivity"]),
              f"quantized model against itself: no activation gains {[e['gain_db'] for e in js['sensitivity']]}")
check(json.loads(ok("inspect", QUANT, "--against", FLOAT, "--random", "2", "--shape", "input=1,3,32,32", "--json",
                    "--no-sensitivity"))["sensitivity"] is None, "--no-sensitivity: sensitivity null")

# Recurrent state (an output declared like an input, stateN <- state): compared in closed loop, without argmax/KL.
# logits = MatMul(s, w), an integer kernel, so s is quantized (Tanh alone would read s in float), and s = x w_in +
# state adds an integer MatMul's output, so the Add runs as an integer op and its inputs are quantized too (an Add
# of two graph inputs would stay float: qdq.cc, inputs_made_in_float).
T = onnx.TensorProto
rnn = helper.make_model(helper.make_graph(
    [helper.make_node("MatMul", ["x", "w_in"], ["xw"]), helper.make_node("Add", ["xw", "state"], ["s"]),
     helper.make_node("Tanh", ["s"], ["stateN"]), helper.make_node("MatMul", ["s", "w"], ["logits"])], "rnn",
    [helper.make_tensor_value_info("x", T.FLOAT, ["N", 4]), helper.make_tensor_value_info("state", T.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("logits", T.FLOAT, ["N", 4]),
     helper.make_tensor_value_info("stateN", T.FLOAT, ["N", 4])],
    [helper.make_tensor("w", T.FLOAT, [4, 4], [0.5, -1.0, 2.0, 0.25] * 4),
     helper.make_tensor("w_in", T.FLOAT, [4, 4], [1.0, 0.5, -0.5, 0.25] * 4)]), opset_imports=[helper.make_opsetid("", 13)])
rnn_path, rnn_q = os.path.join(scratch, "rnn.onnx"), os.path.join(scratch, "rnn_int8.onnx")
onnx.save(rnn, rnn_path)
shapes = ["--shape", "x=1,4", "--shape", "state=1,4"]
ok("quantize", rnn_path, "-o", rnn_q, "--random", "8", *shapes, "--accuracy-guard", "off")
jr = json.loads(ok("inspect", rnn_q, "--against", rnn_path, "--random", "5", "--seed", "2", *shapes, "--json"))
by = {o["output"]: o for o in jr["outputs"]}
check(by["stateN"]["state"] and by["stateN"]["argmax_agreement"] is None and by["stateN"]["kl_divergence"] is None
      and by["stateN"]["distribution"] == "none", "state output: no argmax, no KL")
check(not by["logits"]["state"] and by["logits"]["argmax_agreement"] is not None
      and by["logits"]["kl_divergence"] is not None, "logits beside the state: argmax and KL")
check(len(jr["sensitivity"]) >= 2, f"rnn sensitivity over {len(jr['sensitivity'])} activations")

# 3. Text report.
text = ok("inspect", QUANT, "--against", FLOAT, "--data", f"input={x_path}", "--top", "2")
lines = text.splitlines()
check(any(l.startswith("output") and "SQNR dB" in l and "KL" in l for l in lines), "text: metrics header")
check(any(l.startswith("logits") for l in lines), "text: a row for logits")
check(f"(2 of {len(acts)})" in text and f"  {top} " in text, "text: top 2 sensitivity rows, the top one first")


# 4. Bad input: exit 2 and one stderr line naming the thing.
def bad(args, names, rc=2):
    p = qt(*args)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == rc and len(lines) == 1 and all(n in p.stderr for n in names),
          f"qtool {' '.join(args[:4])} ...: exit {p.returncode}, stderr {p.stderr.strip()!r}")


def variant(name, edit):
    m = onnx.load(FLOAT)
    edit(m)
    path = os.path.join(scratch, name)
    onnx.save(m, path)
    return path


data = ["--data", f"input={x_path}"]
missing = os.path.join(scratch, "missing.onnx")
bad(["inspect", missing, "--against", FLOAT] + data, [missing])
bad(["inspect", QUANT, "--against", missing] + data, [missing])


def rename_output(m):
    m.graph.node[-1].output[0] = "scores"
    m.graph.output[0].name = "scores"


renamed = variant("renamed.onnx", rename_output)
bad(["inspect", QUANT, "--against", renamed] + data, ["'logits'", "'scores'"])


def widen(m, declare):  # logits -> Concat(logits, logits): [N, 20]
    m.graph.node[-1].output[0] = "logits_10"
    m.graph.node.append(helper.make_node("Concat", ["logits_10", "logits_10"], ["logits"], axis=1))
    if declare:
        m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 20
    else:
        m.graph.output[0].type.tensor_type.ClearField("shape")


declared = variant("wide_declared.onnx", lambda m: widen(m, True))
bad(["inspect", QUANT, "--against", declared] + data, ["'logits'", "[N,20]", "[N,10]"])
undeclared = variant("wide_undeclared.onnx", lambda m: widen(m, False))
bad(["inspect", QUANT, "--against", undeclared] + data, ["'logits'", "[1,20]", "[1,10]"])
bad(["inspect", QUANT, "--against", FLOAT], ["--data"], rc=1)
p = qt("inspect", QUANT, "--against", FLOAT, "--random", "2", *data)
check(p.returncode == 1 and "excludes" in p.stderr, f"--data with --random: usage error {p.stderr.strip()!r}")


def narrow_input(m):  # input declared [N,3,16,16]
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 16
    m.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 16


narrow = variant("narrow_input.onnx", narrow_input)
bad(["inspect", QUANT, "--against", narrow, "--random", "1", "--shape", "input=1,3,16,16"],
    ["'input'", "[N,3,32,32]", "[N,3,16,16]"])

if failures:
    print(f"\n{len(failures)} failed:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nall passed")
