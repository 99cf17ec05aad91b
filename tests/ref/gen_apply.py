#!/usr/bin/python3
"""Known answers for POST /v1/sinusoidal/apply and /v1/alibi/apply from NumPy alone.

Run with Debian's interpreter: /usr/bin/python3 tests/ref/gen_apply.py
Writes tests/data/apply/<case>.in.npy (the body), <case>.out.npy and cases.json ({name, path,
query}). The tables are computed in float64 from their published formulas (Vaswani / concat /
tensor2tensor sinusoids; ALiBi slopes 2^(-max_bias*i/n) with the paper's rule for other head
counts, bias -slope*|q_pos - k|), rounded once to float32, and applied in float32 as PyTorch does:
x * xscale, then + pe (two roundings); masked scores are float32's lowest finite value."""
import json
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "apply")
F = np.float32
# libm's sin/cos element by element: NumPy's vectorised float64 sin/cos may use a less accurate SIMD
# library on some CPUs.
SIN, COS = np.vectorize(math.sin), np.vectorize(math.cos)


def sinusoid(seq, dim, variant="vaswani", base=10000.0, offset=0, mn=1.0, mx=None):
    pos = np.arange(offset, offset + seq, dtype=np.float64)[:, None]
    h = dim // 2
    if variant == "t2t":
        mx = base if mx is None else mx
        inc = math.log(mx / mn) / max(h - 1, 1)
        w = np.array([mn * math.exp(-k * inc) for k in range(h)])
        a = pos * w[None, :]
        t = np.concatenate([SIN(a), COS(a)], axis=1)
        return np.concatenate([t, np.zeros((seq, dim - 2 * h))], axis=1) if dim % 2 else t
    w = np.array([math.pow(base, -(2 * i) / dim) for i in range((dim + 1) // 2)])
    a = pos * w[None, :]
    if variant == "concat":
        return np.concatenate([SIN(a[:, :h]), COS(a[:, :h])], axis=1)
    t = np.empty((seq, dim))
    t[:, 0::2] = SIN(a)[:, : (dim + 1) // 2]
    t[:, 1::2] = COS(a)[:, :h]
    return t


def slopes(n, max_bias=8.0):
    def pow2(m):
        return [2.0 ** (-max_bias * (i + 1) / m) for i in range(m)]
    if n & (n - 1) == 0:
        return pow2(n)
    m = 1 << (n.bit_length() - 1)
    return pow2(m) + pow2(2 * m)[0::2][: n - m]


def alibi(heads, q, k, offset=None, max_bias=8.0):
    offset = k - q if offset is None else offset
    qp = np.arange(q)[:, None] + offset
    kk = np.arange(k)[None, :]
    s = np.array(slopes(heads, max_bias))[:, None, None]
    return -s * np.abs(qp - kk)[None, :, :], qp, kk


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = []

    def save(name, path, query, x, y):
        np.save(os.path.join(OUT, name + ".in.npy"), x)
        np.save(os.path.join(OUT, name + ".out.npy"), y)
        cases.append({"name": name, "path": path, "query": query})

    x = rng.standard_normal((2, 16, 32)).astype(F)
    save("sin_add", "/v1/sinusoidal/apply", "offset=5", x, x + F(sinusoid(16, 32, offset=5)).astype(F))
    x = rng.standard_normal((3, 12, 30)).astype(F)
    pe = sinusoid(12, 30, base=500.0).astype(F)
    save("sin_add_xscale", "/v1/sinusoidal/apply", "base=500&xscale=5.477226", x,
         ((x * F(5.477226)).astype(F) + pe).astype(F))
    x = rng.standard_normal((2, 10, 8)).astype(F)
    pe = sinusoid(10, 6, variant="t2t", mn=0.5, mx=1000.0).astype(F)
    save("sin_concat_t2t", "/v1/sinusoidal/apply", "mode=concat&pe_dim=6&variant=t2t&min_timescale=0.5&max_timescale=1000",
         x, np.concatenate([x, np.broadcast_to(pe, (2, 10, 6))], axis=2).astype(F))
    x = rng.standard_normal((2, 12, 5, 7)).astype(F)
    b, qp, kk = alibi(12, 5, 7)
    y = (x + b.astype(F)).astype(F)
    save("alibi_12heads", "/v1/alibi/apply", "", x, y)
    x = rng.standard_normal((1, 4, 3, 9)).astype(F)
    b, qp, kk = alibi(4, 3, 9, offset=2, max_bias=6.0)
    y = (x + b.astype(F)).astype(F)
    y[:, :, (kk > qp)] = np.finfo(F).min
    save("alibi_causal_offset", "/v1/alibi/apply", "mask=causal&offset=2&max_bias=6", x, y)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
