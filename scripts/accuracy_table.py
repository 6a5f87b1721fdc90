#!/usr/bin/python3
"""Runs the out-of-sample acceptance check of every shared model (tests/quantize/acceptance.py) and prints a
markdown table: model, metric, float, int8, bar, pass, seconds. Each check calibrates on one set of inputs and
scores on a disjoint one in ONNX Runtime 1.30 (the splits and bars are in acceptance.py's docstring).

usage: scripts/accuracy_table.py [--config QCONFIG.json] [--models KEY,KEY,...] [--json OUT.json] [--brief]
--brief prints the README's table: the checks only (no informational rows) and no seconds column.
--readme FILE also writes the table into FILE, after its "<!-- generated: ... accuracy_table.py" line (dated
today), replacing the old table up to its "models meet their bars." line.
Environment: QTOOL_EXE (default build/bin/qtool), QTOOL_SHARED_DIR (default ../shared).
Exit status: 0 when every check passed, 1 when one failed. To compare range methods, run it once per config.
"""
import argparse
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ACCEPTANCE = os.path.join(HERE, '..', 'tests', 'quantize', 'acceptance.py')
sys.path.insert(0, os.path.dirname(ACCEPTANCE))
from acceptance import CHECKS  # noqa: E402
from readme_block import write_into  # noqa: E402


def cell(v):
    if v is None:
        return '—'
    if isinstance(v, float):
        return f'{v:.4g}'
    return str(v).replace('|', '\\|')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--config', help='QConfig JSON passed to every check (default: qtool\'s built-in default)')
    ap.add_argument('--models', default=','.join(CHECKS), help='comma-separated check keys (default: all eleven)')
    ap.add_argument('--json', help='also write every check\'s JSON line to this file (a JSON list)')
    ap.add_argument('--brief', action='store_true', help='the README\'s table: checks only, no seconds column')
    ap.add_argument('--readme', help='write the table into this file after its "<!-- generated: ..." marker')
    a = ap.parse_args()
    if a.readme and not a.brief:
        ap.error('--readme writes the --brief table: add --brief')
    keys = [k for k in a.models.split(',') if k]
    unknown = [k for k in keys if k not in CHECKS]
    if unknown:
        ap.error(f'unknown model key(s) {", ".join(unknown)}: choose from {", ".join(CHECKS)}')
    config = os.path.abspath(a.config) if a.config else None
    results = []
    for k in keys:
        cmd = [sys.executable, ACCEPTANCE, k] + (['--config', config] if config else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        lines = r.stdout.strip().splitlines()
        try:
            res = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            err = (r.stderr.strip().splitlines() or ['no output'])[-1]
            res = {'model': k, 'ok': False, 'failures': [f'check crashed ({r.returncode}): {err}'], 'metrics': [],
                   'seconds': {}}
        results.append(res)
        print(f'{k}: {"pass" if res["ok"] else "FAIL"} ({res["seconds"].get("total", "?")} s)', file=sys.stderr)
    table = io.StringIO()
    stdout, sys.stdout = sys.stdout, table
    if not a.brief:
        print(f'config: {a.config or "default"}\n')
    print('| model | metric | float | int8 | bar | pass |' + ('' if a.brief else ' s |'))
    print('|---|---|---|---|---|---|' + ('' if a.brief else '---|'))
    for res in results:
        name = res.get('file', res['model'])
        total = res['seconds'].get('total', '')
        if not res['metrics']:
            print(f'| {name} | {cell("; ".join(res["failures"]))} | — | — | — | **FAIL** |' +
                  ('' if a.brief else f' {total} |'))
        metrics = [m for m in res['metrics'] if not (a.brief and m['ok'] is None)]
        for i, m in enumerate(metrics):
            ok = '—' if m['ok'] is None else ('yes' if m['ok'] else '**FAIL**')
            print(f'| {name if i == 0 else ""} | {cell(m["metric"])} | {cell(m["float"])} | {cell(m["int8"])} | '
                  f'{cell(m["bar"])} | {ok} |' + ('' if a.brief else f' {total if i == 0 else ""} |'))
    passed = sum(r['ok'] for r in results)
    print(f'\n{passed}/{len(results)} models meet their bars.')
    sys.stdout = stdout
    print(table.getvalue(), end='')
    if a.readme:
        write_into(a.readme, 'accuracy_table.py', table.getvalue(),
                   ' '.join(['/usr/bin/python3', 'scripts/accuracy_table.py'] + sys.argv[1:]),
                   end=r'models meet their bars\.')
    if a.json:
        with open(a.json, 'w', encoding='utf-8') as f:
            json.dump(results, f, ensure_ascii=False, indent=1)
    return 0 if passed == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
