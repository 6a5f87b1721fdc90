#!/usr/bin/env python3
"""qtool inspect QUANT --against FLOAT --report FILE.html, rendered in headless Chromium.

  render_report.py QTOOL SHARED_DIR SCRATCH_DIR

Quantizes digits-vit with a calibration table, writes the report on 8 test samples, then checks in Chromium:
one histogram (<figure data-tensor> holding an <svg>) per activation with a QuantizeLinear in the model (counted
here with onnx, independently of qtool), the sensitivity chart, the page's script ran ("N of N" shown) and logged
nothing to the console (no error, no uncaught exception); the file fetches nothing (no src/href/url to elsewhere).
A screenshot is left in SCRATCH_DIR/report.png for people to look at. Exit 77 (skipped) when chromium is absent.
"""
import re, shutil, subprocess, sys
from pathlib import Path
import numpy as np
import onnx

qtool, shared, scratch = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("SKIP: chromium is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)
scratch.mkdir(parents=True, exist_ok=True)
model = shared / "models/digits-vit.onnx"
tensors = shared / "data/tensors"
np.save(scratch / "eval8.npy", np.load(tensors / "digits_test64.npy")[:8])
failures = []


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(f"FAIL: {' '.join(map(str, cmd))}: exit {p.returncode}")
    return p


run([qtool, "calibrate", model, "--data", f"pixel_values={tensors / 'digits_calib_images.npy'}", "-o",
     scratch / "calib.json", "--threads", "2"])
run([qtool, "quantize", model, "--calib", scratch / "calib.json", "-o", scratch / "quant.onnx"])
report = scratch / "report.html"
run([qtool, "inspect", scratch / "quant.onnx", "--against", model, "--data", f"pixel_values={scratch / 'eval8.npy'}",
     "--calib", scratch / "calib.json", "--report", report, "--threads", "2"])

# Activations with their own QuantizeLinear: inputs that are not initializers or Constant outputs.
g = onnx.load(str(scratch / "quant.onnx")).graph
constants = {t.name for t in g.initializer} | {o for n in g.node if n.op_type == "Constant" for o in n.output}
activations = {n.input[0] for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] not in constants}

html = report.read_text()
for pattern in [r"\bsrc\s*=", r"https?://", r"\burl\(", r"<link\b", r"@import"]:
    if re.search(pattern, html):
        failures.append(f"the report refers to something outside itself ({pattern})")

chrome = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
dom = subprocess.run(chrome + ["--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=300)
console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
if console:
    failures.append("console output: " + " | ".join(console[:3]))
figures = re.findall(r'<figure class="hist" data-tensor="([^"]*)">(.*?)</figure>', dom.stdout, re.S)
import html as htmllib
names = [htmllib.unescape(n) for n, _ in figures]
with_svg = [htmllib.unescape(n) for n, body in figures if "<svg" in body]
if sorted(names) != sorted(activations):
    failures.append(f"{len(names)} histogram panels for {len(activations)} quantized activations")
if len(with_svg) != len(activations):
    failures.append(f"{len(with_svg)} of {len(activations)} panels draw a histogram")
if not re.search(r'<svg class="sens" data-rows="\d+"', dom.stdout):
    failures.append("no sensitivity chart")
if f">{len(activations)} of {len(activations)}<" not in dom.stdout:
    failures.append("the page's script did not run to the end (no 'N of N' count)")
print(f"ok: {len(with_svg)} histograms for {len(activations)} quantized activations, {len(console)} console lines")

shot = scratch / "report.png"
shot.unlink(missing_ok=True)
subprocess.run(chrome + [f"--screenshot={shot}", "--window-size=1400,2200", report.as_uri()], capture_output=True,
               timeout=300)
if not shot.exists() or shot.stat().st_size < 20000:
    failures.append(f"no screenshot at {shot}")
else:
    print(f"ok: screenshot {shot} ({shot.stat().st_size} bytes)")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
