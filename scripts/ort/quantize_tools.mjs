#!/usr/bin/env node
// ONNX Runtime helpers for qtool's quantization tests (reads/writes .npy through ort_run.mjs).
//
//   vad-stream MODEL WAVE.npy --out PROBS.npy [--save-batch DIR]
//       Streams a Silero VAD model over a waveform: 512-sample hops, state carried; v5 and later (one `state`)
//       get 64 samples of context before each hop, v4 (`h`, `c`) none; an `sr` input gets 16000.
//       Writes the speech probability per chunk; --save-batch writes the inputs ([B,576] or [B,512]) and the
//       states ([2,B,128], or h and c [2,B,64]) that were fed, for calibration on the real stream.
//   run-rows MODEL --input NAME=FILE.npy ... --output-dir DIR
//       Runs MODEL once per row of the inputs (first axis; each row fed with a leading 1), for models that fix
//       the batch to 1, and writes each output stacked over the rows as DIR/<output>.npy. Prints one JSON line
//       {"outputs": {name: {shape, dtype, file}}} like ort_run.mjs.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readNpy, writeNpy } from './ort_run.mjs';

async function session(model) {
  // QTOOL_ORT_OPT_LEVEL: graph optimization level (default all), as in ort_run.mjs.
  return ort.InferenceSession.create(model, { logSeverityLevel: 3, intraOpNumThreads: 2, interOpNumThreads: 1,
                                              executionMode: 'sequential',
                                              graphOptimizationLevel: process.env.QTOOL_ORT_OPT_LEVEL || 'all' });
}

async function vadStream(args) {
  const [model, wave] = args;
  let out = null, saveDir = null;
  for (let i = 2; i < args.length; i++) {
    if (args[i] === '--out') out = args[++i];
    else if (args[i] === '--save-batch') saveDir = args[++i];
  }
  const s = await session(model);
  const x = readNpy(wave).data;
  // Silero VAD v4 ("legacy": 512 new samples, LSTM state h and c [2,1,64]) or v5 and later (64 samples of context
  // before the 512 new ones, one state [2,1,128]); an `sr` input, where the model has one, gets 16000.
  const legacy = s.inputNames.includes('h') && s.inputNames.includes('c');
  const hop = 512, ctx = legacy ? 0 : 64;
  const stateNames = legacy ? [['h', 'hn'], ['c', 'cn']] : [['state', 'stateN']];
  const stateDims = legacy ? [2, 1, 64] : [2, 1, 128];
  const stateSize = stateDims[0] * stateDims[2];
  let state = Object.fromEntries(stateNames.map(([i]) => [i, new Float32Array(stateSize)]));
  const sr = s.inputNames.includes('sr') ? new ort.Tensor('int64', BigInt64Array.from([16000n]), []) : null;
  let context = new Float32Array(ctx);
  const probs = [], inputs = [], states = Object.fromEntries(stateNames.map(([i]) => [i, []]));
  for (let off = 0; off + hop <= x.length; off += hop) {
    const buf = new Float32Array(ctx + hop);
    buf.set(context, 0);
    buf.set(x.subarray(off, off + hop), ctx);
    if (saveDir) {
      inputs.push(buf.slice());
      for (const [i] of stateNames) states[i].push(Float32Array.from(state[i]));
    }
    const feeds = { input: new ort.Tensor('float32', buf, [1, ctx + hop]) };
    for (const [i] of stateNames) feeds[i] = new ort.Tensor('float32', state[i], stateDims);
    if (sr) feeds.sr = sr;
    const res = await s.run(feeds);
    probs.push(res.output.data[0]);
    for (const [i, o] of stateNames) state[i] = Float32Array.from(res[o].data);
    context = buf.slice(hop);
  }
  writeNpy(out, new ort.Tensor('float32', Float32Array.from(probs), [probs.length]));
  if (saveDir) {
    fs.mkdirSync(saveDir, { recursive: true });
    const B = inputs.length, half = stateSize / 2;
    const inp = new Float32Array(B * (ctx + hop));
    inputs.forEach((b, i) => inp.set(b, i * (ctx + hop)));
    writeNpy(path.join(saveDir, 'input.npy'), new ort.Tensor('float32', inp, [B, ctx + hop]));
    for (const [name] of stateNames) {
      const st = new Float32Array(2 * B * half);  // [2, B, half]
      states[name].forEach((v, i) => { st.set(v.subarray(0, half), i * half); st.set(v.subarray(half), (B + i) * half); });
      writeNpy(path.join(saveDir, name + '.npy'), new ort.Tensor('float32', st, [2, B, half]));
    }
  }
}

async function runRows(args) {
  const model = args[0];
  const inputs = {};
  let outDir = null;
  for (let i = 1; i < args.length; i++) {
    if (args[i] === '--input') { const v = args[++i]; const eq = v.indexOf('='); inputs[v.slice(0, eq)] = v.slice(eq + 1); }
    else if (args[i] === '--output-dir') outDir = args[++i];
    else throw new Error(`run-rows: unexpected argument ${args[i]}`);
  }
  if (!outDir) throw new Error('run-rows: --output-dir is required');
  const s = await session(model);
  const full = {};
  for (const name of s.inputNames) {
    if (!(name in inputs)) throw new Error(`run-rows: missing --input for model input '${name}'`);
    full[name] = readNpy(inputs[name]);
  }
  const rows = full[s.inputNames[0]].dims[0];
  const parts = Object.fromEntries(s.outputNames.map(n => [n, []]));
  let first = null;
  for (let r = 0; r < rows; r++) {
    const feeds = {};
    for (const [name, t] of Object.entries(full)) {
      if (t.dims[0] !== rows) throw new Error(`run-rows: input '${name}' has ${t.dims[0]} rows, not ${rows}`);
      const per = t.data.length / rows;
      feeds[name] = new ort.Tensor(t.type, t.data.slice(r * per, (r + 1) * per), [1, ...t.dims.slice(1)]);
    }
    const res = await s.run(feeds);
    first = first ?? res;
    for (const n of s.outputNames) parts[n].push(res[n].data);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const out = { outputs: {} };
  for (const n of s.outputNames) {
    const t0 = first[n];
    const per = t0.data.length;
    const data = new t0.data.constructor(per * rows);
    parts[n].forEach((d, r) => data.set(d, r * per));
    const dims = [rows * t0.dims[0], ...t0.dims.slice(1)];
    const file = path.join(outDir, n.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy');
    writeNpy(file, new ort.Tensor(t0.type, data, dims));
    out.outputs[n] = { shape: dims, dtype: t0.type, file };
  }
  console.log(JSON.stringify(out));
}

const [cmd, ...rest] = process.argv.slice(2);
const fn = { 'vad-stream': vadStream, 'run-rows': runRows }[cmd];
if (!fn) { console.error('usage: quantize_tools.mjs vad-stream|run-rows ...'); process.exit(1); }
fn(rest).catch(e => { console.error(`quantize_tools: ${e.message}`); process.exit(2); });
