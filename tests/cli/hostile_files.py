#!/usr/bin/python3
"""Hostile files (issue 16, docs/reliability.md "Files"): outputs that name inputs, planted temporary names,
signals and a full disk during writes, FIFOs and folders as inputs, zip bombs and oversized tensors.

Every case builds its own files in a scratch folder, runs the CLI and asserts: the exit code (2, or 0 where the
input is valid), exactly one non-empty stderr line naming the problem, no temporary file left in the output
folder, and every input byte-identical (sha256) afterwards.

usage: hostile_files.py QTOOL SOURCE_DIR SHARED_DIR SCRATCH_DIR
"""
import hashlib
import os
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
import zlib

import numpy as np

qtool, source, shared, scratch = (os.path.abspath(a) for a in sys.argv[1:5])
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
os.chdir(scratch)  # relative paths below (./x, a/../a/x) are relative to the scratch folder
failures = []
count = 0
# A sanitizer build runs qtool several times slower: its tests get QTOOL_TIMEOUT_SCALE (tests/CMakeLists.txt),
# which multiplies every time limit below; a Release build keeps them as written (no variable: 1).
SCALE = float(os.environ.get("QTOOL_TIMEOUT_SCALE", "1"))

IN, OUT = "in", "out"
os.makedirs(IN)
os.makedirs(OUT)
shutil.copy(os.path.join(source, "models", "tiny_conv.onnx"), "in/m.onnx")
shutil.copy(os.path.join(source, "configs", "int8.json"), "in/k.json")
rng = np.random.default_rng(0)
np.save("in/d.npy", rng.standard_normal((2, 3, 32, 32), dtype=np.float32))
os.makedirs("in/dir")
np.savez("in/dir/s0.npz", input=rng.standard_normal((1, 3, 32, 32), dtype=np.float32))
np.savez("in/dir/s1.npz", input=rng.standard_normal((1, 3, 32, 32), dtype=np.float32))
shutil.copy(os.path.join(source, "models", "tiny_external.onnx"), "in/ext.onnx")
shutil.copy(os.path.join(source, "models", "tiny_external.data"), "in/tiny_external.data")
p = subprocess.run([qtool, "-q", "calibrate", "in/m.onnx", "--random", "2", "-o", "in/c.json"], capture_output=True)
assert p.returncode == 0, p.stderr


def digests(folder):
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(root, f)
            if stat.S_ISREG(os.lstat(path).st_mode):
                out[path] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def listing(folder):
    return sorted(os.listdir(folder))


def temporaries(folder):
    return sorted(f for f in os.listdir(folder) if ".tmp" in f)


def check(args, rc=2, names=(), out_dir=OUT, allowed=None, limits=None, timeout=20):
    """Runs qtool ARGS; `names` must appear in the one stderr line; `out_dir` may gain only `allowed` files
    (None: nothing); inputs under in/ stay byte-identical."""
    global count
    count += 1
    before_in, before_out = digests(IN), set(listing(out_dir))
    try:
        p = subprocess.run([qtool] + args, capture_output=True, text=True, timeout=timeout * SCALE,
                           preexec_fn=limits)
        code, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        code, err = "timeout (hang)", ""
    lines = err.splitlines()
    problems = []
    if code != rc:
        problems.append(f"exit code {code}, expected {rc}")
    if rc > 0 and (len(lines) != 1 or not lines[0].strip()):  # rc < 0: killed by a signal, nothing printed
        problems.append(f"stderr has {len(lines)} lines, expected exactly one")
    for n in names:
        if n not in err:
            problems.append(f"stderr does not name {n!r}")
    gained = set(listing(out_dir)) - before_out
    if gained - set(allowed or ()):
        problems.append(f"left {sorted(gained - set(allowed or ()))} in {out_dir}")
    if temporaries(out_dir) != sorted(f for f in before_out if ".tmp" in f):
        problems.append(f"temporary files in {out_dir}: {temporaries(out_dir)}")
    if digests(IN) != before_in:
        problems.append("an input file changed")
    print(f"{'ok  ' if not problems else 'FAIL'} qtool {' '.join(args)}\n       stderr: {err.strip()[:300]}")
    if problems:
        failures.append(f"qtool {' '.join(args)}: {'; '.join(problems)}")
    return code, err


# ---- 1. Data loss: -o naming an input, by any path; outputs that are not regular files.
model = "in/m.onnx"
os.symlink("../in/m.onnx", "out/link.onnx")
os.link("in/m.onnx", "out/hard.onnx")
for out in ["in/m.onnx", "./in/m.onnx", "in/../in/m.onnx", os.path.abspath("in/m.onnx"), "out/link.onnx",
            "out/hard.onnx"]:
    check(["calibrate", model, "--random", "1", "-o", out], names=[out, model])
    check(["quantize", model, "--random", "1", "-o", out], names=[out, model])
    check(["convert", model, "-o", out], names=[out, model])
os.unlink("out/link.onnx")
os.unlink("out/hard.onnx")
check(["quantize", model, "--calib", "in/c.json", "-o", "in/c.json"], names=["in/c.json", "--calib"], out_dir=IN)
check(["quantize", model, "--calib", "in/c.json", "--config", "in/k.json", "-o", "./in/k.json"],
      names=["./in/k.json", "in/k.json", "--config"], out_dir=IN)
check(["calibrate", model, "--data", "input=in/d.npy", "-o", "in/d.npy"], names=["in/d.npy", "--data"], out_dir=IN)
check(["calibrate", model, "--data", "in/dir", "-o", "in/dir/s1.npz"], names=["in/dir/s1.npz"], out_dir="in/dir")
check(["calibrate", model, "--config", "in/k.json", "--random", "1", "-o", "in/k.json"], names=["in/k.json"],
      out_dir=IN)
check(["convert", "in/ext.onnx", "-o", "in/tiny_external.data"], names=["in/tiny_external.data"], out_dir=IN)
# run: an output file that is one of the --input files; -o that is a file, not a folder.
os.makedirs("out/run")
np.save("out/run/logits.npy", rng.standard_normal((1, 3, 32, 32), dtype=np.float32))
shutil.copy("out/run/logits.npy", "in/logits_copy.npy")
check(["run", model, "--input", "input=out/run/logits.npy", "-o", "out/run"], names=["out/run/logits.npy"],
      out_dir="out/run")
if digests("out/run") != {"out/run/logits.npy": digests(IN)["in/logits_copy.npy"]}:
    failures.append("run overwrote its --input file")
check(["run", model, "--input", "input=in/logits_copy.npy", "-o", "in/m.onnx"], names=["in/m.onnx"])
# Device nodes, FIFOs and folders are never replaced by a regular file.
os.mkfifo("out/fifo.json")
for out in ["/dev/null", "out/fifo.json", "out"]:
    check(["calibrate", model, "--random", "1", "-o", out], names=[out])
    check(["quantize", model, "--random", "1", "-o", out], names=[out])
    check(["convert", model, "-o", out], names=[out])
if not stat.S_ISCHR(os.stat("/dev/null").st_mode) or not stat.S_ISFIFO(os.stat("out/fifo.json").st_mode):
    failures.append("/dev/null or a FIFO was replaced")
os.unlink("out/fifo.json")
# Valid: a new path, and an existing regular file that is no input (replaced).
check(["calibrate", model, "--random", "1", "-o", "out/new.json"], rc=0, allowed=["new.json"])
check(["quantize", model, "--calib", "out/new.json", "-o", "out/q.onnx"], rc=0, allowed=["q.onnx"])
check(["quantize", model, "--calib", "out/new.json", "-o", "out/q.onnx"], rc=0)
for f in listing(OUT):
    shutil.rmtree(os.path.join(OUT, f)) if os.path.isdir(os.path.join(OUT, f)) else os.unlink(os.path.join(OUT, f))

# ---- 2. Writes outside the target: symlinks planted at the names a writer might use for its temporary file.
os.makedirs("victim")
open("victim/v", "wb").write(b"precious")
for name in ["c.json.tmp", ".c.json.tmp", "c.json.tmp." + str(os.getpid())]:
    os.symlink(os.path.abspath("victim/v"), os.path.join(OUT, name))
check(["calibrate", model, "--random", "1", "-o", "out/c.json"], rc=0, allowed=["c.json"])
if open("victim/v", "rb").read() != b"precious" or sorted(os.listdir("victim")) != ["v"]:
    failures.append("calibrate wrote through a symlink planted beside its output")
for f in listing(OUT):
    os.unlink(os.path.join(OUT, f))

# ---- 3. Partial files: a full disk and signals during a write leave nothing but finished files.
big = os.path.join(shared, "models", "mobilenetv2-1.0-224-fp32.onnx")


def fsize_limit(nbytes, ignore_sigxfsz=True):
    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
        if ignore_sigxfsz:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG, like ENOSPC
    return f


check(["convert", big, "-o", "out/m.onnx"], names=["out/m.onnx"], limits=fsize_limit(1 << 20))
check(["convert", big, "-o", "out/m.onnx", "--external-data", "always"], names=["out/m.onnx"],
      limits=fsize_limit(1 << 20))
check(["calibrate", model, "--random", "1", "-o", "out/c.json"], names=["out/c.json"], limits=fsize_limit(200))
check(["run", model, "--input", "input=in/logits_copy.npy", "-o", "out"], names=["out/logits.npy"],
      limits=fsize_limit(100))
# SIGXFSZ not ignored: the process dies of it, after removing its temporary file.
check(["convert", big, "-o", "out/m.onnx"], rc=-signal.SIGXFSZ, limits=fsize_limit(1 << 20, False))


def default_signals():
    """A shell may start tests with SIGINT ignored (background jobs); qtool keeps ignored signals ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def signal_during_write(args, sig, out_files):
    """Starts qtool, sends `sig` as soon as a temporary file appears in out/, and checks what is left."""
    global count
    count += 1
    before_in = digests(IN)
    p = subprocess.Popen([qtool] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=default_signals)
    hit = False
    deadline = time.time() + 20 * SCALE
    while p.poll() is None and time.time() < deadline:
        if temporaries(OUT):
            p.send_signal(sig)
            hit = True
            break
    p.wait(timeout=20 * SCALE)
    left = listing(OUT)
    problems = []
    if hit and p.returncode != -sig:
        problems.append(f"exit code {p.returncode}, expected death by signal {sig}")
    if temporaries(OUT) or set(left) - set(out_files):
        problems.append(f"left {left}")
    for f in left:  # a file that is there is a finished one: it loads
        if f.endswith(".onnx") and subprocess.run([qtool, "inspect", os.path.join(OUT, f)],
                                                  capture_output=True).returncode != 0:
            problems.append(f"{f} is incomplete")
    if digests(IN) != before_in:
        problems.append("an input file changed")
    print(f"{'ok  ' if not problems else 'FAIL'} signal {sig} {'during the write' if hit else 'after it'}: "
          f"qtool {' '.join(args)} -> {left}")
    if problems:
        failures.append(f"signal {sig} to qtool {' '.join(args)}: {'; '.join(problems)}")
    for f in left:
        os.unlink(os.path.join(OUT, f))
    return hit


hits = 0
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    hits += signal_during_write(["convert", big, "-o", "out/m.onnx", "--external-data", "always"], sig,
                                ["m.onnx", "m.onnx.data"])
    hits += signal_during_write(["convert", big, "-o", "out/m.onnx"], sig, ["m.onnx"])
if hits == 0:
    failures.append("no signal arrived while a temporary file existed: the signal cases tested nothing")
# Signals at fixed delays during a longer command (calibration, then the write).
det = os.path.join(shared, "models", "ppocrv4-det.onnx")
for delay in (0.05, 0.3, 0.8, 1.5):
    count += 1
    p = subprocess.Popen([qtool, "quantize", det, "--random", "1", "--shape", "x=1,3,64,64", "--accuracy-guard",
                          "off", "-o", "out/det.onnx"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=default_signals)
    time.sleep(delay)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30 * SCALE)
    left = listing(OUT)
    if temporaries(OUT) or set(left) - {"det.onnx"}:
        failures.append(f"SIGTERM after {delay} s to quantize left {left}")
    print(f"ok   SIGTERM after {delay} s: exit {p.returncode}, left {left}")
    for f in left:
        os.unlink(os.path.join(OUT, f))

# ---- 4. Non-regular files as inputs: refused up front, never a hang or a read until out of memory.
os.makedirs("odd")
os.mkfifo("odd/fifo.onnx")
os.mkfifo("odd/fifo.json")
os.mkfifo("odd/fifo.npy")
os.makedirs("odd/dir.npy")
os.makedirs("odd/dir.json")
check(["inspect", "odd/fifo.onnx"], names=["odd/fifo.onnx", "FIFO"])
check(["calibrate", "odd/fifo.onnx", "--random", "1", "-o", "out/c.json"], names=["odd/fifo.onnx"])
check(["quantize", model, "--random", "1", "--config", "odd/fifo.json", "-o", "out/q.onnx"], names=["odd/fifo.json"])
check(["quantize", model, "--random", "1", "--config", "odd/dir.json", "-o", "out/q.onnx"], names=["odd/dir.json"])
check(["calibrate", model, "--random", "1", "--config", "odd/fifo.json", "-o", "out/c.json"],
      names=["odd/fifo.json"])
check(["quantize", model, "--calib", "odd/fifo.json", "-o", "out/q.onnx"], names=["odd/fifo.json"])
check(["quantize", model, "--calib", "odd/dir.json", "-o", "out/q.onnx"], names=["odd/dir.json"])
check(["inspect", model, "--explain", "--calib", "odd/fifo.json"], names=["odd/fifo.json"])
check(["run", model, "--input", "input=odd/fifo.npy"], names=["odd/fifo.npy"])
check(["run", model, "--input", "input=odd/dir.npy"], names=["odd/dir.npy", "directory"])
check(["calibrate", model, "--data", "input=odd/fifo.npy", "-o", "out/c.json"], names=["odd/fifo.npy"])
check(["calibrate", model, "--data", "input=odd/dir.npy", "-o", "out/c.json"], names=["odd/dir.npy"])
os.makedirs("odd/data/test_data_set_0")
os.mkfifo("odd/data/test_data_set_0/input_0.pb")
check(["calibrate", model, "--data", "odd/data", "-o", "out/c.json"], names=["input_0.pb"])

# ---- 5. Zip bombs and oversized tensors: refused before anything is inflated or allocated.
os.makedirs("z")


def zip_archive(members, shared_stream=None):
    """A zip from (name, method, crc, csize, usize, data); with shared_stream, every central entry points at
    the first local header (many members, one compressed stream)."""
    body, central = b"", b""
    offsets = []
    for name, method, crc, csize, usize, data in members:
        nm = name.encode()
        offsets.append(len(body))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, csize, usize, len(nm), 0)
        body += nm + data
    for i, (name, method, crc, csize, usize, data) in enumerate(shared_stream or members):
        nm = name.encode()
        off = 0 if shared_stream else offsets[i]
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, csize, usize,
                               len(nm), 0, 0, 0, 0, 0, off) + nm
    n = len(shared_stream or members)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), len(body), 0)
    return body + central + eocd


def npy_bytes(arr):
    import io
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


# A member declaring 3 GiB (its compressed size makes the claim plausible for deflate): refused by the limit.
junk = os.urandom(3 * 1024 * 1024 + 4096)
open("z/bomb3g.npz", "wb").write(zip_archive([("input.npy", 8, 0, len(junk), 3 << 30, junk)]))
check(["run", model, "--input", "input=z/bomb3g.npz"], names=["z/bomb3g.npz", "--max-tensor-bytes"])
check(["run", model, "--input", "z/bomb3g.npz"], names=["z/bomb3g.npz", "--max-tensor-bytes"])
# 400 members sharing one compressed stream of 8 MiB: refused as overlapping, nothing inflated.
npy8 = npy_bytes(np.zeros((2 << 20,), dtype=np.float32))
stream = deflate(npy8)
entry = ("a0.npy", 8, zlib.crc32(npy8), len(stream), len(npy8), stream)
open("z/shared.npz", "wb").write(zip_archive([entry], shared_stream=[(f"a{i}.npy",) + entry[1:] for i in range(400)]))
check(["run", model, "--input", "z/shared.npz"], names=["z/shared.npz", "overlap"])
os.makedirs("z/dir")
shutil.copy("z/shared.npz", "z/dir/s.npz")
check(["calibrate", model, "--data", "z/dir", "-o", "out/c.json"], names=["z/dir/s.npz"])
# Members within the limit one by one but not together; a member over a lowered limit.
x = rng.standard_normal((1, 3, 32, 32), dtype=np.float32)
np.savez_compressed("z/three.npz", input=x, junk1=np.zeros((160000,), np.float32), junk2=np.zeros((160000,), np.float32))
check(["run", model, "--input", "z/three.npz", "--max-tensor-bytes", "1MiB"], names=["z/three.npz", "--max-tensor-bytes"])
check(["run", model, "--input", "input=z/three.npz"], names=["z/three.npz", "3 arrays"])
np.savez_compressed("z/one.npz", input=np.zeros((1, 3, 32, 32), np.float32))
check(["run", model, "--input", "input=z/one.npz", "--max-tensor-bytes", "4KiB"], names=["z/one.npz", "--max-tensor-bytes"])
check(["run", model, "--input", "input=z/one.npz"], rc=0)  # valid: a compressed single-array .npz
# .npy and .pb: a file over the limit, a header claiming more than the limit (or overflowing int64).
np.save("z/x.npy", x)
check(["run", model, "--input", "input=z/x.npy", "--max-tensor-bytes", "1KiB"], names=["z/x.npy", "--max-tensor-bytes"])
check(["run", model, "--input", "input=z/x.npy"], rc=0)
check(["calibrate", model, "--data", "input=z/x.npy", "-o", "out/c.json", "--max-tensor-bytes", "1K"],
      names=["z/x.npy", "--max-tensor-bytes"])
check(["quantize", model, "--data", "input=z/x.npy", "-o", "out/q.onnx", "--max-tensor-bytes", "1K"],
      names=["z/x.npy", "--max-tensor-bytes"])
for name, shape in [("huge", "(1099511627776,)"), ("overflow", "(4294967296, 4294967296, 16)")]:
    header = ("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }").encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    open(f"z/{name}.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 64)
    check(["run", model, "--input", f"input=z/{name}.npy"], names=[f"z/{name}.npy", "--max-tensor-bytes"])
import onnx
import onnx.numpy_helper
open("z/x.pb", "wb").write(onnx.numpy_helper.from_array(x, "input").SerializeToString())
check(["run", model, "--input", "input=z/x.pb", "--max-tensor-bytes", "1KiB"], names=["z/x.pb", "--max-tensor-bytes"])
check(["run", model, "--input", "input=z/x.pb"], rc=0)

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"\nall {count} hostile-file cases behaved")
