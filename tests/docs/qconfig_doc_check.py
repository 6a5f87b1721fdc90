#!/usr/bin/env python3
"""Fails when docs/qconfig.md does not name a key the QConfig parser accepts, or names one it refuses.

The parser lists each object's allowed keys in one `ctx.object(json, path, {"key", ...})` call
(lib/quantize/qconfig.cc); every such key must appear in the reference, in backticks or as a quoted JSON key,
and every key a table's first column names must be one of them.

Usage: qconfig_doc_check.py SOURCE_DIR
"""
import os
import re
import sys

source = sys.argv[1]
parser_text = open(os.path.join(source, 'lib', 'quantize', 'qconfig.cc')).read()
doc_text = open(os.path.join(source, 'docs', 'qconfig.md')).read()

keys = set()
for call in re.finditer(r'ctx\.object\([^{]*\{([^}]*)\}', parser_text):
    keys.update(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', call.group(1)))
if len(keys) < 30:
    sys.exit(f'found only {len(keys)} keys in qconfig.cc: the ctx.object pattern no longer matches the parser')

# A key is named as `key`, or quoted inside a JSON fragment (`{"pattern": ..., "rule": ...}`).
documented = set(re.findall(r'`([A-Za-z_][A-Za-z0-9_]*)`', doc_text)) | set(re.findall(r'"([a-z_]+)":', doc_text))
missing = sorted(keys - documented)
# A key-shaped word the first column of a table names ("| `key` |") must be a key the parser accepts.
table_keys = set(re.findall(r'^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|', doc_text, re.M))
stale = sorted({k for pair in table_keys for k in pair if k} - keys)

failures = []
if missing:
    failures.append('docs/qconfig.md does not name these QConfig keys: ' + ', '.join(missing))
if stale:
    failures.append('docs/qconfig.md documents keys the parser refuses: ' + ', '.join(stale))
print(f'docs/qconfig.md: {len(keys)} parser keys checked,', 'ok' if not failures else '\n'.join(failures))
sys.exit(1 if failures else 0)
