#!/usr/bin/python3
"""Prints one line per 2-D Conv of an ONNX model, for tests/bench/bench_conv_layouts:
C H W M KH KW stride pad_top pad_left pad_bottom pad_right group (shapes by ONNX shape inference; --input NAME=FILE.npy
fixes a dynamic input's shape).
usage: conv_shapes.py MODEL [--input NAME=FILE.npy] > shapes.txt"""
import argparse

import numpy as np
import onnx
from onnx import helper, shape_inference

ap = argparse.ArgumentParser()
ap.add_argument('model')
ap.add_argument('--input', action='append', default=[])
args = ap.parse_args()
m = onnx.load(args.model)
for spec in args.input:
    name, path = spec.split('=', 1)
    shape = np.load(path).shape
    for i in m.graph.input:
        if i.name == name:
            for d, v in zip(i.type.tensor_type.shape.dim, shape):
                d.ClearField('dim_param')
                d.dim_value = v
m = shape_inference.infer_shapes(m)
values = list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)
shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}
weights = {t.name: list(t.dims) for t in m.graph.initializer}
for n in m.graph.node:  # weights given as Constant nodes (PaddlePaddle exports)
    if n.op_type == 'Constant':
        for a in n.attribute:
            if a.name == 'value':
                weights[n.output[0]] = list(a.t.dims)
for n in m.graph.node:
    if n.op_type != 'Conv' or n.input[1] not in weights or len(shapes.get(n.input[0], [])) != 4:
        continue
    a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
    w, x = weights[n.input[1]], shapes[n.input[0]]
    pads, strides = a.get('pads', [0, 0, 0, 0]), a.get('strides', [1, 1])
    if strides[0] != strides[1] or 'auto_pad' in a and a['auto_pad'] not in (b'NOTSET', 'NOTSET'):
        continue
    print(x[1], x[2], x[3], w[0], w[2], w[3], strides[0], pads[0], pads[1], pads[2], pads[3], a.get('group', 1))
