#!/usr/bin/python3
"""Small tensor files written by NumPy 1.24 and onnx 1.12 (Debian), read by tests/tensorio.

usage: /usr/bin/python3 scripts/golden/gen_tensorio_fixtures.py tests/tensorio/data
Writes *.npy, *.npz, *.pb and expected.json: for each file, per array, dtype (ONNX name), shape and values
(floats as Python floats; NaN and inf as the strings "nan", "inf", "-inf").
"""
import io
import json
import os
import sys
import zipfile

import numpy as np
from onnx import numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(3)
expected = {}
ONNX_NAME = {"float32": "float", "float64": "double", "float16": "float16", "int8": "int8", "uint8": "uint8",
             "int16": "int16", "uint16": "uint16", "int32": "int32", "int64": "int64", "uint32": "uint32",
             "uint64": "uint64", "bool": "bool"}


def describe(a):
    a = np.asarray(a)
    vals = [(float(v) if np.isfinite(v) else str(float(v))) if a.dtype.kind == "f" else int(v)
            for v in a.ravel(order="C")]
    return {"dtype": ONNX_NAME[a.dtype.name], "shape": list(a.shape), "values": vals}


def npy(name, a, **kw):
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, **kw)
    expected[name] = {"": describe(a)}


npy("f32_2x3.npy", np.array([[1.5, -2, 3], [4, np.nan, -0.0]], dtype=np.float32))
npy("f16_5.npy", np.array([1, 0.5, -65504, 6e-8, np.inf], dtype=np.float16))
npy("i8_4.npy", np.array([-128, -1, 0, 127], dtype=np.int8))
npy("u16_3.npy", np.array([0, 1, 65535], dtype=np.uint16))
npy("i64_scalar.npy", np.array(-5, dtype=np.int64))
npy("u64_2.npy", np.array([0, 2**40], dtype=np.uint64))
npy("bool_3.npy", np.array([True, False, True]))
npy("f64_empty.npy", np.zeros((0, 3), dtype=np.float64))
npy("i32_big_endian.npy", np.arange(-3, 3, dtype=">i4").reshape(2, 3))
npy("f32_big_endian.npy", np.array([1.25, -3.5e10], dtype=">f4"))
npy("f64_fortran_3x4.npy", np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4) * 0.5))
npy("i16_fortran_2x3x2.npy", np.asfortranarray(np.arange(12, dtype=np.int16).reshape(2, 3, 2) - 6))
npy("f32_v2.npy", np.array([7, 8], dtype=np.float32), version=(2, 0))
npy("u8_v3.npy", np.array([1, 2, 3], dtype=np.uint8), version=(3, 0))

a1 = rng.normal(size=(3, 4)).astype(np.float32)
a2 = np.arange(10, dtype=np.int32)
np.savez(os.path.join(out, "stored.npz"), a=a1, b=a2)
expected["stored.npz"] = {"a": describe(a1), "b": describe(a2)}
np.savez_compressed(os.path.join(out, "deflate.npz"), weights=a1, idx=a2)
expected["deflate.npz"] = {"weights": describe(a1), "idx": describe(a2)}
# zip64 everywhere: lowering zipfile's limits makes it write zip64 extra fields in the central directory and the
# zip64 end-of-central-directory record and locator, as it does for archives over 4 GiB.
buf = io.BytesIO()
np.lib.format.write_array(buf, a2)
zipfile.ZIP64_LIMIT = 0
zipfile.ZIP_FILECOUNT_LIMIT = 0
with zipfile.ZipFile(os.path.join(out, "zip64.npz"), "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as z:
    with z.open("x.npy", "w", force_zip64=True) as f:
        f.write(buf.getvalue())
expected["zip64.npz"] = {"x": describe(a2)}

t = numpy_helper.from_array(np.array([[1, 2], [3, 4]], dtype=np.float32), name="input_0")
with open(os.path.join(out, "input_0.pb"), "wb") as f:
    f.write(t.SerializeToString())
expected["input_0.pb"] = {"input_0": describe(np.array([[1, 2], [3, 4]], dtype=np.float32))}
t = numpy_helper.from_array(np.array([-3, 9, 127], dtype=np.int8), name="q")
with open(os.path.join(out, "q_int8.pb"), "wb") as f:
    f.write(t.SerializeToString())
expected["q_int8.pb"] = {"q": describe(np.array([-3, 9, 127], dtype=np.int8))}

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
