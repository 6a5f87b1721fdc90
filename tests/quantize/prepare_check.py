#!/usr/bin/python3
"""`qtool quantize --prepare-only` (lift constants, fold constants, fold BatchNorm, opset upgrade, Relu/Min/Clip
clean-up, Div -> Mul, affine folds into convolutions, dead nodes) must not change what a model computes: every output of every shared model, run in
ONNX Runtime 1.30 before and after, agrees to float32 rounding. Prints one JSON line; exit 1 on a mismatch."""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qtest  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from shared_inputs import one_input_per_model  # noqa: E402

# The float shared models (the int8 one under extra/ is already quantized).
CASES = {m[:-len('.onnx')]: i for m, i in one_input_per_model(qtest.SHARED).items() if not m.startswith('extra/')}


def main():
    work = tempfile.mkdtemp(prefix='qtool-prepare-')
    report, bad = {}, []
    for name, inputs in CASES.items():
        src = os.path.join(qtest.MODELS, name + '.onnx')
        dst = os.path.join(work, name + '.prepared.onnx')
        passes = json.loads(qtest.sh([qtest.qtool(), 'quantize', src, '-o', dst, '--prepare-only']).strip())
        a, _ = qtest.ort_run(src, inputs, os.path.join(work, name + '_a'))
        b, _ = qtest.ort_run(dst, inputs, os.path.join(work, name + '_b'))
        worst = 0.0
        for k, x in a.items():
            y = b[k]
            if x.shape != y.shape:
                bad.append(f'{name}:{k} shape {x.shape} vs {y.shape}')
                continue
            err = float(np.abs(x.astype(np.float64) - y).max() / max(1.0, float(np.abs(x).max())))
            worst = max(worst, err)
        if worst > 1e-4:
            bad.append(f'{name}: max relative difference {worst:.3g}')
        report[name] = {'max_rel_diff': worst, 'opset': [passes['opset_before'], passes['opset_after']],
                        'rewrites': {k: v for k, v in passes['prepare'].items() if v}}
    print(json.dumps({'ok': not bad, 'failures': bad, 'models': report}))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
