#!/usr/bin/python3
"""Attacks the kernels added with opsets 17-23 and ONNX Runtime's contrib ops with hostile models (absurd attributes,
wrong ranks and dtypes, empty tensors, NaN/inf) through `qtool run`, `calibrate --random 1` and `quantize --random 1`.
Prints one line per (case, command): exit code, seconds, peak RSS (MB) and the first stderr line; BAD marks a crash
or other exit code than 0/2, a 2 without exactly one stderr line, more than 20 s, or more than 2 GB.
The cases that found bugs are kept as regression tests in tests/cli/hostile_models.py (section 7); this script is
the full sweep behind docs/reliability.md ("Newer kernels"). Run it on an ASan+UBSan build to catch what a
Release build survives by luck.

usage: scripts/attack_kernels.py QTOOL [NAME_REGEX [COMMANDS]]     (writes under /tmp/qtool_attack/PID)
  COMMANDS: a comma list of run, calib, quant (default all three; a sanitizer build may take run only)
"""
import os
import re
import signal
import subprocess
import sys
import time
import numpy as np
from onnx import TensorProto, helper, numpy_helper

QT = sys.argv[1]
ONLY = sys.argv[2] if len(sys.argv) > 2 else None
COMMANDS = sys.argv[3].split(",") if len(sys.argv) > 3 else ["run", "calib", "quant"]
D = os.path.join("/tmp/qtool_attack", str(os.getpid()))  # one folder per sweep: several may run at once
os.makedirs(D, exist_ok=True)
I64_MAX = 2**63 - 1
F = TensorProto.FLOAT

def vi(n, shape, dt=F): return helper.make_tensor_value_info(n, dt, shape)
def c(name, arr): return numpy_helper.from_array(np.asarray(arr), name)
def i64(name, v): return c(name, np.array(v, np.int64))
def f32(name, v): return c(name, np.array(v, np.float32))

cases = []
ONNX_TYPE = {np.dtype("float32"): F, np.dtype("int64"): TensorProto.INT64, np.dtype("int32"): TensorProto.INT32}


def case(name, nodes, inits, inputs, opset=17, ms=False, outs=("y",), modes=("run", "calib")):
    """One hostile model; inputs: (name, array) pairs, saved as .npy for `run`."""
    g = helper.make_graph(nodes, "g", [vi(n, list(a.shape), ONNX_TYPE[a.dtype]) for n, a in inputs],
                          [vi(o, None) for o in outs], initializer=inits)
    ops = [helper.make_opsetid("", opset)]
    if ms: ops.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(g, opset_imports=ops, producer_name="attack"); m.ir_version = 8
    cases.append((name, m, inputs, modes))

def node(op, ins, outs=("y",), **kw):
    dom = kw.pop("domain", "")
    return helper.make_node(op, list(ins), list(outs), name=op.lower(), domain=dom, **kw)

x4 = ("x", np.random.rand(1, 2, 4, 4).astype(np.float32))
# ---- spectral
for L in (0, 1, 2**40, -3, 2**31 - 1, 2**27):
    case(f"dft_len{L}", [node("DFT", ["x", "L"], onesided=1)], [i64("L", L)], [("x", np.ones((1, 8, 1), np.float32))])
case("dft_empty_onesided", [node("DFT", ["x"], onesided=1)], [], [("x", np.ones((1, 0, 1), np.float32))])
case("dft_empty", [node("DFT", ["x"])], [], [("x", np.ones((1, 0, 1), np.float32))])
case("dft_empty_inv", [node("DFT", ["x"], inverse=1)], [], [("x", np.ones((1, 0, 2), np.float32))])
case("dft_axis_big", [node("DFT", ["x"], axis=I64_MAX)], [], [("x", np.ones((1, 8, 1), np.float32))])
case("dft_axis_min", [node("DFT", ["x"], axis=-2**63)], [], [("x", np.ones((1, 8, 1), np.float32))])
case("dft20_axis", [node("DFT", ["x", "", "ax"])], [i64("ax", -2**63)], [("x", np.ones((1, 8, 1), np.float32))], opset=20)
case("dft_rank1", [node("DFT", ["x"])], [], [("x", np.ones((8,), np.float32))])
case("dft_nan", [node("DFT", ["x"])], [], [("x", np.full((1, 7, 2), np.nan, np.float32))])
case("dft_len_2d", [node("DFT", ["x", "L"])], [i64("L", [[4, 4]])], [("x", np.ones((1, 8, 1), np.float32))])
for st in (0, -1, I64_MAX):
    case(f"stft_step{st}", [node("STFT", ["x", "st", "", "fl"])], [i64("st", st), i64("fl", 4)], [("x", np.ones((1, 16, 1), np.float32))])
case("stft_frame_huge", [node("STFT", ["x", "st", "", "fl"])], [i64("st", 1), i64("fl", 2**40)], [("x", np.ones((1, 16, 1), np.float32))])
case("stft_frame0", [node("STFT", ["x", "st", "", "fl"])], [i64("st", 1), i64("fl", 0)], [("x", np.ones((1, 16, 1), np.float32))])
case("stft_noframe", [node("STFT", ["x", "st"])], [i64("st", 1)], [("x", np.ones((1, 16, 1), np.float32))])
case("stft_win_mismatch", [node("STFT", ["x", "st", "w", "fl"])], [i64("st", 1), f32("w", np.ones(3)), i64("fl", 4)], [("x", np.ones((1, 16, 1), np.float32))])
case("stft_empty_sig", [node("STFT", ["x", "st", "", "fl"])], [i64("st", 1), i64("fl", 1)], [("x", np.ones((0, 16, 1), np.float32))])
case("stft_many_frames", [node("STFT", ["x", "st", "", "fl"])], [i64("st", 1), i64("fl", 1024)], [("x", np.ones((1, 2**16, 1), np.float32))])
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    for s in (0, 1, -5, 2**40, I64_MAX):
        case(f"{op}_{s}", [node(op, ["s"], ["w"]), node("ReduceSum", ["w"], ["r"], keepdims=1), node("Add", ["x", "r"])], [i64("s", s)], [("x", np.ones((1,), np.float32))])
case("hann_dtype", [node("HannWindow", ["s"], ["w"], output_datatype=7), node("Cast", ["w"], ["wc"], to=1), node("ReduceSum", ["wc"], ["r"], keepdims=1), node("Add", ["x", "r"])], [i64("s", 4)], [("x", np.ones((1,), np.float32))])
for mels, dft, rate, lo, hi in ((I64_MAX, 1, 16000, 0, 8000), (2**40, 2**40, 16000, 0, 8000), (8, 512, 16000, 0, 1e30), (8, 512, 16000, np.nan, 8000), (8, 512, 0, 0, 8000), (8, I64_MAX, 16000, 0, 8000), (8, 512, 1, 0, 0), (2**31, 2, 16000, 0, 0)):
    case(f"mel_{mels}_{dft}_{rate}_{lo}_{hi}", [node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["w"]), node("ReduceSum", ["w"], ["rs"], keepdims=0), node("Add", ["x", "rs"])],
         [i64("m", mels), i64("d", dft), i64("r", rate), f32("lo", lo), f32("hi", hi)], [("x", np.ones((1,), np.float32))])
# ---- NMS / RoiAlign
bx = np.random.rand(1, 50, 4).astype(np.float32); sc = np.random.rand(1, 3, 50).astype(np.float32)
for mo in (I64_MAX, -1, 0):
    case(f"nms_max{mo}", [node("NonMaxSuppression", ["b", "s", "mo", "iou", "st"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
         [i64("mo", [mo]), f32("iou", [0.5]), f32("st", [0.1])], [("x", np.ones((1,), np.float32)), ("b", bx), ("s", sc)])
case("nms_nan", [node("NonMaxSuppression", ["b", "s", "mo"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
     [i64("mo", [10])], [("x", np.ones((1,), np.float32)), ("b", np.full((1, 50, 4), np.nan, np.float32)), ("s", np.full((1, 3, 50), np.nan, np.float32))])
case("nms_iou_nan", [node("NonMaxSuppression", ["b", "s", "mo", "iou"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
     [i64("mo", [10]), f32("iou", [np.nan])], [("x", np.ones((1,), np.float32)), ("b", bx), ("s", sc)])
case("nms_shape", [node("NonMaxSuppression", ["b", "s", "mo"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
     [i64("mo", [10])], [("x", np.ones((1,), np.float32)), ("b", bx), ("s", np.ones((1, 3, 49), np.float32))])
case("nms_mo_empty", [node("NonMaxSuppression", ["b", "s", "mo"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
     [c("mo", np.zeros((0,), np.int64))], [("x", np.ones((1,), np.float32)), ("b", bx), ("s", sc)])
case("nms_quadratic", [node("NonMaxSuppression", ["b", "s", "mo", "iou"], ["sel"]), node("Cast", ["sel"], ["sf"], to=1), node("ReduceSum", ["sf"], ["r"], keepdims=0), node("Add", ["x", "r"])],
     [i64("mo", [I64_MAX]), f32("iou", [1.0])], [("x", np.ones((1,), np.float32)), ("b", np.random.rand(1, 20000, 4).astype(np.float32)), ("s", np.random.rand(1, 1, 20000).astype(np.float32))])
rois = np.array([[0, 0, 3, 3]], np.float32)
for kw in ({"sampling_ratio": 2**31}, {"sampling_ratio": 100000}, {"output_height": 2**31, "output_width": 2**31}, {"output_height": 0}, {"sampling_ratio": -1}, {"spatial_scale": float("inf")}, {"mode": "min"}, {"output_height": 4096, "output_width": 4096, "sampling_ratio": 64}):
    case("roialign_" + "_".join(f"{k}{v}" for k, v in kw.items()), [node("RoiAlign", ["x", "rois", "bi"], **kw)], [f32("rois", rois), i64("bi", [0])], [x4])
case("roialign_bi_oob", [node("RoiAlign", ["x", "rois", "bi"])], [f32("rois", rois), i64("bi", [5])], [x4])
case("roialign_huge_roi", [node("RoiAlign", ["x", "rois", "bi"])], [f32("rois", [[-3e38, -3e38, 3e38, 3e38]]), i64("bi", [0])], [x4])
case("roialign_nan_roi", [node("RoiAlign", ["x", "rois", "bi"])], [f32("rois", [[np.nan, 0, 1, 1]]), i64("bi", [0])], [x4])
case("roialign_rank", [node("RoiAlign", ["x", "rois", "bi"])], [f32("rois", [0, 0, 1, 1]), i64("bi", [0])], [x4])
case("roialign_emptymap", [node("RoiAlign", ["x", "rois", "bi"])], [f32("rois", rois), i64("bi", [0])], [("x", np.ones((1, 2, 0, 4), np.float32))])
# ---- GridSample / AffineGrid
for mode in ("nearest", "bilinear", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for ac in (0, 1):
            g = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e10, 0.5, -1.5] * 4, np.float32).reshape(1, 4, 4, 2)
            case(f"grid_{mode}_{pad}_{ac}", [node("GridSample", ["x", "g"], mode=mode, padding_mode=pad, align_corners=ac)], [f32("g", g)], [x4], opset=16)
            case(f"grid1px_{mode}_{pad}_{ac}", [node("GridSample", ["x", "g"], mode=mode, padding_mode=pad, align_corners=ac)], [f32("g", g)], [("x", np.ones((1, 2, 1, 1), np.float32))], opset=16)
case("grid_bad_n", [node("GridSample", ["x", "g"])], [f32("g", np.zeros((2, 4, 4, 2)))], [x4], opset=16)
case("grid_empty_hw", [node("GridSample", ["x", "g"])], [f32("g", np.zeros((1, 4, 4, 2)))], [("x", np.ones((1, 2, 0, 4), np.float32))], opset=16)
case("grid_5d", [node("GridSample", ["x", "g"])], [f32("g", np.zeros((1, 4, 4, 4, 3)))], [("x", np.ones((1, 2, 4, 4, 4), np.float32))], opset=20)
for size in ([1, 2, 2**31, 2**31], [1, 2, -1, 4], [1, 2, 4], [1, 2, 3, 3, 3], [1], [2, 2, 4, 4], [1, 2, 0, 4], [1, 2, 2**21, 2**21, 2**21]):
    th = np.zeros((1, 2, 3), np.float32) if len(size) != 5 else np.zeros((1, 3, 4), np.float32)
    case(f"affine_{'_'.join(map(str, size))}", [node("AffineGrid", ["th", "sz"], ["g"]), node("ReduceSum", ["g"], ["r"], keepdims=0), node("Add", ["x", "r"])],
         [f32("th", th), i64("sz", size)], [("x", np.ones((1,), np.float32))], opset=20)
case("affine_theta_input", [node("AffineGrid", ["x", "sz"], ["g"]), node("ReduceSum", ["g"], ["y"], keepdims=0)], [i64("sz", [1, 1, 4, 4])], [("x", np.ones((1, 2, 3), np.float32))], opset=20)
# ---- norms
for G in (0, -1, 3, I64_MAX, 2):
    case(f"groupnorm_{G}", [node("GroupNormalization", ["x", "s", "b"], num_groups=G)], [f32("s", np.ones(2)), f32("b", np.zeros(2))], [x4], opset=21)
    case(f"groupnorm18_{G}", [node("GroupNormalization", ["x", "s", "b"], num_groups=G)], [f32("s", np.ones(max(1, min(G, 4)))), f32("b", np.zeros(max(1, min(G, 4))))], [x4], opset=18)
case("groupnorm_scale_short", [node("GroupNormalization", ["x", "s", "b"], num_groups=2)], [f32("s", np.ones(1)), f32("b", np.zeros(2))], [x4], opset=21)
case("groupnorm_rank1", [node("GroupNormalization", ["x", "s", "b"], num_groups=1)], [f32("s", np.ones(1)), f32("b", np.zeros(1))], [("x", np.ones((4,), np.float32))], opset=21)
case("groupnorm_c0", [node("GroupNormalization", ["x", "s", "b"], num_groups=1)], [f32("s", np.ones(0)), f32("b", np.zeros(0))], [("x", np.ones((1, 0, 4), np.float32))], opset=21)
case("groupnorm_nan", [node("GroupNormalization", ["x", "s", "b"], num_groups=1, epsilon=float("nan"))], [f32("s", np.ones(2)), f32("b", np.zeros(2))], [x4], opset=21)
for ax, p in ((I64_MAX, 2), (-5, 2), (1, 3), (1, 0), (-1, 1)):
    case(f"lpnorm_{ax}_{p}", [node("LpNormalization", ["x"], axis=ax, p=p)], [], [x4])
case("lpnorm_empty", [node("LpNormalization", ["x"], axis=1)], [], [("x", np.ones((1, 0, 4), np.float32))])
case("lpnorm_rank0", [node("LpNormalization", ["x"])], [], [("x", np.array(1, np.float32))])
for axes in ([I64_MAX], [0, 0], [], [-5], [0, 1, 2, 3]):
    case(f"mvn_{axes}", [node("MeanVarianceNormalization", ["x"], axes=axes)] if axes else [node("MeanVarianceNormalization", ["x"], axes=[])], [], [x4], opset=13)
case("mvn_rank1", [node("MeanVarianceNormalization", ["x"])], [], [("x", np.ones((4,), np.float32))], opset=13)
case("mvn_empty", [node("MeanVarianceNormalization", ["x"])], [], [("x", np.ones((1, 0, 4, 4), np.float32))], opset=13)
# ---- MaxUnpool
xi = np.zeros((1, 1, 2, 2), np.float32)
for nm, inits, kw in (("huge_idx", [i64("I", np.full((1, 1, 2, 2), I64_MAX))], {}), ("neg_idx", [i64("I", np.full((1, 1, 2, 2), -1))], {}),
                       ("outshape_huge", [i64("I", np.zeros((1, 1, 2, 2))), i64("os", [1, 1, 2**40, 2**40])], {}),
                       ("outshape_neg", [i64("I", np.zeros((1, 1, 2, 2))), i64("os", [1, 1, -4, 4])], {}),
                       ("outshape_rank", [i64("I", np.zeros((1, 1, 2, 2))), i64("os", [1, 1])], {}),
                       ("stride_huge", [i64("I", np.zeros((1, 1, 2, 2)))], {"strides": [I64_MAX, 1]}),
                       ("kernel_huge", [i64("I", np.zeros((1, 1, 2, 2)))], {"kernel_shape": [2**40, 2**40]}),
                       ("pads_huge", [i64("I", np.zeros((1, 1, 2, 2)))], {"pads": [I64_MAX, 0, I64_MAX, 0]}),
                       ("kernel_neg", [i64("I", np.zeros((1, 1, 2, 2)))], {"kernel_shape": [-2, 2]}),
                       ("stride0", [i64("I", np.zeros((1, 1, 2, 2)))], {"strides": [0, 0]}),
                       ("idx_shape", [i64("I", np.zeros((1, 1, 2)))], {})):
    kw.setdefault("kernel_shape", [2, 2]); kw.setdefault("strides", [2, 2])
    ins = ["x", "I"] + (["os"] if any(t.name == "os" for t in inits) else [])
    case(f"maxunpool_{nm}", [node("MaxUnpool", ins, **kw)], inits, [("x", xi)], opset=11)
case("maxunpool_emptyx", [node("MaxUnpool", ["x", "I"], kernel_shape=[2, 2], strides=[2, 2])], [i64("I", np.zeros((1, 1, 0, 2)))], [("x", np.zeros((1, 1, 0, 2), np.float32))], opset=11)
# ---- Det / Unique
case("det_nonsquare", [node("Det", ["x"])], [], [("x", np.ones((2, 3), np.float32))])
case("det_rank1", [node("Det", ["x"])], [], [("x", np.ones((3,), np.float32))])
case("det_nan", [node("Det", ["x"])], [], [("x", np.full((2, 3, 3), np.nan, np.float32))])
case("det_empty", [node("Det", ["x"])], [], [("x", np.ones((2, 0, 0), np.float32))])
case("det_inf", [node("Det", ["x"])], [], [("x", np.full((3, 3), np.inf, np.float32))])
case("det_expand_big", [node("Expand", ["one", "sh"], ["big"]), node("Det", ["big"], ["d"]), node("Add", ["x", "d"])], [f32("one", [1.0]), i64("sh", [3000, 3000])], [("x", np.ones((1,), np.float32))])
for ax in (I64_MAX, -3, 5):
    case(f"unique_axis{ax}", [node("Unique", ["x"], ["y", "i", "inv", "cnt"], axis=ax)], [], [x4], outs=("y", "i", "inv", "cnt"))
case("unique_nan", [node("Unique", ["x"], ["y", "i", "inv", "cnt"])], [], [("x", np.array([np.nan, 1, np.nan, 0, np.nan, 2] * 50, np.float32))], outs=("y", "i", "inv", "cnt"))
case("unique_empty", [node("Unique", ["x"], ["y", "i", "inv", "cnt"], axis=1)], [], [("x", np.ones((2, 0, 3), np.float32))], outs=("y", "i", "inv", "cnt"))
case("unique_empty_inner", [node("Unique", ["x"], ["y", "i", "inv", "cnt"], axis=0)], [], [("x", np.ones((5, 0), np.float32))], outs=("y", "i", "inv", "cnt"))
case("unique_scalar", [node("Unique", ["x"], ["y"])], [], [("x", np.array(3, np.float32))])
case("unique_big", [node("Expand", ["one", "sh"], ["big"]), node("Unique", ["big"], ["u"]), node("ReduceSum", ["u"], ["r"], keepdims=0), node("Add", ["x", "r"])], [c("one", np.ones(1, np.uint8)), i64("sh", [2**31])], [("x", np.ones((1,), np.float32))])
# ---- random
for op in ("RandomNormal", "RandomUniform"):
    for kw in ({"shape": [2**40, 2**40]}, {"shape": [10**12]}, {"shape": [-1]}, {}, {"shape": [2], "dtype": 7}, {"shape": [2], "dtype": 999}, {"shape": [2], "dtype": -5},
               {"shape": [2], "low": float("nan")}, {"shape": [2], "low": 2.0, "high": 1.0}, {"shape": [2], "mean": float("inf"), "scale": float("nan")}, {"shape": [I64_MAX, 2]}, {"shape": [0, 2**62]}, {"shape": [2], "dtype": 8}, {"shape": [2], "dtype": 22}, {"shape": [2], "dtype": 10}):
        case(f"{op}_" + "_".join(f"{k}{v}" for k, v in kw.items()), [node(op, [], ["r"], **kw), node("Cast", ["r"], ["rc"], to=1), node("ReduceSum", ["rc"], ["rs"], keepdims=0), node("Add", ["x", "rs"])], [], [("x", np.ones((1,), np.float32))])
    for kw in ({"dtype": 7}, {"dtype": 9}, {"dtype": 16}, {}):
        case(f"{op}Like_" + "_".join(f"{k}{v}" for k, v in kw.items()), [node(op + "Like", ["x"], ["r"], **kw), node("Cast", ["r"], ["rc"], to=1), node("Add", ["x", "rc"])], [], [x4])
case("randlike_int_in", [node("RandomUniformLike", ["xi"], ["r"]), node("Cast", ["r"], ["rc"], to=1), node("Add", ["x", "rc"])], [], [x4, ("xi", np.ones((1, 2, 4, 4), np.int64))])
for kw in ({"sample_size": 2**40}, {"sample_size": -1}, {"sample_size": I64_MAX}, {"dtype": 1}, {"dtype": 7, "sample_size": 3}):
    case("multinomial_" + "_".join(f"{k}{v}" for k, v in kw.items()), [node("Multinomial", ["p"], ["r"], **kw), node("Cast", ["r"], ["rc"], to=1), node("ReduceSum", ["rc"], ["rs"], keepdims=0), node("Add", ["x", "rs"])], [], [("x", np.ones((1,), np.float32)), ("p", np.random.rand(2, 5).astype(np.float32))])
for nm, p in (("nan", np.full((2, 5), np.nan, np.float32)), ("inf", np.full((2, 5), np.inf, np.float32)), ("ninf", np.full((2, 5), -np.inf, np.float32)), ("c0", np.ones((2, 0), np.float32)), ("b0", np.ones((0, 5), np.float32)), ("rank1", np.ones((5,), np.float32))):
    case("multinomial_" + nm, [node("Multinomial", ["p"], ["r"], sample_size=4), node("Cast", ["r"], ["rc"], to=1), node("ReduceSum", ["rc"], ["rs"], keepdims=0), node("Add", ["x", "rs"])], [], [("x", np.ones((1,), np.float32)), ("p", p)])
for nm, p, kw in (("nan", np.full((4,), np.nan, np.float32), {}), ("big", np.full((4,), 7, np.float32), {}), ("int", np.ones((4,), np.int64), {}), ("dtype_str", np.ones((4,), np.float32), {"dtype": 8}), ("dtype_bool", np.ones((4,), np.float32), {"dtype": 9}), ("dtype_i4", np.ones((4,), np.float32), {"dtype": 22})):
    case("bernoulli_" + nm, [node("Bernoulli", ["p"], ["r"], **kw), node("Cast", ["r"], ["rc"], to=1), node("ReduceSum", ["rc"], ["rs"], keepdims=0), node("Add", ["x", "rs"])], [], [("x", np.ones((1,), np.float32)), ("p", p)], opset=15)
# ---- RotaryEmbedding (ai.onnx 23)
X3 = np.random.rand(1, 4, 8).astype(np.float32)
cs = np.random.rand(4, 2).astype(np.float32)
for nm, kw, inits, ins in (("noheads", {}, [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], ["x", "c", "s"]),
                            ("heads0", {"num_heads": 0}, [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], ["x", "c", "s"]),
                            ("heads3", {"num_heads": 3}, [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], ["x", "c", "s"]),
                            ("headsneg", {"num_heads": -2}, [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], ["x", "c", "s"]),
                            ("headsbig", {"num_heads": I64_MAX}, [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], ["x", "c", "s"]),
                            ("pos_oob", {"num_heads": 2}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, 4]])], ["x", "c", "s", "p"]),
                            ("pos_neg", {"num_heads": 2}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, -1]])], ["x", "c", "s", "p"]),
                            ("pos_max", {"num_heads": 2}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, I64_MAX]])], ["x", "c", "s", "p"]),
                            ("pos_short", {"num_heads": 2}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1]])], ["x", "c", "s", "p"]),
                            ("cache_narrow", {"num_heads": 2}, [f32("c", np.ones((4, 1))), f32("s", np.ones((4, 1))), i64("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"]),
                            ("cache_mismatch", {"num_heads": 2}, [f32("c", np.ones((4, 2))), f32("s", np.ones((3, 2))), i64("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"]),
                            ("rot_odd", {"num_heads": 2, "rotary_embedding_dim": 3}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"]),
                            ("rot_big", {"num_heads": 2, "rotary_embedding_dim": I64_MAX - 1}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"]),
                            ("rot_neg", {"num_heads": 2, "rotary_embedding_dim": -2}, [f32("c", cs), f32("s", cs), i64("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"]),
                            ("cache_3d_batch", {"num_heads": 2}, [f32("c", np.ones((2, 4, 2))), f32("s", np.ones((2, 4, 2)))], ["x", "c", "s"]),
                            ("cache_rank0", {"num_heads": 2}, [f32("c", 1.0), f32("s", 1.0)], ["x", "c", "s"]),
                            ("pos_i32", {"num_heads": 2}, [f32("c", cs), f32("s", cs), c("p", np.array([[0, 1, 2, 3]], np.int32))], ["x", "c", "s", "p"]),
                            ("pos_float", {"num_heads": 2}, [f32("c", cs), f32("s", cs), f32("p", [[0, 1, 2, 3]])], ["x", "c", "s", "p"])):
    case("rope23_" + nm, [node("RotaryEmbedding", ins, **kw)], inits, [("x", X3)], opset=23)
case("rope23_4d_empty", [node("RotaryEmbedding", ["x", "c", "s"])], [f32("c", np.ones((1, 4, 0))), f32("s", np.ones((1, 4, 0)))], [("x", np.ones((1, 2, 4, 0), np.float32))], opset=23)
case("rope23_x_rank2", [node("RotaryEmbedding", ["x", "c", "s"])], [f32("c", np.ones((1, 4, 4))), f32("s", np.ones((1, 4, 4)))], [("x", np.ones((4, 8), np.float32))], opset=23)
# ---- com.microsoft RotaryEmbedding
for nm, kw, inits in (("pos_offset_max", {"num_heads": 2}, [i64("p", [I64_MAX]), f32("c", cs), f32("s", cs)]),
                      ("pos_offset_near", {"num_heads": 2}, [i64("p", [I64_MAX - 1]), f32("c", cs), f32("s", cs)]),
                      ("pos_offset_neg", {"num_heads": 2}, [i64("p", [-2]), f32("c", cs), f32("s", cs)]),
                      ("pos_oob", {"num_heads": 2}, [i64("p", [[0, 1, 2, 9]]), f32("c", cs), f32("s", cs)]),
                      ("pos_i32", {"num_heads": 2}, [c("p", np.array([0], np.int32)), f32("c", cs), f32("s", cs)]),
                      ("heads0", {}, [i64("p", [0]), f32("c", cs), f32("s", cs)]),
                      ("heads3", {"num_heads": 3}, [i64("p", [0]), f32("c", cs), f32("s", cs)]),
                      ("heads_big", {"num_heads": I64_MAX}, [i64("p", [0]), f32("c", cs), f32("s", cs)]),
                      ("rot_big", {"num_heads": 2, "rotary_embedding_dim": 2**62}, [i64("p", [0]), f32("c", cs), f32("s", cs)]),
                      ("cache0", {}, [i64("p", [0]), f32("c", np.ones((4, 0))), f32("s", np.ones((4, 0)))]),
                      ("cache_short", {"num_heads": 2}, [i64("p", [2]), f32("c", cs), f32("s", cs)]),
                      ("packed", {"num_heads": 2, "is_packed_batching": 1}, [i64("p", [0]), f32("c", cs), f32("s", cs)])):
    case("rope_ms_" + nm, [node("RotaryEmbedding", ["x", "p", "c", "s"], domain="com.microsoft", **kw)], inits, [("x", X3)], ms=True)
# ---- contrib norms / activations
h = np.ones(8, np.float32)
for nm, ins, inits, xin, kw in (
        ("ln_axis", ["x", "g", "b"], [f32("g", h), f32("b", h)], X3, {"axis": I64_MAX}),
        ("ln_scale_bad", ["x", "g", "b"], [f32("g", np.ones(3)), f32("b", h)], X3, {}),
        ("ln_eps_nan", ["x", "g", "b"], [f32("g", h), f32("b", h)], X3, {"epsilon": float("nan")}),
        ("ln_empty", ["x", "g", "b"], [f32("g", np.ones(0)), f32("b", np.ones(0))], np.ones((1, 4, 0), np.float32), {}),
        ("ln_rank0", ["x", "g"], [f32("g", 1.0)], np.array(1, np.float32), {}),
        ("sln_axis", ["x", "g"], [f32("g", h)], X3, {"axis": -4})):
    op = "SimplifiedLayerNormalization" if nm.startswith("sln") else "LayerNormalization"
    case(nm, [node(op, ins, **kw)], inits, [("x", xin)], opset=16)
for nm, op, ins, inits, xin in (
        ("skip_shape", "SkipLayerNormalization", ["x", "sk", "g", "b"], [f32("sk", np.ones((1, 3, 8))), f32("g", h), f32("b", h)], X3),
        ("skip_gamma", "SkipLayerNormalization", ["x", "sk", "g", "b"], [f32("sk", np.ones((1, 4, 8))), f32("g", np.ones(3)), f32("b", h)], X3),
        ("skip_bias", "SkipLayerNormalization", ["x", "sk", "g", "b", "bb"], [f32("sk", np.ones((1, 4, 8))), f32("g", h), f32("b", h), f32("bb", np.ones(2))], X3),
        ("skip_rank1", "SkipLayerNormalization", ["x", "sk", "g"], [f32("sk", np.ones(8)), f32("g", h)], np.ones(8, np.float32)),
        ("skip_bcast", "SkipLayerNormalization", ["x", "sk", "g"], [f32("sk", np.ones((1, 1, 8))), f32("g", h)], X3),
        ("skip_empty", "SkipLayerNormalization", ["x", "sk", "g"], [f32("sk", np.ones((1, 0, 8))), f32("g", h)], np.ones((1, 0, 8), np.float32)),
        ("skip_h0", "SkipSimplifiedLayerNormalization", ["x", "sk", "g"], [f32("sk", np.ones((1, 4, 0))), f32("g", np.ones(0))], np.ones((1, 4, 0), np.float32)),
        ("gelu_bias", "BiasGelu", ["x", "bb"], [f32("bb", np.ones(3))], X3),
        ("gelu_nobias", "BiasGelu", ["x"], [], X3),
        ("fastgelu_bias2d", "FastGelu", ["x", "bb"], [f32("bb", np.ones((1, 8)))], X3),
        ("fastgelu_empty", "FastGelu", ["x", "bb"], [f32("bb", np.ones(0))], np.ones((2, 0), np.float32)),
        ("quickgelu_nan", "QuickGelu", ["x"], [], np.full((4,), np.nan, np.float32)),
        ("fmm_shapes", "FusedMatMul", ["x", "w"], [f32("w", np.ones((3, 2)))], X3),
        ("fmm_rank1", "FusedMatMul", ["x", "w"], [f32("w", np.ones((8,)))], X3),
        ("fmm_transbatch", "FusedMatMul", ["x", "w"], [f32("w", np.ones((8, 2)))], X3)):
    kw = {"transBatchA": 1} if nm == "fmm_transbatch" else {}
    if nm == "fmm_rank1": kw = {"transA": 1, "alpha": float("nan")}
    case(nm, [node(op, ins, domain="com.microsoft", **kw)], inits, [("x", xin)], ms=True)
case("fmm_scalar", [node("FusedMatMul", ["x", "w"], domain="com.microsoft", transA=1, transB=1)], [f32("w", 1.0)], [("x", np.array(1, np.float32))], ms=True)
# Attention
W = np.ones((8, 24), np.float32)
for nm, kw, ins, inits, xin in (
        ("heads0", {"num_heads": 0}, ["x", "w"], [f32("w", W)], X3),
        ("heads5", {"num_heads": 5}, ["x", "w"], [f32("w", W)], X3),
        ("heads_big", {"num_heads": I64_MAX}, ["x", "w"], [f32("w", W)], X3),
        ("qkv_big", {"num_heads": 1, "qkv_hidden_sizes": [2**62, 2**62, 2**62]}, ["x", "w"], [f32("w", W)], X3),
        ("qkv_max", {"num_heads": 1, "qkv_hidden_sizes": [I64_MAX, I64_MAX, 2]}, ["x", "w"], [f32("w", W)], X3),
        ("qkv_neg", {"num_heads": 1, "qkv_hidden_sizes": [8, 8, -8]}, ["x", "w"], [f32("w", W)], X3),
        ("w_rank", {"num_heads": 2}, ["x", "w"], [f32("w", np.ones(24))], X3),
        ("bias_bad", {"num_heads": 2}, ["x", "w", "b"], [f32("w", W), f32("b", np.ones(5))], X3),
        ("mask_i64", {"num_heads": 2}, ["x", "w", "", "m"], [f32("w", W), i64("m", [4])], X3),
        ("mask_4d", {"num_heads": 2}, ["x", "w", "", "m"], [f32("w", W), c("m", np.ones((1, 1, 4, 4), np.int32))], X3),
        ("mask_bigvals", {"num_heads": 2}, ["x", "w", "", "m"], [f32("w", W), c("m", np.array([2**31 - 1, -2**31], np.int32))], X3),
        ("mask_bad", {"num_heads": 2}, ["x", "w", "", "m"], [f32("w", W), c("m", np.ones((3,), np.int32))], X3),
        ("past_bad", {"num_heads": 2}, ["x", "w", "", "", "past"], [f32("w", W), f32("past", np.ones((2, 1, 2, 3, 5)))], X3),
        ("past_ok", {"num_heads": 2, "unidirectional": 1}, ["x", "w", "", "", "past"], [f32("w", W), f32("past", np.ones((2, 1, 2, 3, 4)))], X3),
        ("abias_bad", {"num_heads": 2}, ["x", "w", "", "", "", "ab"], [f32("w", W), f32("ab", np.ones((1, 2, 4, 5)))], X3),
        ("x_rank2", {"num_heads": 2}, ["x", "w"], [f32("w", W)], np.ones((4, 8), np.float32)),
        ("empty_seq", {"num_heads": 2, "unidirectional": 1}, ["x", "w"], [f32("w", W)], np.ones((1, 0, 8), np.float32)),
        ("nan", {"num_heads": 2, "scale": float("nan")}, ["x", "w"], [f32("w", W)], np.full((1, 4, 8), np.nan, np.float32)),
        ("pastseq", {"num_heads": 2}, ["x", "w", "", "", "", "", "ps"], [f32("w", W), c("ps", np.array(1, np.int32))], X3),
        ("w0", {"num_heads": 2}, ["x", "w"], [f32("w", np.ones((8, 0)))], X3)):
    case("attn_" + nm, [node("Attention", ins, domain="com.microsoft", **kw)], inits, [("x", xin)], ms=True)
case("attn_longseq_mask", [node("Attention", ["x", "w", "", "m"], domain="com.microsoft", num_heads=1)], [f32("w", np.ones((1, 3))), c("m", np.array([2**31 - 1], np.int32))], [("x", np.ones((1, 40000, 1), np.float32))], ms=True)
case("attn_longseq", [node("Attention", ["x", "w"], domain="com.microsoft", num_heads=1)], [f32("w", np.ones((1, 3)))], [("x", np.ones((1, 40000, 1), np.float32))], ms=True)
# EmbedLayerNormalization
ids = np.array([[0, 1, 2, 3]], np.int32)
we = np.ones((10, 8), np.float32); pe = np.ones((4, 8), np.float32); se = np.ones((2, 8), np.float32)
for nm, ins, inits in (
        ("ok", ["ids", "seg", "we", "pe", "se", "g", "b"], [c("seg", np.zeros((1, 4), np.int32)), f32("we", we), f32("pe", pe), f32("se", se), f32("g", h), f32("b", h)]),
        ("id_oob", ["ids2", "", "we", "pe", "", "g", "b"], [c("ids2", np.array([[0, 1, 2, 99]], np.int32)), f32("we", we), f32("pe", pe), f32("g", h), f32("b", h)]),
        ("id_neg", ["ids2", "", "we", "pe", "", "g", "b"], [c("ids2", np.array([[0, 1, 2, -2**31]], np.int32)), f32("we", we), f32("pe", pe), f32("g", h), f32("b", h)]),
        ("pos_short", ["ids", "", "we", "pe2", "", "g", "b"], [f32("we", we), f32("pe2", np.ones((2, 8))), f32("g", h), f32("b", h)]),
        ("no_pos", ["ids", "", "we", "", "", "g", "b"], [f32("we", we), f32("g", h), f32("b", h)]),
        ("no_word", ["ids", "", "", "pe", "", "g", "b"], [f32("pe", pe), f32("g", h), f32("b", h)]),
        ("no_gamma", ["ids", "", "we", "pe"], [f32("we", we), f32("pe", pe)]),
        ("seg_oob", ["ids", "seg", "we", "pe", "se", "g", "b"], [c("seg", np.full((1, 4), 7, np.int32)), f32("we", we), f32("pe", pe), f32("se", se), f32("g", h), f32("b", h)]),
        ("seg_noemb", ["ids", "seg", "we", "pe", "", "g", "b"], [c("seg", np.full((1, 4), 7, np.int32)), f32("we", we), f32("pe", pe), f32("g", h), f32("b", h)]),
        ("posids_oob", ["ids", "", "we", "pe", "", "g", "b", "", "pid"], [f32("we", we), f32("pe", pe), f32("g", h), f32("b", h), c("pid", np.array([[0, 1, 2, 50]], np.int32))]),
        ("posids_shape", ["ids", "", "we", "pe", "", "g", "b", "", "pid"], [f32("we", we), f32("pe", pe), f32("g", h), f32("b", h), c("pid", np.array([0, 1], np.int32))]),
        ("mask_shape", ["ids", "", "we", "pe", "", "g", "b", "m"], [f32("we", we), f32("pe", pe), f32("g", h), f32("b", h), c("m", np.array([1], np.int32))]),
        ("table_1d", ["ids", "", "we1", "pe", "", "g", "b"], [f32("we1", np.ones(8)), f32("pe", pe), f32("g", h), f32("b", h)]),
        ("hidden_mismatch", ["ids", "", "we", "pe3", "", "g", "b"], [f32("we", we), f32("pe3", np.ones((4, 5))), f32("g", h), f32("b", h)])):
    case("embed_" + nm, [node("EmbedLayerNormalization", ins, ["y", "mi"], domain="com.microsoft")], inits, [("ids", ids)], ms=True, outs=("y", "mi"))
# ---- QDQ 23
for nm, nodes, inits in (
        ("q_out_dtype_big", [node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=2**32 + 2), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.1)]),
        ("q_out_dtype_bad", [node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=1), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.1)]),
        ("q_out_dtype_999", [node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=999), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.1)]),
        ("q_precision", [node("QuantizeLinear", ["x", "s"], ["q"], precision=7), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.1)]),
        ("q_precision_big", [node("QuantizeLinear", ["x", "s"], ["q"], precision=-2**40), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.1)]),
        ("dq_out_dtype_int", [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"], output_dtype=7)], [f32("s", 0.1)]),
        ("dq_out_dtype_str", [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"], output_dtype=8)], [f32("s", 0.1)]),
        ("dq_out_dtype_f16", [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"], output_dtype=10)], [f32("s", 0.1)]),
        ("q_block_huge", [node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=I64_MAX), node("DequantizeLinear", ["q", "s"], axis=1, block_size=I64_MAX)], [f32("s", np.full((1, 1, 4, 4), 0.1))]),
        ("q_block_neg", [node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=-2), node("DequantizeLinear", ["q", "s"])], [f32("s", np.full((1, 1, 4, 4), 0.1))]),
        ("q_axis_big", [node("QuantizeLinear", ["x", "s"], ["q"], axis=I64_MAX), node("DequantizeLinear", ["q", "s"])], [f32("s", np.full((2,), 0.1))]),
        ("q_scale_nan", [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"])], [f32("s", np.nan)]),
        ("q_scale_0", [node("QuantizeLinear", ["x", "s"], ["q"]), node("DequantizeLinear", ["q", "s"])], [f32("s", 0.0)]),
        ("q_zp_i4", [node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"])], [f32("s", 0.1), c("z", np.array(1, np.int8))]),
        ("q_block_blocks", [node("QuantizeLinear", ["x", "s"], ["q"], axis=2, block_size=3), node("DequantizeLinear", ["q", "s"], axis=2, block_size=3)], [f32("s", np.full((1, 2, 1, 4), 0.1))]),
        ("q_saturate_f8", [node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=0), node("DequantizeLinear", ["q", "s", "z"])], [f32("s", 1e-30), c("z", np.array(0, np.uint8))])):
    case(nm, nodes, inits, [x4], opset=23)

# ---------------------------------------------------------------------------------------------------------------
res = []
def runq(args, timeout=20):
    t0 = time.time()
    # Own process group: a timeout kills qtool too, not only /usr/bin/time (whose child would keep the pipes open).
    p = subprocess.Popen(["/usr/bin/time", "-f", "MAXRSS %M", QT, "-q"] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        rc, err = "TIMEOUT", ""
    rss, lines = 0, []
    for line in err.splitlines():
        if line.startswith("MAXRSS "):
            rss = int(line.split()[1]) // 1024
        elif not line.startswith("Command exited with non-zero status"):  # /usr/bin/time's own line
            lines.append(line)
    return rc, lines, time.time() - t0, rss

bad_count = total = 0
for name, m, inputs, modes in cases:
    if ONLY and not re.search(ONLY, name): continue
    path = os.path.join(D, name + ".onnx")
    open(path, "wb").write(m.SerializeToString())
    args = ["run", path, "-o", os.path.join(D, "out")]
    for n, a in inputs:
        f = os.path.join(D, f"{name}.{n}.npy"); np.save(f, a); args += ["-i", f"{n}={f}"]
    for mode, a in (("run", args), ("calib", ["calibrate", path, "--random", "1", "-o", os.path.join(D, "c.json")]),
                    ("quant", ["quantize", path, "--random", "1", "-o", os.path.join(D, "q.onnx")])):
        if mode not in COMMANDS or (mode == "quant" and "calib" not in modes):
            continue
        rc, lines, dt, rss = runq(a)
        bad = rc not in (0, 2) or (rc == 2 and len(lines) != 1) or (rc == 0 and lines) or dt > 20 or rss > 2000
        tag = "BAD " if bad else "ok  "
        first = lines[0][:220] if lines else ""
        more = f" (+{len(lines)-1} lines)" if len(lines) > 1 else ""
        print(f"{tag}{name:40s} {mode:5s} rc={rc} {dt:5.1f}s {rss:5d}MB {first}{more}", flush=True)
        bad_count += bad
        total += 1
print(f"\n{total} runs, {bad_count} BAD")
