#!/usr/bin/python3
"""Bad input to the CLI: every case must exit with code 2 and print exactly one line on stderr naming the
model file, never crash. Malformed models are generated here, in a scratch folder.

usage: bad_inputs.py QTOOL SOURCE_DIR SCRATCH_DIR

The external-data escapes point at files that exist and hold the right bytes, so only the location check
can reject them (a missing file would be rejected anyway).
"""
import os
import random
import shutil
import subprocess
import sys

import onnx

qtool, source, scratch = sys.argv[1:4]
models = os.path.join(source, "models")
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
failures = []
# A sanitizer build runs qtool several times slower: its tests get QTOOL_TIMEOUT_SCALE (tests/CMakeLists.txt),
# which multiplies every time limit below; a Release build keeps them as written (no variable: 1).
SCALE = float(os.environ.get("QTOOL_TIMEOUT_SCALE", "1"))


def check(args, path, expect_rc=2, must_name=True):
    p = subprocess.run([qtool] + args, capture_output=True, text=True, timeout=60 * SCALE)
    lines = p.stderr.splitlines()
    problems = []
    if p.returncode != expect_rc:
        problems.append(f"exit code {p.returncode}, expected {expect_rc}")
    if len(lines) != 1 or not lines[0].strip():
        problems.append(f"stderr has {len(lines)} lines, expected exactly one")
    if must_name and path not in p.stderr:
        problems.append(f"stderr does not name {path}")
    status = "ok  " if not problems else "FAIL"
    print(f"{status} qtool {' '.join(args)}\n       stderr: {p.stderr.strip()}")
    if problems:
        failures.append(f"qtool {' '.join(args)}: {'; '.join(problems)}")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


good = open(os.path.join(models, "tiny_conv.onnx"), "rb").read()
data = open(os.path.join(models, "tiny_external.data"), "rb").read()
ext_model = onnx.load(os.path.join(models, "tiny_external.onnx"), load_external_data=False)


def external_variant(path, location, offset=None):
    """tiny_external.onnx with its tensors pointing at `location` (and `offset` for the first one)."""
    m = onnx.ModelProto()
    m.CopyFrom(ext_model)
    for i, t in enumerate(x for x in m.graph.initializer if x.data_location == onnx.TensorProto.EXTERNAL):
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = location
            if kv.key == "offset" and offset is not None and i == 0:
                kv.value = str(offset)
    write(path, m.SerializeToString())
    return path


cases = []
# Files that are not models.
cases.append(os.path.join(scratch, "does-not-exist.onnx"))
write(os.path.join(scratch, "empty.onnx"), b"")
cases.append(os.path.join(scratch, "empty.onnx"))
write(os.path.join(scratch, "truncated.onnx"), good[: len(good) // 2])
cases.append(os.path.join(scratch, "truncated.onnx"))
write(os.path.join(scratch, "text.onnx"), b"name,value\nthis is a text file, not a model\n")
cases.append(os.path.join(scratch, "text.onnx"))
cases.append(scratch)  # a folder

# External data: missing file.
cases.append(external_variant(os.path.join(scratch, "missing", "m.onnx"), "m.data"))

# External data escaping the model's folder (m1/m2/ holds the model; every target exists with valid data).
d = os.path.join(scratch, "m1", "m2")
write(os.path.join(scratch, "etc", "passwd"), data)        # what ../../etc/passwd reaches from m1/m2
write(os.path.join(scratch, "m1", "x"), data)              # what sub/../../x reaches
write(os.path.join(scratch, "outside.data"), data)         # symlink and absolute-path target
os.makedirs(os.path.join(d, "sub"), exist_ok=True)
cases.append(external_variant(os.path.join(d, "dotdot.onnx"), "../../etc/passwd"))
cases.append(external_variant(os.path.join(d, "nested.onnx"), "sub/../../x"))
cases.append(external_variant(os.path.join(d, "abs_etc.onnx"), "/etc/passwd"))
cases.append(external_variant(os.path.join(d, "abs_copy.onnx"), os.path.join(scratch, "outside.data")))
os.symlink(os.path.join(scratch, "outside.data"), os.path.join(d, "link.data"))
cases.append(external_variant(os.path.join(d, "symlink.onnx"), "link.data"))
# Offset past the end of a data file that is inside the folder.
write(os.path.join(d, "ok.data"), data)
cases.append(external_variant(os.path.join(d, "offset.onnx"), "ok.data", offset=len(data) + 4096))

# A location with a newline (and a name with control bytes): the error must still be one line.
m = onnx.ModelProto()
m.CopyFrom(ext_model)
m.graph.initializer[0].name = "w\nsecond line\x1b[31m"
m.graph.node[0].input[1] = m.graph.initializer[0].name
for kv in m.graph.initializer[0].external_data:
    if kv.key == "location":
        kv.value = "ok.data\n../../etc/passwd"
write(os.path.join(d, "newline.onnx"), m.SerializeToString())
cases.append(os.path.join(d, "newline.onnx"))

# Sanity: the same construction with a valid location loads (so the cases above fail for their reason).
valid = external_variant(os.path.join(d, "valid.onnx"), "ok.data")
p = subprocess.run([qtool, "inspect", valid], capture_output=True, text=True)
if p.returncode != 0:
    failures.append(f"control model {valid} failed: {p.stderr.strip()}")

for path in cases:
    check(["inspect", path], path)
    check(["inspect", "--json", path], path)
    check(["convert", path, "-o", os.path.join(scratch, "converted.onnx")], path)
if os.path.exists(os.path.join(scratch, "converted.onnx")):
    failures.append("a bad model was converted")

# convert refuses to overwrite its input (the model, or its external data file).
check(["convert", valid, "-o", valid], valid)
check(["convert", valid, "-o", os.path.join(d, "new.onnx"), "--external-data", "always", "--external-file", "ok.data"],
      "ok.data", must_name=True)
# convert refuses to write external data outside the output's folder.
check(["convert", valid, "-o", os.path.join(d, "new.onnx"), "--external-data", "always", "--external-file",
       "../escape.data"], "../escape.data")
if os.path.exists(os.path.join(d, "new.onnx")) or os.path.exists(os.path.join(scratch, "m1", "escape.data")):
    failures.append("a refused convert left files behind")

# The other commands report a missing model, config or calibration file the same way; quantize refuses
# to overwrite its input before it calibrates (no minutes of work lost to a typo).
tiny = os.path.join(models, "tiny_conv.onnx")
missing = os.path.join(scratch, "missing.onnx")
out = os.path.join(scratch, "out.onnx")
check(["run", missing], missing)
check(["calibrate", missing, "--random", "2", "-o", os.path.join(scratch, "c.json")], missing)
check(["quantize", missing, "-o", out, "--random", "2"], missing)
check(["quantize", tiny, "-o", out, "--calib", os.path.join(scratch, "missing.json")], "missing.json")
check(["quantize", tiny, "-o", out, "--config", os.path.join(scratch, "missing.json"), "--random", "2"],
      "missing.json")
check(["quantize", valid, "-o", valid, "--random", "2000000"], valid)
if os.path.exists(out):
    failures.append("a refused quantize wrote its output")

# Corrupted copies of the bundled models (random bytes overwritten, fixed seed): exit 0 or 2, never a
# crash, and a failure is one line.
rng = random.Random(1234)
sources = [open(os.path.join(models, f), "rb").read() for f in sorted(os.listdir(models)) if f.endswith(".onnx")]
shutil.copy(os.path.join(models, "tiny_external.data"), os.path.join(scratch, "tiny_external.data"))
fuzz = os.path.join(scratch, "fuzzed.onnx")
outcomes = {0: 0, 2: 0}
for i in range(150):
    b = bytearray(rng.choice(sources))
    for _ in range(rng.randint(1, 6)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    write(fuzz, bytes(b))
    p = subprocess.run([qtool, "inspect", "--json", fuzz], capture_output=True, timeout=60 * SCALE)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode not in outcomes or (p.returncode == 2 and len(err.splitlines()) != 1):
        kept = os.path.join(scratch, f"fuzzed-{i}.onnx")
        shutil.copy(fuzz, kept)
        failures.append(f"qtool inspect {kept}: exit code {p.returncode}, stderr {err.strip()!r}")
    else:
        outcomes[p.returncode] += 1
print(f"corrupted models: {outcomes[0]} still valid, {outcomes[2]} rejected with one line, no crash")

# Usage errors exit with 1.
for args in (["inspect"], ["convert", valid], ["inspect", valid, "--no-such-flag"], ["quantize", tiny, "-o", out]):
    p = subprocess.run([qtool] + args, capture_output=True, text=True)
    if p.returncode != 1:
        failures.append(f"qtool {' '.join(args)}: exit code {p.returncode}, expected 1")

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"\nall {3 * len(cases) + 9} bad-input cases exit 2 with one line naming the file")
