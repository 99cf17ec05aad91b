#!/usr/bin/env python3
"""No two files of src/ call each other: from the symbols each object file of src/ defines and uses
(nm), the pairs of files that both need the other. Issue 16's rule; a cycle between two files means
one of them should own what both use.

    tests/tools/file_cycles.py BUILD_DIR     exit 1 naming each pair (and the symbols) when any exists
"""
import collections
import glob
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
defs, uses = {}, collections.defaultdict(set)
objs = sorted(glob.glob(build + "/obj/src/**/*.o", recursive=True))
if not objs:
    sys.exit("file-cycles: no objects under %s/obj/src (build first)" % build)
for o in objs:
    out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRV":
            defs[f[2]] = o
        elif len(f) == 2 and f[0] == "U":
            uses[o].add(f[1])
need = collections.defaultdict(lambda: collections.defaultdict(list))
for o, names in uses.items():
    for n in names:
        if n in defs and defs[n] != o:
            need[o][defs[n]].append(n)
bad = [(a, b) for a in need for b in need[a] if a < b and a in need.get(b, {})]
for a, b in bad:
    print("file-cycles: %s <-> %s (%s / %s)" % (a, b, ", ".join(sorted(need[a][b])[:3]), ", ".join(sorted(need[b][a])[:3])))
print("file-cycles: %d object files, %d pairs calling each other" % (len(objs), len(bad)))
sys.exit(1 if bad else 0)
