#!/usr/bin/env node
// Runs a KV-cache decoder's generate loop in ONNX Runtime 1.30 (CPU), the way a user's loop feeds it: a prefill over
// the prompt with empty past (past_len 0), then one token per step with each present.* output fed back as the
// matching past_key_values.* input. Tokens are teacher-forced from TOKENS so that two models (float and quantized)
// see the same ids and their logits can be compared step by step.
//
// usage: node scripts/ort/ort_generate.mjs MODEL --tokens FILE.npy (int64 [B, T]) --prompt P --steps N
//          --past-shape HEADS,HEAD_DIM --output-dir DIR [--threads N]
// Model inputs: input_ids, attention_mask, position_ids, past_key_values.* ([B, HEADS, past_len, HEAD_DIM]) and,
// for a merged decoder, use_cache_branch (bool [1]: false on the prefill, true after). Outputs: logits, present.*.
// Writes DIR/logits.npy (float32 [N + 1, B, vocab]: the last position's logits of the prefill and of each step) and
// DIR/<present name>.npy (the cache after the last step); prints one JSON line {"steps", "present": [names]}.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readNpy, writeNpy } from './ort_run.mjs';

function parseArgs(argv) {
  const a = { threads: 1, model: null, tokens: null, prompt: 0, steps: 0, past: null, outputDir: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${k} needs a value`); return argv[++i]; };
    if (k === '--tokens') a.tokens = next();
    else if (k === '--prompt') a.prompt = Number(next());
    else if (k === '--steps') a.steps = Number(next());
    else if (k === '--past-shape') a.past = next().split(',').map(Number);
    else if (k === '--output-dir') a.outputDir = next();
    else if (k === '--threads') a.threads = Number(next());
    else if (!a.model) a.model = k;
    else throw new Error(`unexpected argument ${k}`);
  }
  if (!a.model || !a.tokens || !a.past || !a.outputDir || a.prompt < 1)
    throw new Error('usage: ort_generate.mjs MODEL --tokens FILE.npy --prompt P --steps N --past-shape H,D --output-dir DIR');
  return a;
}

const int64 = (values, dims) => new ort.Tensor('int64', BigInt64Array.from(values, v => BigInt(v)), dims);

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(a.model, { logSeverityLevel: 3, intraOpNumThreads: a.threads,
                                                               interOpNumThreads: 1, executionMode: 'sequential' });
  const tokens = readNpy(a.tokens);
  const [B, T] = tokens.dims;
  if (a.prompt + a.steps > T) throw new Error(`--prompt + --steps (${a.prompt + a.steps}) exceeds the ${T} tokens`);
  const tok = Array.from(tokens.data, Number);
  const pastNames = session.inputNames.filter(n => n.startsWith('past_key_values.'));
  let past = Object.fromEntries(pastNames.map(n => [n, new ort.Tensor('float32', new Float32Array(0), [B, a.past[0], 0, a.past[1]])]));
  const logits = [];
  let vocab = 0, results = null;
  for (let step = 0, pos = 0; step <= a.steps; step++) {
    const len = step === 0 ? a.prompt : 1;
    const ids = [], mask = [], posIds = [];
    for (let b = 0; b < B; b++)
      for (let s = 0; s < len; s++) { ids.push(tok[b * T + pos + s]); posIds.push(pos + s); }
    for (let b = 0; b < B; b++) for (let s = 0; s < pos + len; s++) mask.push(1);
    const feeds = { input_ids: int64(ids, [B, len]), attention_mask: int64(mask, [B, pos + len]),
                    position_ids: int64(posIds, [B, len]), ...past };
    if (session.inputNames.includes('use_cache_branch')) feeds.use_cache_branch = new ort.Tensor('bool', [step > 0], [1]);
    results = await session.run(feeds);
    const lg = results.logits;
    vocab = lg.dims[2];
    for (let b = 0; b < B; b++) {
      const off = (b * len + len - 1) * vocab;
      logits.push(...lg.data.subarray(off, off + vocab));
    }
    past = Object.fromEntries(pastNames.map(n => [n, results[n.replace('past_key_values.', 'present.')]]));
    pos += len;
  }
  fs.mkdirSync(a.outputDir, { recursive: true });
  writeNpy(path.join(a.outputDir, 'logits.npy'), new ort.Tensor('float32', Float32Array.from(logits), [a.steps + 1, B, vocab]));
  const present = pastNames.map(n => n.replace('past_key_values.', 'present.'));
  for (const n of present) writeNpy(path.join(a.outputDir, n + '.npy'), results[n]);
  console.log(JSON.stringify({ steps: a.steps, present }));
}

main().catch(e => { console.error(`ort_generate: ${e.message}`); process.exit(2); });
