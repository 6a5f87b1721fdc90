#!/usr/bin/python3
"""Perplexity of llama2c-aidreams-260k per weight algorithm (docs/weight-only.md).

usage: scripts/weight_only_table.py [--config configs/int4-weight-only.json] [--methods rtn,clip_search,gptq,awq]
                                   [--readme FILE]

For each method, the config's MatMul/Gemm weight "algorithm" is set to it (the Gather embedding keeps the
config's own), and tests/quantize/acceptance.py llama2c scores the result in ONNX Runtime 1.30: quantize with
--data llama2c_calib32, perplexity and next-token agreement on llama2c_eval32 (disjoint prompts). Prints a
Markdown table with the date and command. --readme FILE also writes the table (without the timing column, which
depends on the machine) into FILE after its "<!-- generated: ... weight_only_table.py" line, up to its "Best:" line.
"""
import argparse
import datetime
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
from readme_block import write_into  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--config', default=os.path.join(ROOT, 'configs', 'int4-weight-only.json'))
    ap.add_argument('--methods', default='rtn,clip_search,gptq,awq')
    ap.add_argument('--readme', help='also write the table into this file after its "<!-- generated: ..." marker')
    a = ap.parse_args()
    base = json.load(open(a.config))
    rows = []
    with tempfile.TemporaryDirectory(prefix='qtool-wo-') as tmp:
        for method in a.methods.split(','):
            cfg = json.loads(json.dumps(base))
            cfg['global']['weight']['algorithm'] = method
            path = os.path.join(tmp, method + '.json')
            json.dump(cfg, open(path, 'w'))
            r = subprocess.run([sys.executable, os.path.join(ROOT, 'tests', 'quantize', 'acceptance.py'), 'llama2c',
                                '--config', path], capture_output=True, text=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            m = {x['metric'].split(' (')[0]: x for x in res['metrics']}
            ppl = m['perplexity of the sampled tokens']
            agree = m['next-token top-1 agreement with float']
            rows.append((method, ppl['float'], ppl['int8'], ppl['int8'] / ppl['float'], agree['int8'],
                         res['seconds'].get('quantize')))
    print(f'{datetime.date.today()}, `{" ".join(["scripts/weight_only_table.py"] + sys.argv[1:])}` '
          f'({os.path.basename(a.config)}: MatMul/Gemm algorithm varied)\n')
    print('| method | float ppl | int4 ppl | ratio | next-token agreement | quantize s |')
    print('|---|---|---|---|---|---|')
    for method, pf, pq, ratio, ag, sec in rows:
        print(f'| {method} | {pf:.3f} | {pq:.3f} | {ratio:.4f} | {ag:.4f} | {sec} |')
    if a.readme:
        block = io.StringIO()
        block.write('| method | float ppl | int4 ppl | × float | next-token agreement |\n|---|---|---|---|---|\n')
        for method, pf, pq, ratio, ag, _ in rows:
            block.write(f'| {method} | {pf:.3f} | {pq:.3f} | {ratio:.4f} | {ag:.4f} |\n')
        best = min(rows, key=lambda r: r[3])
        block.write(f'\nBest: {best[0]}, {best[3]:.4f} × float perplexity.\n')
        write_into(a.readme, 'weight_only_table.py', block.getvalue(),
                   ' '.join(['/usr/bin/python3', 'scripts/weight_only_table.py'] + sys.argv[1:]), end=r'\nBest: ')


if __name__ == '__main__':
    main()
