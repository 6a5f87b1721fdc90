#!/usr/bin/env node
// ONNX Runtime helpers for qtool's quantization tests (reads/writes .npy through ort_run.mjs).
//
//   minmax MODEL --input NAME=FILE.npy ... [--input ...] --out STATS.json
//       Runs MODEL once per group of inputs (repeat --input NAME=... per sample; a new sample starts when a
//       name repeats) and writes {output name: [min, max, count, nan_count]} over all float outputs.
//   vad-stream MODEL WAVE.npy --out PROBS.npy [--save-batch DIR]
//       Streams a Silero VAD model over a waveform: 512-sample hops with 64 samples of context, state carried.
//       Writes the speech probability per chunk; --save-batch writes the [B,576] inputs and [2,B,128] states
//       that were fed, for calibration on the real stream.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readNpy, writeNpy } from './ort_run.mjs';

async function session(model) {
  return ort.InferenceSession.create(model, { logSeverityLevel: 3, intraOpNumThreads: 2, interOpNumThreads: 1,
                                              executionMode: 'sequential' });
}

async function minmax(args) {
  const model = args[0];
  const samples = [{}];
  let out = null;
  for (let i = 1; i < args.length; i++) {
    if (args[i] === '--out') { out = args[++i]; continue; }
    if (args[i] !== '--input') throw new Error(`unexpected ${args[i]}`);
    const v = args[++i];
    const eq = v.indexOf('=');
    const name = v.slice(0, eq);
    if (name in samples[samples.length - 1]) samples.push({});
    samples[samples.length - 1][name] = v.slice(eq + 1);
  }
  const s = await session(model);
  const stats = {};
  for (const sample of samples) {
    const feeds = {};
    for (const [k, f] of Object.entries(sample)) feeds[k] = readNpy(f);
    const res = await s.run(feeds);
    for (const name of s.outputNames) {
      const t = res[name];
      if (t.type !== 'float32') continue;
      const st = stats[name] ?? (stats[name] = [Infinity, -Infinity, 0, 0]);
      for (const v of t.data) {
        if (Number.isNaN(v)) { st[3]++; continue; }
        if (v < st[0]) st[0] = v;
        if (v > st[1]) st[1] = v;
      }
      st[2] += t.data.length;
    }
  }
  fs.writeFileSync(out, JSON.stringify(stats));
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
  const hop = 512, ctx = 64;
  let state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  let context = new Float32Array(ctx);
  const probs = [], inputs = [], states = [];
  for (let off = 0; off + hop <= x.length; off += hop) {
    const buf = new Float32Array(ctx + hop);
    buf.set(context, 0);
    buf.set(x.subarray(off, off + hop), ctx);
    if (saveDir) { inputs.push(buf.slice()); states.push(Float32Array.from(state.data)); }
    const res = await s.run({ input: new ort.Tensor('float32', buf, [1, ctx + hop]), state });
    probs.push(res.output.data[0]);
    state = new ort.Tensor('float32', Float32Array.from(res.stateN.data), [2, 1, 128]);
    context = buf.slice(hop);
  }
  writeNpy(out, new ort.Tensor('float32', Float32Array.from(probs), [probs.length]));
  if (saveDir) {
    fs.mkdirSync(saveDir, { recursive: true });
    const B = inputs.length;
    const inp = new Float32Array(B * (ctx + hop));
    inputs.forEach((b, i) => inp.set(b, i * (ctx + hop)));
    const st = new Float32Array(2 * B * 128);  // [2, B, 128]
    states.forEach((v, i) => { st.set(v.subarray(0, 128), i * 128); st.set(v.subarray(128), (B + i) * 128); });
    writeNpy(path.join(saveDir, 'input.npy'), new ort.Tensor('float32', inp, [B, ctx + hop]));
    writeNpy(path.join(saveDir, 'state.npy'), new ort.Tensor('float32', st, [2, B, 128]));
  }
}

const [cmd, ...rest] = process.argv.slice(2);
const fn = { minmax, 'vad-stream': vadStream }[cmd];
if (!fn) { console.error('usage: quantize_tools.mjs minmax|vad-stream ...'); process.exit(1); }
fn(rest).catch(e => { console.error(`quantize_tools: ${e.message}`); process.exit(2); });
