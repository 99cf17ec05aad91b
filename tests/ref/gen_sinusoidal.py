#!/usr/bin/python3
"""Known answers for /v1/sinusoidal, from references independent of the C core.

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_sinusoidal.py

It rewrites tests/data/sinusoidal/ and prints a summary. tests/core/test_sinusoidal.c reads it.
Every file is raw little-endian, C order, shape [len, dim] as in cases.json:

  <case>.ref.f64.bin    (a) float64 as a NumPy user computes it, forming frequency and angle like
                        the core's compat=exact: w_i = math.pow(base, -(2i)/dim) (vaswani, concat),
                        w_k = min_ts*math.exp(-k*inc), inc = math.log(max_ts/min_ts)/max(h-1,1) (t2t);
                        angle = float64(p)*w; np.sin / np.cos in float64.
  <case>.mp.f64.bin     (b) only for cases with "mp" in cases.json: sin/cos of the same float64 angle
                        in mpmath at 40 digits, rounded once to float64 (the true value; shows the
                        error of (a) and of the core).
  <case>.torch.f32.bin  (c) PyTorch float32 as the seed code builds it: div = torch.exp(torch.arange(0,
                        d, 2).float() * (-math.log(base)/d)), position * div with an int64 position
                        column, torch.sin / torch.cos (fairseq's get_embedding for t2t, with t2t's
                        min_timescale factor); torch.set_num_threads(1). compat=hf reproduces this.
  cases.json            every case: name, query (exactly as a client sends it, compat=exact by
                        default), hf_query (the same with compat=hf), shape, file names.

Why NumPy's SIMD sin is switched off: on CPUs with AVX512_SKX, NumPy 1.24 computes float64 sin/cos
with SVML, measured up to 2.8 ulp off the true value, and so would make (a) depend on the machine
that ran this script. The script sets NPY_DISABLE_CPU_FEATURES before importing numpy, so np.sin is
libm's (glibc, < 1 ulp) everywhere, and checks that it equals math.sin element for element.

torch's float32 exp/sin/cos on a CPU with AVX2 are SLEEF's u10 FMA kernels (Debian's libsleef):
(c) is what PyTorch gives on such a CPU (its generic build would use libm instead).
"""
import json
import math
import os
import sys

os.environ["NPY_DISABLE_CPU_FEATURES"] = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"
import numpy as np  # noqa: E402
import mpmath  # noqa: E402
import torch  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sinusoidal")

# name, query (as a client writes it), whether to store the mpmath value
CASES = [
    ("vaswani_d32", "len=64&dim=32", True),
    ("vaswani_d33_off1e6", "len=48&dim=33&variant=vaswani&offset=1000000", True),
    ("vaswani_d128_base5e5", "len=96&dim=128&base=500000", False),
    ("vaswani_len300_d128", "len=300&dim=128", False),
    ("vaswani_d64_off2p31", "len=32&dim=64&offset=2147483648", True),
    ("vaswani_d1", "len=8&dim=1", False),
    ("vaswani_d7_base2.5", "len=20&dim=7&base=2.5&offset=123", True),
    ("vaswani_d65_base1e4_off2p40", "len=16&dim=65&base=1e4&offset=1099511627776", True),
    ("concat_d64", "len=100&dim=64&variant=concat", True),
    ("concat_d96_base1000_off123456", "len=40&dim=96&variant=concat&base=1000&offset=123456", False),
    ("concat_d2_off2p31", "len=10&dim=2&variant=concat&offset=2147483648", True),
    ("t2t_d64", "len=64&dim=64&variant=t2t", True),
    ("t2t_d31_ts_off1e6", "len=33&dim=31&variant=t2t&min_timescale=2&max_timescale=50000&offset=1000000", True),
    ("t2t_d2", "len=10&dim=2&variant=t2t", False),
    ("t2t_d3_base100", "len=12&dim=3&variant=t2t&base=100", True),
    ("t2t_d128_maxts1e6_off2p31", "len=24&dim=128&variant=t2t&max_timescale=1000000&offset=2147483648", True),
    ("t2t_d40_base500", "len=200&dim=40&base=500&variant=t2t&offset=7", False),
    ("t2t_d16_ts_small", "len=50&dim=16&variant=t2t&min_timescale=0.5&max_timescale=0.75", True),
    ("t2t_d24_ts_inexact", "len=40&dim=24&variant=t2t&min_timescale=0.1&max_timescale=333.3&offset=99", True),
]

DEFAULTS = {"base": "10000", "offset": "0", "variant": "vaswani", "min_timescale": "1"}


def parse(query):
    p = dict(DEFAULTS)
    for kv in query.split("&"):
        k, v = kv.split("=", 1)
        p[k] = v
    p.setdefault("max_timescale", p["base"])
    return {
        "len": int(p["len"]), "dim": int(p["dim"]), "base": float(p["base"]), "offset": int(p["offset"]),
        "variant": p["variant"], "min_ts": float(p["min_timescale"]), "max_ts": float(p["max_timescale"]),
    }


def nfreq(c):
    """Number of distinct frequencies: vaswani with odd dim has an extra sin column."""
    return (c["dim"] + 1) // 2 if c["variant"] == "vaswani" else c["dim"] // 2


def freqs_f64(c):
    n = nfreq(c)
    if c["variant"] == "t2t":
        inc = math.log(c["max_ts"] / c["min_ts"]) / max(n - 1, 1)
        return np.array([c["min_ts"] * math.exp(-k * inc) for k in range(n)], dtype=np.float64)
    return np.array([math.pow(c["base"], -(2 * i) / c["dim"]) for i in range(n)], dtype=np.float64)


def layout(c, s, co):
    """Place sin (len, nf) and cos (len, >= dim//2) columns by the variant's layout."""
    L, d, h = c["len"], c["dim"], c["dim"] // 2
    out = np.zeros((L, d), dtype=s.dtype)
    if c["variant"] == "vaswani":
        out[:, 0::2] = s
        out[:, 1::2] = co[:, :h]
    else:
        out[:, :h] = s[:, :h]
        out[:, h:2 * h] = co[:, :h]
    return out


def positions(c):
    return np.arange(c["offset"], c["offset"] + c["len"], dtype=np.int64)


def ref_f64(c):
    ang = positions(c).astype(np.float64)[:, None] * freqs_f64(c)[None, :]
    s, co = np.sin(ang), np.cos(ang)
    # np.sin must be libm's here (see the top of the file)
    flat = ang.ravel()
    assert all(np.sin(a) == math.sin(a) and np.cos(a) == math.cos(a) for a in flat), "np.sin is not libm's"
    return layout(c, s, co), ang


def ref_mp(c, ang):
    mpmath.mp.dps = 40
    s = np.array([[float(mpmath.sin(mpmath.mpf(a))) for a in row] for row in ang], dtype=np.float64)
    co = np.array([[float(mpmath.cos(mpmath.mpf(a))) for a in row] for row in ang], dtype=np.float64)
    return layout(c, s, co)


def ref_torch(c):
    L, d, base = c["len"], c["dim"], c["base"]
    pos = torch.arange(c["offset"], c["offset"] + L, dtype=torch.int64).unsqueeze(1)
    if c["variant"] == "t2t":
        # fairseq SinusoidalPositionalEmbedding.get_embedding, with tensor2tensor's timescales
        half = d // 2
        log_inc = math.log(c["max_ts"] / c["min_ts"]) / max(half - 1, 1)
        inv = torch.exp(torch.arange(half, dtype=torch.float) * -log_inc)
        if c["min_ts"] != 1.0:
            inv = c["min_ts"] * inv
        emb = pos.to(torch.float) * inv.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
        if d % 2 == 1:
            emb = torch.cat([emb, torch.zeros(L, 1)], dim=1)
        return emb.numpy()
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(base) / d))
    ang = pos * div  # int64 column times float32 row: float32
    assert ang.dtype == torch.float32
    if c["variant"] == "concat":
        return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).numpy()
    pe = torch.zeros(L, d)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang[:, : d // 2])
    return pe.numpy()


def write(name, arr, dtype):
    a = np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<"))
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(a.tobytes())
    return name


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".bin") or f == "cases.json":
            os.remove(os.path.join(OUT, f))
    manifest = {
        "generator": "tests/ref/gen_sinusoidal.py",
        "versions": {"numpy": np.__version__, "mpmath": mpmath.__version__, "torch": torch.__version__},
        "cases": [],
    }
    total = 0
    for name, query, want_mp in CASES:
        c = parse(query)
        assert c["variant"] != "concat" or c["dim"] % 2 == 0
        a, ang = ref_f64(c)
        t = ref_torch(c)
        assert a.shape == t.shape == (c["len"], c["dim"])
        entry = {
            "name": name,
            "query": query,
            "hf_query": query + "&compat=hf",
            "shape": [c["len"], c["dim"]],
            "ref_f64": write(name + ".ref.f64.bin", a, np.float64),
            "torch_f32": write(name + ".torch.f32.bin", t, np.float32),
        }
        total += a.nbytes + t.nbytes
        if want_mp:
            m = ref_mp(c, ang)
            entry["mp_f64"] = write(name + ".mp.f64.bin", m, np.float64)
            total += m.nbytes
            ulps = np.abs(a.view(np.int64) - m.view(np.int64))  # same sign except at zeros
            print(f"{name}: numpy f64 vs mpmath max {ulps.max()} ulp")
        manifest["cases"].append(entry)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{len(CASES)} cases, {total} bytes of data in {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
