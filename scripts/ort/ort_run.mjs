#!/usr/bin/env node
// Runs an ONNX model in ONNX Runtime 1.30 (CPU) on .npy inputs and writes each output as .npy.
// The reference runner for qtool's tests and benchmarks.
//
// usage: node scripts/ort/ort_run.mjs MODEL [--input NAME=FILE.npy ...] [--output-dir DIR]
//          [--threads N] [--repeat N] [--optimized-model PATH] [--opt-level all|basic|extended|disabled]
//          [--against MODEL_B] [--profile PREFIX]
// The opt level defaults to $QTOOL_ORT_OPT_LEVEL when set, else all.
// Prints one JSON line: {"outputs": {name: {shape, dtype, file}}, "latency_ms": {median, min, max, runs}}
// With --against (and --repeat), MODEL_B runs on the same inputs in the same process, its runs alternating with
// MODEL's, so both see the same machine load; the line adds "latency_b_ms" and "ratio": the median over the
// run pairs of B's time / MODEL's time. "cpu_ms", "cpu_b_ms" and "cpu_ratio" are the same for the process's CPU time
// (user + system, all threads) during each run: with --threads 1 that is the work itself, and it does not grow when
// the machine's load preempts the run (cache and memory contention from other processes still count).
// With --profile, ORT writes its per-node profile (Chrome trace JSON) to PREFIX_<date>.json, covering the
// warm-up run and the --repeat runs of MODEL (scripts/ort/profile_summary.py sums it per op type).
// Output files are named after the output with characters outside [A-Za-z0-9_.-] replaced by '_'.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ort from 'onnxruntime-node';

const NPY_TO_ORT = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array], '<i2': ['int16', Int16Array], '<u2': ['uint16', Uint16Array],
  '<i4': ['int32', Int32Array], '<u4': ['uint32', Uint32Array], '<i8': ['int64', BigInt64Array],
  '<u8': ['uint64', BigUint64Array], '|b1': ['bool', Uint8Array], '<f2': ['float16', Uint16Array],
};
const ORT_TO_NPY = Object.fromEntries(Object.entries(NPY_TO_ORT).map(([k, [t]]) => [t, k]));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number);
  const entry = NPY_TO_ORT[descr];
  if (!entry) throw new Error(`${file}: unsupported dtype ${descr}`);
  const [type, Arr] = entry;
  const data = buf.subarray(hstart + hlen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  let arr = new Arr(copy.buffer, 0, copy.length / Arr.BYTES_PER_ELEMENT);
  if (type === 'bool') arr = Uint8Array.from(arr).map(v => v !== 0);
  return new ort.Tensor(type, type === 'bool' ? Array.from(arr) : arr, shape);
}

function writeNpy(file, tensor) {
  const descr = ORT_TO_NPY[tensor.type];
  if (!descr) throw new Error(`output type ${tensor.type} cannot be written as .npy`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  const body = tensor.type === 'bool' ? Buffer.from(Array.from(d, v => (v ? 1 : 0)))
                                      : Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function parseArgs(argv) {
  const a = { inputs: {}, threads: 1, repeat: 0, outputDir: null, optimized: null, optLevel: process.env.QTOOL_ORT_OPT_LEVEL || 'all', model: null,
              against: null, profile: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${k} needs a value`); return argv[++i]; };
    if (k === '--input') { const v = next(); const eq = v.indexOf('='); a.inputs[v.slice(0, eq)] = v.slice(eq + 1); }
    else if (k === '--output-dir') a.outputDir = next();
    else if (k === '--threads') a.threads = Number(next());
    else if (k === '--repeat') a.repeat = Number(next());
    else if (k === '--optimized-model') a.optimized = next();
    else if (k === '--opt-level') a.optLevel = next();
    else if (k === '--against') a.against = next();
    else if (k === '--profile') a.profile = next();
    else if (!a.model) a.model = k;
    else throw new Error(`unexpected argument ${k}`);
  }
  if (!a.model) throw new Error('usage: ort_run.mjs MODEL [--input NAME=FILE.npy ...] [--output-dir DIR]');
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const opts = { logSeverityLevel: 3, intraOpNumThreads: a.threads, interOpNumThreads: 1, graphOptimizationLevel: a.optLevel,
                 executionMode: 'sequential' };
  if (a.optimized) opts.optimizedModelFilePath = a.optimized;
  if (a.profile) { opts.enableProfiling = true; opts.profileFilePrefix = a.profile; }
  const session = await ort.InferenceSession.create(a.model, opts);
  const feeds = {};
  for (const name of session.inputNames) {
    if (!(name in a.inputs)) throw new Error(`missing --input for model input '${name}'`);
    feeds[name] = readNpy(a.inputs[name]);
  }
  let results = await session.run(feeds);
  const optsB = { ...opts };
  delete optsB.optimizedModelFilePath;
  delete optsB.enableProfiling;
  delete optsB.profileFilePrefix;
  const other = a.against ? await ort.InferenceSession.create(a.against, optsB) : null;
  if (other) await other.run(feeds);
  const times = [], timesB = [], ratios = [], cpu = [], cpuB = [], cpuRatios = [];
  // Wall time and the process's CPU time (user + system, all threads) of one run.
  const timed = async (s) => {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const r = await s.run(feeds);
    const wall = Number(process.hrtime.bigint() - t0) / 1e6;
    const c = process.cpuUsage(c0);
    return [r, wall, (c.user + c.system) / 1e3];
  };
  for (let r = 0; r < a.repeat; r++) {
    let t, c;
    [results, t, c] = await timed(session);
    times.push(t);
    cpu.push(c);
    if (other) {
      const [, tb, cb] = await timed(other);
      timesB.push(tb);
      ratios.push(tb / t);
      cpuB.push(cb);
      cpuRatios.push(cb / c);
    }
  }
  const out = { outputs: {} };
  for (const name of session.outputNames) {
    const t = results[name];
    const entry = { shape: t.dims, dtype: t.type };
    if (a.outputDir) {
      fs.mkdirSync(a.outputDir, { recursive: true });
      entry.file = path.join(a.outputDir, name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy');
      writeNpy(entry.file, t);
    }
    out.outputs[name] = entry;
  }
  const stats = (v) => {
    v.sort((x, y) => x - y);
    return { median: v[Math.floor(v.length / 2)], min: v[0], max: v[v.length - 1], runs: v.length };
  };
  if (times.length) {
    out.latency_ms = stats(times);
    out.cpu_ms = stats(cpu);
  }
  if (timesB.length) {
    out.latency_b_ms = stats(timesB);
    out.ratio = stats(ratios).median;
    out.cpu_b_ms = stats(cpuB);
    out.cpu_ratio = stats(cpuRatios).median;
  }
  if (a.profile) session.endProfiling();
  console.log(JSON.stringify(out));
}

export { readNpy, writeNpy };

if (import.meta.url === pathToFileURL(process.argv[1]).href)
  main().catch(e => { console.error(`ort_run: ${e.message}`); process.exit(2); });
