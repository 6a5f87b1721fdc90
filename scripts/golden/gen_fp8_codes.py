#!/usr/bin/python3
"""The value of every FP8 code, computed from the ONNX specification's definition of the four float8 types
(docs/Operators.md "Cast", "float 8 types"; onnx 1.12 has no float8 helpers, so the formula is written here):

  E4M3FN:   bias 7,  no inf, NaN = S.1111.111, max 448
  E4M3FNUZ: bias 8,  no inf, no -0, NaN = 0x80, max 240
  E5M2:     bias 15, inf = S.11111.00, NaN = S.11111.{01,10,11}, max 57344
  E5M2FNUZ: bias 16, no inf, no -0, NaN = 0x80, max 57344
  value = (-1)^S * 2^(E - bias) * (1 + M / 2^m)   for E > 0
          (-1)^S * 2^(1 - bias) * (M / 2^m)       for E = 0 (subnormal)

usage: /usr/bin/python3 scripts/golden/gen_fp8_codes.py > tests/numerics/golden/fp8_codes.json
Values are written as strings ("nan", "inf", "-inf", "-0.0" or the repr of the exact value).
"""
import json
import sys

FORMATS = {"float8e4m3fn": (4, 3, 7, "fn"), "float8e4m3fnuz": (4, 3, 8, "fnuz"), "float8e5m2": (5, 2, 15, "ieee"),
           "float8e5m2fnuz": (5, 2, 16, "fnuz")}


def value(code, ebits, mbits, bias, kind):
    s = -1.0 if code & 0x80 else 1.0
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    if kind == "fnuz" and code == 0x80:
        return "nan"
    if kind == "fn" and e == (1 << ebits) - 1 and m == (1 << mbits) - 1:
        return "nan"
    if kind == "ieee" and e == (1 << ebits) - 1:
        return ("-inf" if s < 0 else "inf") if m == 0 else "nan"
    if e == 0:
        v = s * 2.0 ** (1 - bias) * (m / 2 ** mbits)
    else:
        v = s * 2.0 ** (e - bias) * (1 + m / 2 ** mbits)
    return "-0.0" if v == 0 and s < 0 else repr(v)


json.dump({name: [value(c, *f) for c in range(256)] for name, f in FORMATS.items()}, sys.stdout, indent=None)
sys.stdout.write("\n")
