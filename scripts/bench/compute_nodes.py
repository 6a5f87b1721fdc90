#!/usr/bin/python3
"""Lists a model's compute nodes with the shapes of their inputs, for tests/bench/bench_kernels.

usage: compute_nodes.py MODEL NAME=INPUT.npy [...] --out NODES.json

Every intermediate value is exposed as a graph output and the model is run once in ONNX Runtime
(scripts/ort/ort_run.mjs, no files written) to learn the runtime shape of each; the JSON lists, per
node whose op is a compute kernel, its index in the graph and the shape and dtype of each input.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import shape_inference

COMPUTE_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
               "GlobalMaxPool", "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN", "Softmax",
               "LogSoftmax", "Hardmax", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
               "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "Resize",
               "Upsample", "LSTM", "GRU", "RNN", "Einsum"}
NP_TO_ONNX = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9, "float64": 11}


def main():
    args = sys.argv[1:]
    out = args[args.index("--out") + 1]
    model_path = args[0]
    inputs = [a for a in args[1:] if "=" in a]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model = onnx.load(model_path)
    inferred = shape_inference.infer_shapes(model)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    existing = {o.name for o in model.graph.output}
    consts = {i.name for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            consts.update(n.output)
            continue
        for o in n.output:
            if o and o not in existing and types.get(o):
                model.graph.output.append(onnx.helper.make_tensor_value_info(o, types[o], None))
                existing.add(o)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all_outputs.onnx")
        onnx.save(model, path)
        cmd = ["node", os.path.join(root, "scripts/ort/ort_run.mjs"), path]
        for i in inputs:
            cmd += ["--input", i]
        res = json.loads(subprocess.check_output(cmd).decode().strip().splitlines()[-1])
    shapes = {k: (v["shape"], v["dtype"]) for k, v in res["outputs"].items()}
    for i in inputs:
        name, f = i.split("=", 1)
        a = np.load(f, mmap_mode="r")
        shapes[name] = (list(a.shape), str(a.dtype))
    nodes = []
    for idx, n in enumerate(model.graph.node):
        if n.op_type not in COMPUTE_OPS:
            continue
        ins = []
        for name in n.input:
            if not name or name in consts:
                ins.append(None)
            elif name in shapes:
                ins.append({"shape": shapes[name][0], "dtype": shapes[name][1]})
            else:
                ins.append({"missing": True})
        nodes.append({"index": idx, "op": n.op_type, "inputs": ins})
    with open(out, "w") as f:
        json.dump({"model": os.path.abspath(model_path), "nodes": nodes}, f)


if __name__ == "__main__":
    main()
