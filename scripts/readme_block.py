"""Writes a script's generated table into the README, after the script's own marker line.

The marker is a line `<!-- generated: COMMAND (DATE) -->` whose COMMAND names the script; the block after it
runs up to and including the first line matching `end`. Both table scripts (accuracy_table.py,
weight_only_table.py) use this, so the README's figures always come with the command that made them.
"""
import datetime
import re
import sys


def write_into(path, script, block, command, end):
    """Replaces the block after `script`'s generated-marker line in `path` with `block` (which must itself end
    with a line matching the regular expression `end`), and re-dates the marker."""
    text = open(path, encoding='utf-8').read()
    marker = re.compile(r'<!-- generated: [^\n]*' + re.escape(script) + r'[^\n]*-->\n.*?' + end + r'[^\n]*\n', re.S)
    if not marker.search(text):
        sys.exit(f'{path}: no "<!-- generated: ... {script} ... -->" line followed by its table')
    stamp = f'<!-- generated: {command} ({datetime.date.today().isoformat()}) -->\n'
    text = marker.sub(lambda _: stamp + block, text, count=1)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)
