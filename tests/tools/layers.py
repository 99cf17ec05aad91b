#!/usr/bin/env python3
"""Layer check: fail when an #include in src/ reaches up a layer.

The layers, lowest first: core -> tensor -> cache/store -> http -> daemon; plan (model plans) sits
above tensor and below http: it uses core and tensor, http, daemon and cli may use it, nothing
below http may; cli is a side branch that uses core, tensor and plan; src/dashboard holds assets (no C). A file may include its own layer and
the ones below it. Public headers (include/posenc/*.h) belong to the layer that implements them
(PUBLIC below); a new public header must be added there, or the check fails and says so. Nothing in
src/ may include from tests/.

    tests/tools/layers.py [ROOT]    check ROOT/src (default: the repository), exit 1 on a violation
"""
import os
import re
import sys

RANK = {"core": 0, "tensor": 1, "cache": 2, "store": 2, "http": 3, "daemon": 4}
# What each layer may include; cli is outside the chain.
ALLOWED = {layer: {l for l, r in RANK.items() if r <= rank} for layer, rank in RANK.items()}
ALLOWED["plan"] = {"core", "tensor", "plan"}
ALLOWED["http"].add("plan")
ALLOWED["daemon"].add("plan")
ALLOWED["cli"] = {"core", "tensor", "plan", "cli"}
PUBLIC = {
    "version.h": "core", "err.h": "core", "dtype.h": "core", "core.h": "core", "resample.h": "core", "order.h": "core",
    "plan.h": "plan",
    "budget.h": "tensor", "warm.h": "tensor", "tensor.h": "tensor", "output.h": "tensor", "cache.h": "cache", "store.h": "store",
    "posenc.h": "cache",  # the umbrella header: err, dtype, core, tensor, cache
}
ASSETS = {"dashboard"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def layer_of(include, src_layer, file_dir, root):
    """The layer an include path lands in, None for a system header, or an error string."""
    parts = include.split("/")
    if parts[0] == "posenc" and len(parts) == 2:
        return PUBLIC.get(parts[1], "unknown public header posenc/%s (add it to PUBLIC in %s)"
                          % (parts[1], os.path.relpath(__file__, root)))
    if parts[0] in ("support", "tests", "fault", "fuzz"):
        return "a test header (src/ must not include from tests/)"
    if parts[0] in ALLOWED or parts[0] in ASSETS:
        return parts[0]
    target = os.path.normpath(os.path.join(file_dir, include))
    rel = os.path.relpath(target, os.path.join(root, "src"))
    if not rel.startswith(".."):
        return rel.split(os.sep)[0] if os.sep in rel else src_layer
    if os.path.exists(target):
        return "a file outside src/ and include/posenc/ (%s)" % os.path.relpath(target, root)
    return None  # <stdio.h>, <microhttpd.h>, ...


def check(root):
    src = os.path.join(root, "src")
    bad = []
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        layer = rel.split(os.sep)[0]
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            shown = os.path.relpath(path, root)
            if layer not in ALLOWED:
                bad.append("%s: src/%s is not a layer (%s)" % (shown, layer, " ".join(sorted(ALLOWED))))
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    to = layer_of(m.group(1), layer, dirpath, root)
                    if to is None or to in ALLOWED[layer]:
                        continue
                    why = to if to not in ALLOWED else "%s may use %s only" % (
                        layer, ", ".join(sorted(ALLOWED[layer])))
                    bad.append("%s:%d: #include \"%s\": %s" % (shown, lineno, m.group(1), why))
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    if not os.path.isdir(os.path.join(root, "src")):
        print("layers: no src/ under %s" % root, file=sys.stderr)
        return 2
    bad = check(root)
    for b in bad:
        print("layers: " + b)
    print("layers: %s" % ("ok" if not bad else "%d violation(s) of the layers" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
