#!/usr/bin/python3
"""Known answers for /v1/analysis/order (self-attention on X and on X permuted, with and without a
positional encoding), from a float64 NumPy reference written from the contract (openapi.yaml), not
from the C core.

Regenerate (from the repository root, with Debian's Python, which has numpy):

    /usr/bin/python3 tests/ref/gen_order.py

It rewrites tests/data/order/ (layout: tests/ref/kat.py) and prints a summary; tests/core/test_order.c
reads it. Files per case, float64:

  x_f64                  X as the seeded generator draws it (SplitMix64 + Box-Muller, re-implemented
                         here with Python integers and math.log/cos/sin, glibc's as the core's): the
                         C core must give these bits exactly
  attention_f64          softmax(Q K^T / sqrt(dim) + bias) for X, [len, len]
  attention_permuted_f64 the same for X[perm]
  output_f64             attention . V, [len, dim]
  output_permuted_f64    the same for X[perm]
and in cases.json output_difference = max |out(X[perm]) - out(X)[perm]| and equivariant.

The encodings, from their definitions: sinusoidal PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i),
w_i = base^(-2i/dim), added to X; RoPE (half layout) inv_freq = base^(-2i/dim) (linear scaling
divides it by factor), angles p * inv_freq repeated over both halves, Q = K = X cos + rotate_half(X)
sin, V = X; ALiBi one head, slope 2^-max_bias, bias -slope |i - j| added to the scaled scores.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kat  # noqa: E402  (before numpy: see kat.py)
import numpy as np  # noqa: E402

OUT = os.path.join(kat.DATA, "order")
MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
TWO_PI = 6.283185307179586

CASES = [
    # name, query (as a client writes it), len, dim
    ("none_l5_d6", "encoding=none&len=5&dim=6"),
    ("none_l2_d4_seed7", "encoding=none&len=2&dim=4&seed=7"),
    ("none_tokens", "encoding=none&tokens=0,1,2,1,0&dim=8&seed=3"),
    ("sinusoidal_l6_d8", "encoding=sinusoidal&len=6&dim=8"),
    ("sinusoidal_base100_perm", "encoding=sinusoidal&len=5&dim=6&base=100&perm=1,2,3,4,0"),
    ("sinusoidal_l2_d2", "encoding=sinusoidal&len=2&dim=2&seed=11"),
    ("rope_l6_d8", "encoding=rope&len=6&dim=8"),
    ("rope_linear2", "encoding=rope&len=7&dim=4&scaling=linear&factor=2&seed=5"),
    ("rope_l2_d2", "encoding=rope&len=2&dim=2&seed=11"),
    ("alibi_l6_d8_reversed", "encoding=alibi&len=6&dim=8"),
    ("alibi_rotate_mb4", "encoding=alibi&len=6&dim=8&max_bias=4&perm=1,2,3,4,5,0"),
    ("alibi_tokens_shuffled", "encoding=alibi&tokens=4,9,4,2&dim=6&perm=2,0,3,1&seed=2"),
]


def splitmix_stream(state):
    while True:
        state = (state + GAMMA) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


def draw_row(seed, token, dim):
    """Row `token` of the generator: SplitMix64 from seed + token * 2^32 * GAMMA, Box-Muller pairs."""
    gen = splitmix_stream((seed + token * (1 << 32) * GAMMA) & MASK)
    row = []
    for _ in range(0, dim, 2):
        u1 = ((next(gen) >> 12) + 0.5) * 2.0 ** -52
        u2 = ((next(gen) >> 12) + 0.5) * 2.0 ** -52
        r = math.sqrt(-2.0 * math.log(u1))
        a = TWO_PI * u2
        row += [r * math.cos(a), r * math.sin(a)]
    return row[:dim]


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def encode(p, enc, y):
    """(Q = K, V, bias) for the sequence y."""
    n, d = y.shape
    pos = np.arange(n, dtype=np.float64)[:, None]
    if enc == "sinusoidal":
        base = float(p.get("base", "10000"))
        w = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        pe = np.zeros((n, d))
        pe[:, 0::2] = np.sin(pos * w)
        pe[:, 1::2] = np.cos(pos * w)[:, : d // 2]
        return y + pe, y + pe, 0.0
    if enc == "rope":
        base = float(p.get("base", "10000"))
        inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
        if p.get("scaling") == "linear":
            inv = inv / float(p["factor"])
        ang = np.concatenate([pos * inv, pos * inv], axis=1)
        h = d // 2
        rot = np.concatenate([-y[:, h:], y[:, :h]], axis=1)
        q = y * np.cos(ang) + rot * np.sin(ang)
        return q, y, 0.0
    if enc == "alibi":
        m = 2.0 ** -float(p.get("max_bias", "8"))
        i = np.arange(n)
        return y, y, -m * np.abs(i[:, None] - i[None, :]).astype(np.float64)
    return y, y, 0.0


def attend(p, enc, y):
    q, v, bias = encode(p, enc, y)
    a = softmax_rows(q @ q.T / math.sqrt(y.shape[1]) + bias)
    return a, a @ v


def run(query):
    p = kat.parse_query(query, {"encoding": "none", "len": "8", "dim": "16", "seed": "0"})
    dim, seed = int(p["dim"]), int(p["seed"])
    tokens = [int(t) for t in p["tokens"].split(",")] if "tokens" in p else None
    n = len(tokens) if tokens else int(p["len"])
    x = np.array([draw_row(seed, t, dim) for t in (tokens or range(n))], dtype=np.float64)
    perm = [int(v) for v in p["perm"].split(",")] if "perm" in p else list(range(n - 1, -1, -1))
    a, out = attend(p, p["encoding"], x)
    ap, outp = attend(p, p["encoding"], x[perm])
    diff = float(np.max(np.abs(outp - out[perm])))
    return x, a, ap, out, outp, diff


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for name, query in CASES:
        x, a, ap, out, outp, diff = run(query)
        case = {"name": name, "table": "analysis/order", "query": query, "len": x.shape[0], "dim": x.shape[1],
                "output_difference": diff, "equivariant": diff <= 1e-9}
        for field, arr in (("x_f64", x), ("attention_f64", a), ("attention_permuted_f64", ap),
                           ("output_f64", out), ("output_permuted_f64", outp)):
            fname = "%s.%s.bin" % (name, field.replace("_f64", ".ref.f64"))
            np.ascontiguousarray(arr, dtype="<f8").tofile(os.path.join(OUT, fname))
            case[field] = fname
        cases.append(case)
        print("%-26s len %2d dim %2d  output_difference %.3g  equivariant %s" %
              (name, x.shape[0], x.shape[1], diff, diff <= 1e-9))
    doc = {"generator": "tests/ref/gen_order.py", "versions": {"numpy": np.__version__, "python": sys.version.split()[0]},
           "cases": cases}
    import json
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
