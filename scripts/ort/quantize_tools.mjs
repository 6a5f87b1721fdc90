#!/usr/bin/env node
// ONNX Runtime helpers for qtool's quantization tests (reads/writes .npy through ort_run.mjs).
//
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
const fn = { 'vad-stream': vadStream }[cmd];
if (!fn) { console.error('usage: quantize_tools.mjs vad-stream ...'); process.exit(1); }
fn(rest).catch(e => { console.error(`quantize_tools: ${e.message}`); process.exit(2); });
