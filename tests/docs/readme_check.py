#!/usr/bin/python3
"""Fails when the README's documented commands, outputs or options drift from what qtool does (issue 15).

The README marks what it wants checked with HTML comments (invisible on GitHub):

  <!-- readme-check -->           the fenced block after it is a session: each line starting with "$ " is a bash
                                  command, the lines after it (up to the next "$ " line) its expected stdout
                                  ("2>&1" in the command to show stderr too). A line "..." stands for any number
                                  of lines.
  <!-- readme-check: file NAME --> the fenced block after it is written to NAME, for the commands after it to use
                                  (so an example config is parsed by qtool, not just shown).
  <!-- readme-check: exit-codes --> the markdown table after it lists the exit codes `qtool --help` lists.

Blocks run in order in one scratch folder holding `models` and `configs` (links to the repository's), with qtool
first on PATH and $SHARED naming the shared models and data folder. Normalised before comparing, and nothing
else: durations ("0.3 s", "39.973 ms" -> "<time>"), rates ("2912.59 samples/s" -> "<rate>"), the expanded
shared folder (-> "$SHARED"), trailing spaces. Also checked: every --option the README names is one qtool
accepts (from each command's --help), except options of the other tools it names (KNOWN_OTHER below).

usage: readme_check.py QTOOL_BIN_DIR SOURCE_DIR SHARED_DIR SCRATCH_DIR"""
import os
import re
import shutil
import subprocess
import sys

bin_dir, source, shared, scratch = (os.path.abspath(p) for p in sys.argv[1:5])
readme_path = os.path.join(source, 'README.md')
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
for name in ('models', 'configs'):
    os.symlink(os.path.join(source, name), os.path.join(scratch, name))
env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ['PATH'], SHARED=shared,
           OMP_WAIT_POLICY='PASSIVE')
# Options of cmake, ctest and scripts/accuracy_table.py that the README names.
KNOWN_OTHER = {'--build', '--output-on-failure', '--brief', '--readme'}

failures = []
lines = open(readme_path, encoding='utf-8').read().split('\n')


def normalise(text):
    text = text.replace(os.path.realpath(shared), '$SHARED').replace(shared, '$SHARED')
    text = re.sub(r'\b\d+(\.\d+)? (ms|s)\b', '<time>', text)
    text = re.sub(r'\b\d+(\.\d+)? samples/s\b', '<rate>', text)
    return [ln.rstrip() for ln in text.rstrip('\n').split('\n')] if text.strip() else []


def matches(expected, actual):
    """expected may hold '...' lines, each matching any run of actual lines."""
    if not expected:
        return not actual
    if expected[0] == '...':
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def fenced_block(start):
    """The lines of the fenced block that begins at or after line `start`, and the line after it."""
    i = start
    while not lines[i].startswith('```'):
        i += 1
    j = i + 1
    while not lines[j].startswith('```'):
        j += 1
    return lines[i + 1:j], j + 1


def help_text(*args):
    return subprocess.run(['qtool', *args, '--help'], capture_output=True, text=True, env=env).stdout


sessions = 0
for n, line in enumerate(lines):
    m = re.match(r'<!-- readme-check(?:: (.*?))? -->', line.strip())
    if not m:
        continue
    what = m.group(1) or ''
    where = f'README.md:{n + 1}'
    if what.startswith('file '):
        block, _ = fenced_block(n + 1)
        with open(os.path.join(scratch, what[5:].strip()), 'w', encoding='utf-8') as f:
            f.write('\n'.join(block) + '\n')
    elif what == 'exit-codes':
        documented = []
        k = n + 1
        while k < len(lines) and (not lines[k].startswith('|') or lines[k].startswith('| code') or
                                  lines[k].startswith('|---')):
            k += 1
        while k < len(lines) and lines[k].startswith('|'):
            documented.append(int(lines[k].split('|')[1]))
            k += 1
        listed = [int(c) for c in re.findall(r'^\s+(\d)\s\s', help_text().split('Exit codes:')[-1], re.M)]
        if documented != listed:
            failures.append(f'{where}: exit codes {documented}, qtool --help lists {listed}')
    elif what == '':
        block, _ = fenced_block(n + 1)
        commands = []  # (command, expected lines)
        for b in block:
            if b.startswith('$ '):
                commands.append((b[2:], []))
            elif commands:
                commands[-1][1].append(b.rstrip())
        for cmd, expected in commands:
            sessions += 1
            r = subprocess.run(['bash', '-o', 'pipefail', '-c', cmd], cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=300)
            if r.returncode != 0:
                failures.append(f'{where}: `{cmd}` exited {r.returncode}: {r.stderr.strip()[-300:]}')
                continue
            actual = normalise(r.stdout)
            if not matches(normalise('\n'.join(expected)), actual):
                failures.append(f'{where}: `{cmd}` printed, after normalising:\n' + '\n'.join(actual) +
                                '\n--- the README shows:\n' + '\n'.join(expected))
    else:
        failures.append(f'{where}: unknown marker "{what}"')

# Options the README names must exist.
accepted = set()
for cmd in ([], ['inspect'], ['convert'], ['run'], ['calibrate'], ['quantize']):
    accepted |= set(re.findall(r'(--[a-z][\w-]*)', help_text(*cmd)))
named = set(re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*)', '\n'.join(lines)))
unknown = sorted(named - accepted - KNOWN_OTHER)
if unknown:
    failures.append(f'README names options no qtool command accepts: {", ".join(unknown)}')
if sessions == 0:
    failures.append('README.md has no <!-- readme-check --> block')

for f in failures:
    print('FAIL:', f)
print(f'README: {sessions} commands checked,', 'ok' if not failures else f'{len(failures)} failures')
sys.exit(1 if failures else 0)
