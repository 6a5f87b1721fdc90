#!/usr/bin/python3
"""Option parity and provenance (issue 15).

1. Every option `qtool calibrate` declares is accepted by `qtool quantize` (from the two --help outputs), and
   quantize --random with calibrate's flags records exactly the table calibrate writes with them: the
   calibration digest in the quantized model equals sha256 of calibrate's file.
2. --threads means the same everywhere: 0 = all cores, the default, said so in each command's --help; `qtool run`
   without --threads uses every core it may run on.
3. A quantized model records producer_name "qtool", producer_version = `qtool --version`, and in metadata_props
   qtool.config_sha256 (independent of the config file's layout, changed by its content) and
   qtool.calibration_sha256; the float model's own metadata_props stay; no timestamp: the bytes repeat.

usage: options_provenance.py QTOOL SOURCE_DIR SCRATCH_DIR"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import onnx

qtool, source, scratch = sys.argv[1:4]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
MODEL = os.path.join(source, 'models', 'tiny_conv.onnx')
SHAPE = ['--shape', 'input=1,3,32,32']
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args, env=None):
    r = subprocess.run([qtool, *args], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: qtool {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def options(help_text):
    """Long option names of a --help text (the 'Options:' lines start with two spaces and a dash)."""
    return set(re.findall(r'^\s+(?:-\w,)?(--[\w-]+)', help_text, re.M))


def sha256(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def meta(path):
    m = onnx.load(path)
    return m.producer_name, m.producer_version, {p.key: p.value for p in m.metadata_props}


# 1. Parity.
cal_opts, q_opts = options(run('calibrate', '--help')), options(run('quantize', '--help'))
check('--batch-size' in cal_opts and '--methods' in cal_opts, f'calibrate --help options not parsed: {cal_opts}')
# What calibrate does with a finished table (merge tables, export a TensorRT cache) is not a way to calibrate.
TABLE_ONLY = {'--merge', '--trt-cache', '--trt-version'}
check(cal_opts - TABLE_ONLY <= q_opts, f'calibrate options quantize does not accept: {sorted(cal_opts - TABLE_ONLY - q_opts)}')

flags = ['--random', '6', '--seed', '3', *SHAPE, '--batch-size', '2', '--threads', '2', '--observer-threads', '1',
         '--methods', 'minmax,percentile,mse', '--histogram-bins', '1024', '--percentile', '99.9']
calib = os.path.join(scratch, 'c.json')
run('calibrate', MODEL, '-o', calib, *flags)
q1 = os.path.join(scratch, 'q1.onnx')
summary = json.loads(run('quantize', MODEL, '-o', q1, *flags, '--json'))
c = summary['calibration']
check(c['batch_size'] == 2 and c['runs'] == 3 and c['samples'] == 6, f'quantize --batch-size not applied: {c}')
check(c['methods'] == ['minmax', 'percentile', 'mse'] and c['histogram_bins'] == 1024 and c['percentile'] == 99.9,
      f'quantize --methods/--histogram-bins/--percentile not applied: {c}')
name, version, props = meta(q1)
check(props.get('qtool.calibration_sha256') == sha256(calib),
      'quantize --random with calibrate\'s flags did not calibrate what calibrate writes: '
      f'{props.get("qtool.calibration_sha256")} != sha256(c.json) {sha256(calib)}')
# --calib FILE: the digest is the file's.
q2 = os.path.join(scratch, 'q2.onnx')
run('quantize', MODEL, '-o', q2, '--calib', calib)
check(meta(q2)[2].get('qtool.calibration_sha256') == sha256(calib), 'quantize --calib: digest is not sha256(FILE)')
check(json.loads(run('quantize', MODEL, '-o', q2, '--calib', calib, '--json'))['calibration'] is None,
      'quantize --calib --json: calibration is not null')

# 2. Threads.
for cmd in ('run', 'calibrate', 'quantize', 'inspect'):
    h = run(cmd, '--help')
    m = re.search(r'-t,--threads[^\n]*\n?\s*([^\n]*)', h)
    check(m is not None and '(default 0 = all cores)' in m.group(0), f'{cmd} --help: --threads does not say '
          f'"(default 0 = all cores)": {m.group(0) if m else "no -t,--threads"}')
env = {k: v for k, v in os.environ.items() if k != 'OMP_NUM_THREADS'}
x = os.path.join(scratch, 'x.npy')
subprocess.run(['/usr/bin/python3', '-c', f'import numpy as np; np.save({x!r}, np.ones((1,3,32,32), np.float32))'],
               check=True)
threads = json.loads(run('run', MODEL, '--input', f'input={x}', '--json', env=env))['threads']
check(threads == len(os.sched_getaffinity(0)), f'qtool run default threads {threads}, cores {len(os.sched_getaffinity(0))}')

# 3. Provenance.
tool_version = run('--version').split()[-1]
check((name, version) == ('qtool', tool_version), f'producer {name!r} {version!r}, expected qtool {tool_version}')
config = json.load(open(os.path.join(source, 'configs', 'int8.json')))
a, b = os.path.join(scratch, 'a.json'), os.path.join(scratch, 'b.json')
json.dump(config, open(a, 'w'), indent=2)
json.dump(dict(reversed(list(config.items()))), open(b, 'w'), separators=(',', ':'))  # other order, no spaces
digest = {}
for cfg in (a, b):
    out = os.path.join(scratch, os.path.basename(cfg) + '.onnx')
    run('quantize', MODEL, '-o', out, '--calib', calib, '--config', cfg)
    digest[cfg] = meta(out)[2].get('qtool.config_sha256')
check(digest[a] is not None and digest[a] == digest[b], f'config digest depends on layout: {digest}')
check(digest[a] == meta(q2)[2].get('qtool.config_sha256'), 'config digest of int8.json != built-in default')
out = os.path.join(scratch, 'guard.onnx')
run('quantize', MODEL, '-o', out, '--calib', calib, '--min-sqnr', '20')
check(meta(out)[2].get('qtool.config_sha256') != digest[a], '--min-sqnr does not change the config digest')
# The float model's own metadata stays; ours replaces a stale copy.
fm = onnx.load(MODEL)
fm.metadata_props.add(key='author', value='someone')
fm.metadata_props.add(key='qtool.config_sha256', value='stale')
tagged = os.path.join(scratch, 'tagged.onnx')
onnx.save(fm, tagged)
out = os.path.join(scratch, 'tagged_q.onnx')
run('quantize', tagged, '-o', out, '--calib', calib, '--allow-calib-mismatch')
props = onnx.load(out).metadata_props
check([p.key for p in props].count('qtool.config_sha256') == 1 and dict((p.key, p.value) for p in props).get(
    'author') == 'someone', f'metadata_props {[(p.key, p.value) for p in props]}')
# Deterministic: the same command writes the same bytes.
q3 = os.path.join(scratch, 'q3.onnx')
run('quantize', MODEL, '-o', q3, *flags)
check(sha256(q1) == sha256(q3), 'two identical quantize runs wrote different bytes')
# --prepare-only: producer and config, no calibration.
out = os.path.join(scratch, 'prep.onnx')
run('quantize', MODEL, '-o', out, '--prepare-only')
name, version, props = meta(out)
check(name == 'qtool' and 'qtool.config_sha256' in props and 'qtool.calibration_sha256' not in props,
      f'--prepare-only provenance {name} {props}')
# qtool inspect shows it.
j = json.loads(run('inspect', q1, '--json'))
check(j['producer'] == {'name': 'qtool', 'version': tool_version} and j['metadata'].get('qtool.calibration_sha256')
      == sha256(calib), f'inspect --json producer/metadata: {j["producer"]} {j["metadata"]}')

for f in failures:
    print('FAIL:', f)
print('options and provenance:', 'ok' if not failures else f'{len(failures)} failures')
sys.exit(1 if failures else 0)
