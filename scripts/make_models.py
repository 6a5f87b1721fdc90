#!/usr/bin/python3
"""Generates the tiny bundled models in models/ (deterministic: fixed seeds; run with Debian's python3).

usage: /usr/bin/python3 scripts/make_models.py [OUTPUT_DIR]   (default: models/ next to scripts/)

Each model is small (< 1 MB) and exists to exercise one thing in tests and the demo:
  tiny_conv.onnx       Conv -> Relu -> Conv -> Add (residual) -> GlobalAveragePool -> Flatten -> Gemm, float,
                       opset 13, input `input` [N,3,32,32], output `logits` [N,10]
  tiny_if.onnx         an If whose branches hold a MatMul each (one weight an outer-scope initializer, one a
                       Constant inside the else branch), opset 13, input `x` [N,16], output `y` [N,8]
  tiny_loop.onnx       a Loop running a MatMul+Tanh cell `steps` times (weight as a Constant in the body),
                       opset 13, inputs `x` [N,8] and `steps` int64 scalar, output `h` [N,8]
  tiny_qdq.onnx        already quantized in QDQ form: int8 per-channel weights (DequantizeLinear axis=0) and
                       uint8 activation QuantizeLinear/DequantizeLinear pairs, opset 13, input `input` [N,3,16,16]
  tiny_external.onnx   a two-layer MLP whose weights live in tiny_external.data (external data), opset 13,
                       input `x` [N,64], output `y` [N,10]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 13)]
PRODUCER = "qtool scripts/make_models.py"


def he(rng, shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def init(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def model(graph, full_check=True):
    m = helper.make_model(graph, opset_imports=OPSET, producer_name=PRODUCER, producer_version="1")
    m.ir_version = 7  # what ONNX 1.8+ writes for opset 13; readable by every runtime we test with
    onnx.checker.check_model(m, full_check=full_check)
    return m


def tiny_conv(rng):
    w1, b1 = he(rng, (8, 3, 3, 3), 27), (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2, b2 = he(rng, (8, 8, 3, 3), 72), (rng.standard_normal(8) * 0.1).astype(np.float32)
    w3, b3 = he(rng, (10, 8), 8), (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["conv2", "relu1"], ["add"], name="add"),
        helper.make_node("GlobalAveragePool", ["add"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    g = helper.make_graph(
        nodes, "tiny_conv",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [init("conv1.weight", w1), init("conv1.bias", b1), init("conv2.weight", w2), init("conv2.bias", b2),
         init("fc.weight", w3), init("fc.bias", b3)])
    return model(g)


def tiny_if(rng):
    w_then = he(rng, (16, 8), 16)
    w_else = he(rng, (16, 8), 16)
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_then"], ["then_mm"], name="then_matmul"),
         helper.make_node("Relu", ["then_mm"], ["then_out"], name="then_relu")],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, ["N", 8])])
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["w_else"], name="else_weight", value=init("w_else", w_else)),
         helper.make_node("MatMul", ["x", "w_else"], ["else_mm"], name="else_matmul"),
         helper.make_node("Sigmoid", ["else_mm"], ["else_out"], name="else_sigmoid")],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, ["N", 8])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(
        nodes, "tiny_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [init("w_then", w_then), init("zero", np.array(0, dtype=np.float32))])
    return model(g)


def tiny_loop(rng):
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], name="cell_weight", value=init("w", w)),
         helper.make_node("MatMul", ["h_in", "w"], ["mm"], name="cell_matmul"),
         helper.make_node("Add", ["mm", "x"], ["pre"], name="cell_add"),
         helper.make_node("Tanh", ["pre"], ["h_out"], name="cell_tanh"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going")],
        "cell",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, None),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, ["N", 8])])
    nodes = [helper.make_node("Loop", ["steps", "true", "x"], ["h"], name="loop", body=body)]
    g = helper.make_graph(
        nodes, "tiny_loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8]),
         helper.make_tensor_value_info("steps", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 8])],
        [init("true", np.array(True))])
    # ONNX 1.12's strict shape inference infers the body's condition as [1] while the spec (and ONNX Runtime)
    # use a scalar, so only the structural checker runs here.
    return model(g, full_check=False)


def conv2d(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # N,C,H,W,kh,kw
    return np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]


def per_channel_int8(w):
    scale = (np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 127.0).astype(np.float32)
    q = np.clip(np.round(w / scale.reshape((-1,) + (1,) * (w.ndim - 1))), -127, 127).astype(np.int8)
    return q, scale


def tiny_qdq(rng):
    w1 = he(rng, (8, 3, 3, 3), 27)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = he(rng, (10, 8), 8)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    q1, s1 = per_channel_int8(w1)
    q2, s2 = per_channel_int8(w2)
    # Activation scales from a float forward pass on fixed random inputs in [0, 1).
    x = rng.random((8, 3, 16, 16), dtype=np.float32)
    relu = np.maximum(conv2d(x, w1, b1, 1), 0)
    s_in, s_relu = np.float32(1.0 / 255.0), np.float32(relu.max() / 255.0)
    u8zero = np.array(0, dtype=np.uint8)
    nodes = [
        helper.make_node("QuantizeLinear", ["input", "input.scale", "u8.zero"], ["input.q"], name="input_q"),
        helper.make_node("DequantizeLinear", ["input.q", "input.scale", "u8.zero"], ["input.dq"], name="input_dq"),
        helper.make_node("DequantizeLinear", ["conv.weight.q", "conv.weight.scale", "conv.weight.zero"],
                         ["conv.weight.dq"], name="conv_weight_dq", axis=0),
        helper.make_node("Conv", ["input.dq", "conv.weight.dq", "conv.bias"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("QuantizeLinear", ["relu", "relu.scale", "u8.zero"], ["relu.q"], name="relu_q"),
        helper.make_node("DequantizeLinear", ["relu.q", "relu.scale", "u8.zero"], ["relu.dq"], name="relu_dq"),
        helper.make_node("GlobalAveragePool", ["relu.dq"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("DequantizeLinear", ["fc.weight.q", "fc.weight.scale", "fc.weight.zero"],
                         ["fc.weight.dq"], name="fc_weight_dq", axis=0),
        helper.make_node("Gemm", ["flat", "fc.weight.dq", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    g = helper.make_graph(
        nodes, "tiny_qdq",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [init("input.scale", np.array(s_in)), init("u8.zero", u8zero), init("relu.scale", np.array(s_relu)),
         init("conv.weight.q", q1), init("conv.weight.scale", s1), init("conv.weight.zero", np.zeros(8, np.int8)),
         init("conv.bias", b1),
         init("fc.weight.q", q2), init("fc.weight.scale", s2), init("fc.weight.zero", np.zeros(10, np.int8)),
         init("fc.bias", b2)])
    return model(g)


def tiny_external(rng):
    w1, b1 = he(rng, (64, 128), 64), (rng.standard_normal(128) * 0.1).astype(np.float32)
    w2, b2 = he(rng, (128, 10), 128), (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["mm1"], name="fc1"),
        helper.make_node("Add", ["mm1", "fc1.bias"], ["fc1.out"], name="fc1_bias"),
        helper.make_node("Relu", ["fc1.out"], ["relu"], name="relu"),
        helper.make_node("MatMul", ["relu", "fc2.weight"], ["mm2"], name="fc2"),
        helper.make_node("Add", ["mm2", "fc2.bias"], ["y"], name="fc2_bias"),
    ]
    g = helper.make_graph(
        nodes, "tiny_external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        [init("fc1.weight", w1), init("fc1.bias", b1), init("fc2.weight", w2), init("fc2.bias", b2)])
    return model(g)


def save(m, out_dir, name, external=False):
    path = os.path.join(out_dir, name)
    if external:
        data = name.replace(".onnx", ".data")
        if os.path.exists(os.path.join(out_dir, data)):
            os.remove(os.path.join(out_dir, data))  # onnx appends to an existing data file
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=1024)
    else:
        onnx.save_model(m, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                    "models")
    os.makedirs(out_dir, exist_ok=True)
    # One generator per model, so adding a model never changes the others.
    save(tiny_conv(np.random.default_rng(1)), out_dir, "tiny_conv.onnx")
    save(tiny_if(np.random.default_rng(2)), out_dir, "tiny_if.onnx")
    save(tiny_loop(np.random.default_rng(3)), out_dir, "tiny_loop.onnx")
    save(tiny_qdq(np.random.default_rng(4)), out_dir, "tiny_qdq.onnx")
    save(tiny_external(np.random.default_rng(5)), out_dir, "tiny_external.onnx", external=True)


if __name__ == "__main__":
    main()
