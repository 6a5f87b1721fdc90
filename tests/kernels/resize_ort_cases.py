#!/usr/bin/python3
"""Writes tests/kernels/resize_ort_cases.inc: ONNX Runtime 1.30's outputs (CPU, one thread) for a table of Resize and
Upsample nodes, which tests/kernels/resize_test.cc requires qtool to reproduce bit for bit.

Each case is one node on an input made by kernel_harness's random_tensor(shape, seed) (xorshift64*, values in
[-1, 1) with full mantissas, reproduced below), so the .inc holds only the parameters and ORT's output bits.
Run it again after changing the table (needs node + onnxruntime-node: scripts/setup-ort.sh, and python3-onnx).

usage: resize_ort_cases.py [OUT.inc]
"""
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'quantize'))
import qtest  # noqa: E402

M64 = (1 << 64) - 1


def random_tensor(shape, seed):
    """kernel_harness.cc's random_tensor(shape, seed, -1, 1), bit for bit."""
    state = 0x9E3779B97F4A7C15 ^ ((seed * 0xBF58476D1CE4E5B9) & M64)
    out = np.empty(int(np.prod(shape)), np.float32)
    for i in range(out.size):
        state ^= state >> 12
        state ^= (state << 25) & M64
        state ^= state >> 27
        r = (state * 0x2545F4914F6CDD1D) & M64
        # lo + (hi - lo) * float(r >> 40) * 2^-24 in float: exact for lo = -1, hi = 1.
        out[i] = np.float32(-1) + np.float32(2) * np.float32(r >> 40) * np.float32(1 / 16777216)
    return out.reshape(shape)


CASES = []


def case(name, shape, mode, opset=13, op='Resize', scales=None, sizes=None, roi=None, **attrs):
    CASES.append(dict(name=name, shape=shape, mode=mode, opset=opset, op=op, scales=scales, sizes=sizes, roi=roi,
                      attrs=attrs))


NCHW = [1, 2, 5, 7]
# Linear, NCHW: every coordinate mode, up and down, integer and not, scales and sizes (ORT's bilinear kernel).
case('linear_half_pixel_up2x_scales', NCHW, 'linear', scales=[1, 1, 2, 2])
case('linear_half_pixel_up2x_sizes', [1, 2, 6, 6], 'linear', sizes=[1, 2, 12, 12])
case('linear_half_pixel_up_noninteger', NCHW, 'linear', sizes=[1, 2, 11, 13])
case('linear_half_pixel_down', [1, 2, 9, 11], 'linear', scales=[1, 1, 0.6, 0.45])
case('linear_half_pixel_down_sizes', [1, 2, 9, 11], 'linear', sizes=[1, 2, 4, 3])
case('linear_half_pixel_h_only', NCHW, 'linear', scales=[1, 1, 1.7, 1])
case('linear_half_pixel_scale_not_1_same_width', NCHW, 'linear', scales=[1, 1, 2, 1.1])
case('linear_pytorch_half_pixel_up', NCHW, 'linear', sizes=[1, 2, 8, 15],
     coordinate_transformation_mode='pytorch_half_pixel')
case('linear_pytorch_half_pixel_down_to_1', NCHW, 'linear', sizes=[1, 2, 1, 3],
     coordinate_transformation_mode='pytorch_half_pixel')
case('linear_align_corners_up', NCHW, 'linear', scales=[1, 1, 2.5, 1.5], coordinate_transformation_mode='align_corners')
case('linear_align_corners_down', [1, 2, 9, 11], 'linear', scales=[1, 1, 0.6, 0.5],
     coordinate_transformation_mode='align_corners')
case('linear_align_corners_to_1', NCHW, 'linear', sizes=[1, 2, 1, 4], coordinate_transformation_mode='align_corners')
case('linear_asymmetric_up', NCHW, 'linear', scales=[1, 1, 1.5, 2.5], coordinate_transformation_mode='asymmetric')
case('linear_asymmetric_down', [1, 2, 9, 11], 'linear', sizes=[1, 2, 5, 4], coordinate_transformation_mode='asymmetric')
case('linear_tf_half_pixel_for_nn', NCHW, 'linear', scales=[1, 1, 1.5, 2],
     coordinate_transformation_mode='tf_half_pixel_for_nn')
case('linear_half_pixel_symmetric', NCHW, 'linear', opset=19, scales=[1, 1, 0.6, 1.7],
     coordinate_transformation_mode='half_pixel_symmetric')
case('linear_tf_crop_and_resize', NCHW, 'linear', sizes=[1, 2, 6, 9], roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3],
     coordinate_transformation_mode='tf_crop_and_resize', extrapolation_value=-3.5)
case('linear_rank2', [6, 5], 'linear', scales=[1.5, 2.2])
case('linear_batch2_scales_trunc', [2, 3, 10, 9], 'linear', scales=[1, 1, 0.7, 1.3])  # 10 * 0.7f is 7.0f
case('linear_nhwc', [1, 5, 6, 3], 'linear', scales=[1, 1.5, 0.7, 1])
case('linear_rank3_trilinear', [3, 4, 5], 'linear', scales=[1.5, 0.75, 2])
case('linear_rank5_trilinear', [1, 2, 3, 4, 5], 'linear', sizes=[1, 2, 5, 6, 4],
     coordinate_transformation_mode='align_corners')
case('linear_opset10', NCHW, 'linear', opset=10, scales=[1, 1, 2, 1.5])
case('linear_opset10_down', [1, 2, 9, 11], 'linear', opset=10, scales=[1, 1, 0.5, 0.7])
case('linear_opset11', NCHW, 'linear', opset=11, sizes=[1, 2, 9, 10])
case('linear_upsample9', NCHW, 'linear', op='Upsample', opset=9, scales=[1, 1, 2, 3])
case('linear_upsample7_attr', NCHW, 'linear', op='Upsample', opset=7, scales=[1, 1, 1.5, 2])
case('linear_opset18_axes_sizes', NCHW, 'linear', opset=18, sizes=[9, 4], axes=[3, 2])
case('linear_opset18_not_larger', NCHW, 'linear', opset=18, sizes=[8, 8], axes=[2, 3],
     keep_aspect_ratio_policy='not_larger')
case('linear_opset18_not_smaller', NCHW, 'linear', opset=18, sizes=[8, 8], axes=[2, 3],
     keep_aspect_ratio_policy='not_smaller')
# Nearest: every nearest_mode and coordinate mode (ORT's gather with float coordinates).
for nm in ('round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'):
    case(f'nearest_{nm}_up', NCHW, 'nearest', sizes=[1, 2, 12, 16], nearest_mode=nm)
    case(f'nearest_{nm}_down', [1, 2, 9, 11], 'nearest', scales=[1, 1, 0.6, 0.45], nearest_mode=nm)
case('nearest_asymmetric_floor_2x', NCHW, 'nearest', scales=[1, 1, 2, 2], coordinate_transformation_mode='asymmetric',
     nearest_mode='floor')
case('nearest_align_corners', NCHW, 'nearest', sizes=[1, 2, 8, 11], coordinate_transformation_mode='align_corners')
case('nearest_pytorch_half_pixel', NCHW, 'nearest', scales=[1, 1, 1.5, 0.6],
     coordinate_transformation_mode='pytorch_half_pixel')
case('nearest_tf_half_pixel_for_nn', NCHW, 'nearest', scales=[1, 1, 3, 1.3],
     coordinate_transformation_mode='tf_half_pixel_for_nn')
case('nearest_half_pixel_scale_3', NCHW, 'nearest', scales=[1, 1, 3, 3])
case('nearest_tf_crop_and_resize', NCHW, 'nearest', sizes=[1, 2, 6, 9], roi=[0, 0, -0.2, 0.1, 1, 1, 0.9, 1.2],
     coordinate_transformation_mode='tf_crop_and_resize', extrapolation_value=7.0)
case('nearest_opset10_up', NCHW, 'nearest', opset=10, scales=[1, 1, 2, 1.5])
case('nearest_opset10_down', [1, 2, 9, 11], 'nearest', opset=10, scales=[1, 1, 0.6, 0.45])
case('nearest_upsample9', NCHW, 'nearest', op='Upsample', opset=9, scales=[1, 1, 2, 2.5])
case('nearest_rank3', [3, 4, 5], 'nearest', scales=[1.5, 0.75, 2])
# Coordinates one float step from n + 0.5 (3.5000005, 2.4999998) round as ties: ORT's tolerance of 1e-6.
for nm in ('round_prefer_floor', 'round_prefer_ceil'):
    case(f'nearest_{nm}_near_tie', [1, 1, 2, 11], 'nearest', scales=[1, 1, 1, 2.624999761581421], nearest_mode=nm)
case('nearest_half_pixel_symmetric_near_tie', [1, 1, 2, 6], 'nearest', opset=19, scales=[1, 1, 1, 0.9384406805038452],
     coordinate_transformation_mode='half_pixel_symmetric', nearest_mode='round_prefer_ceil')
# Cubic, NCHW (ORT's bicubic kernel).
case('cubic_half_pixel_up', NCHW, 'cubic', scales=[1, 1, 2, 1.5])
case('cubic_half_pixel_down', [1, 2, 9, 11], 'cubic', sizes=[1, 2, 4, 5])
case('cubic_a_0_5_asymmetric', NCHW, 'cubic', scales=[1, 1, 1.7, 2.3], cubic_coeff_a=-0.5,
     coordinate_transformation_mode='asymmetric')
case('cubic_exclude_outside', NCHW, 'cubic', sizes=[1, 2, 9, 12], exclude_outside=1)
case('cubic_exclude_outside_down', [1, 2, 9, 11], 'cubic', scales=[1, 1, 0.6, 0.45], exclude_outside=1)
case('cubic_align_corners', NCHW, 'cubic', scales=[1, 1, 1.5, 0.6], coordinate_transformation_mode='align_corners')
case('cubic_pytorch_half_pixel', NCHW, 'cubic', sizes=[1, 2, 11, 3],
     coordinate_transformation_mode='pytorch_half_pixel')
case('cubic_tf_crop_and_resize', NCHW, 'cubic', sizes=[1, 2, 6, 9], roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3],
     coordinate_transformation_mode='tf_crop_and_resize', extrapolation_value=-3.5)
case('cubic_rank2', [6, 5], 'cubic', scales=[1.5, 2.2])
# An output of the input's shape is a copy, even with a crop box.
case('same_shape_crop_is_copy', NCHW, 'linear', sizes=[1, 2, 5, 7], roi=[0, 0, 0.2, 0.1, 1, 1, 0.9, 0.8],
     coordinate_transformation_mode='tf_crop_and_resize')


def seed_of(name):
    return len(name) * 31 + sum(map(ord, name))


def build(c):
    """(ModelProto, x) for one case."""
    x = random_tensor(c['shape'], seed_of(c['name']))
    attrs = dict(mode=c['mode'], **c['attrs'])
    inits, ins = [], ['x']
    op, opset = c['op'], c['opset']
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    if op == 'Upsample' and opset < 9:
        attrs['scales'] = [float(s) for s in c['scales']]
    elif op == 'Upsample' or opset == 10:
        inits.append(numpy_helper.from_array(f32(c['scales']), 'scales'))
        ins.append('scales')
    else:
        inits.append(numpy_helper.from_array(f32(c['roi'] if c['roi'] else []), 'roi'))
        inits.append(numpy_helper.from_array(f32(c['scales'] if c['scales'] else []), 'scales'))
        ins += ['roi', 'scales']
        if c['sizes']:
            inits.append(numpy_helper.from_array(np.array(c['sizes'], np.int64), 'sizes'))
            ins.append('sizes')
    node = helper.make_node(op, ins, ['y'], **attrs)
    g = helper.make_graph([node], c['name'], [helper.make_tensor_value_info('x', TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], ir_version=8), x


def cfloat(v):
    s = repr(float(np.float32(v)))
    return s + 'f' if ('.' in s or 'e' in s) else s + '.f'


def entry(c, seed, y):
    a = c['attrs']
    strs = [('mode', c['mode'])] + [(k, v) for k, v in a.items() if isinstance(v, str)]
    floats = [(k, v) for k, v in a.items() if isinstance(v, float)]
    ints = [(k, v) for k, v in a.items() if isinstance(v, int) and k != 'axes']
    bits = y.astype(np.float32).ravel().view(np.uint32)
    parts = [f'.name = "{c["name"]}"', f'.op = "{c["op"]}"', f'.opset = {c["opset"]}',
             '.str_attrs = {' + ', '.join(f'{{"{k}", "{v}"}}' for k, v in strs) + '}']
    if floats:
        parts.append('.float_attrs = {' + ', '.join(f'{{"{k}", {cfloat(v)}}}' for k, v in floats) + '}')
    if ints:
        parts.append('.int_attrs = {' + ', '.join(f'{{"{k}", {v}}}' for k, v in ints) + '}')
    if 'axes' in a:
        parts.append('.axes = {' + ', '.join(map(str, a['axes'])) + '}')
    parts.append('.x_shape = {' + ', '.join(map(str, c['shape'])) + '}')
    parts.append(f'.seed = {seed}')
    for k in ('roi', 'scales'):
        if c[k]:
            parts.append(f'.{k} = {{' + ', '.join(cfloat(v) for v in c[k]) + '}')
    if c['sizes']:
        parts.append('.sizes = {' + ', '.join(map(str, c['sizes'])) + '}')
    parts.append('.y_shape = {' + ', '.join(map(str, y.shape)) + '}')
    rows = [', '.join(f'0x{b:08x}' for b in bits[i:i + 8]) for i in range(0, bits.size, 8)]
    parts.append('.y = {\n         ' + ',\n         '.join(rows) + '}')
    return '    {' + ',\n     '.join(parts) + '},\n'


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'resize_ort_cases.inc')
    work = tempfile.mkdtemp(prefix='resize_ort_')
    text = ['// Generated by tests/kernels/resize_ort_cases.py from ONNX Runtime 1.30 (CPU, 1 thread); do not edit.\n']
    for c in CASES:
        m, x = build(c)
        path = os.path.join(work, c['name'] + '.onnx')
        with open(path, 'wb') as f:
            f.write(m.SerializeToString())
        np.save(os.path.join(work, c['name'] + '_x.npy'), x)
        outs, _ = qtest.ort_run(path, {'x': os.path.join(work, c['name'] + '_x.npy')},
                                os.path.join(work, 'o_' + c['name']), threads=1)
        text.append(entry(c, seed_of(c['name']), outs['y']))
        print(f'{c["name"]}: {list(x.shape)} -> {list(outs["y"].shape)}')
    with open(out, 'w') as f:
        f.write(''.join(text))
    print(f'wrote {out} ({len(CASES)} cases)')


if __name__ == '__main__':
    main()
