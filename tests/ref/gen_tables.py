#!/usr/bin/python3
"""Known answers for /v1/sinusoidal2d, /v1/rope2d, /v1/alibi/slopes, /v1/alibi, /v1/relative/t5 and
/v1/relative/xl, from references written independently of the C core.

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_tables.py

It rewrites tests/data/{sinusoidal2d,rope2d,alibi,relative}/ (layout: tests/ref/kat.py) and prints a
summary; tests/core/test_tables2d.c, test_alibi.c and test_relative.c read them. Files per case:

  ref_f64    float64 as the reference implementation computes it in NumPy: MAE's
             get_2d_sincos_pos_embed re-implemented from its published code (omega = 1/base**(k/(D/2)),
             meshgrid(w, h), einsum, np.sin/np.cos), and the same float64 formula for timm, Qwen2-VL's
             vision rope and Transformer-XL. ALiBi: the bias from the mpmath slopes, each entry
             -2^e*|q_pos - k| rounded once; masked entries are -inf in the file (the core must give the
             dtype's lowest finite value there).
  mp_f64     (some cases) sin/cos of the same float64 angles in mpmath, rounded once: the true values.
             For /v1/alibi/slopes the only file: 2^(-max_bias*k/den) in mpmath, rounded once.
  torch_f32  PyTorch float32 as the model code computes it (timm's build_sincos2d_pos_embed, Qwen2-VL's
             VisionRotaryEmbedding + rot_pos_emb + cat(f, f).cos()/.sin(), Transformer-XL's
             PositionalEmbedding with its pos_seq and clamp_len); compat=hf reproduces it.
  torch_i32  transformers' T5Attention._relative_position_bucket of k - q in torch, as int32.

Checks made here, beyond writing files: the paper's get_slopes (Python floats), BLOOM's
build_alibi_tensor slopes and MPT's gen_slopes, both in float64, lie within a few ulp of the mpmath
slopes; the symmetric bias minus BLOOM's slope*k bias is constant along every query row (so softmax
is the same); NumPy's sin/cos/pow are glibc's.
"""
import math
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import mpmath
import numpy as np
import torch

GEN = "tests/ref/gen_tables.py"


def versions():
    return {"numpy": np.__version__, "mpmath": mpmath.__version__, "torch": torch.__version__}


def libm_pow(base, exps):
    """base ** exps in float64 with glibc's pow, as NumPy's float64 power gives it (checked)."""
    exps = np.asarray(exps, dtype=np.float64)
    out = np.array([math.pow(base, x) for x in exps], dtype=np.float64)
    assert np.array_equal(base ** exps, out), "NumPy's power is not libm's"
    return out


def sincos64(ang):
    kat.check_libm(ang)
    return np.sin(ang), np.cos(ang)


# ---- /v1/sinusoidal2d -------------------------------------------------------------------------

S2D_DEFAULTS = {"base": "10000", "cls_token": "0", "variant": "mae"}


def mae_1d(embed_dim, pos, base, fn):
    """MAE's get_1d_sincos_pos_embed_from_grid with base for 10000; fn(out) -> (sin, cos)."""
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / libm_pow(base, omega)
    out = np.einsum("m,d->md", pos.reshape(-1), omega)  # float32 grid x float64 omega: float64
    s, c = fn(out)
    return np.concatenate([s, c], axis=1)


def mae_2d(h, w, dim, base, cls, fn=sincos64):
    """MAE's get_2d_sincos_pos_embed for an h x w grid (MAE: h = w = grid_size)."""
    grid_h = np.arange(h, dtype=np.float32)
    grid_w = np.arange(w, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # w goes first, as in MAE
    grid = np.stack(grid, axis=0).reshape([2, 1, h, w])
    emb_h = mae_1d(dim // 2, grid[0], base, fn)  # MAE's name; grid[0] is the column coordinate
    emb_w = mae_1d(dim // 2, grid[1], base, fn)
    emb = np.concatenate([emb_h, emb_w], axis=1)
    if cls:
        emb = np.concatenate([np.zeros([cls, dim]), emb], axis=0)
    return emb


def timm_f64(h, w, dim, base, cls, fn=sincos64):
    """timm's build_sincos2d_pos_embed in float64: [sin h | sin w | cos h | cos w]."""
    q = dim // 4
    bands = 1.0 / libm_pow(base, np.arange(q, dtype=np.float64) / q)
    gh, gw = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    ah = gh.reshape(-1)[:, None] * bands[None, :]
    aw = gw.reshape(-1)[:, None] * bands[None, :]
    (sh, ch), (sw, cw) = fn(ah), fn(aw)
    emb = np.concatenate([sh, sw, ch, cw], axis=1)
    return np.concatenate([np.zeros([cls, dim]), emb], axis=0) if cls else emb


def timm_torch(h, w, dim, base, cls):
    """timm's build_sincos2d_pos_embed (freq_bands, ndgrid, stack sin/cos on dim 1) in float32."""
    pos_dim = dim // 4
    exp = torch.arange(0, pos_dim, 1, dtype=torch.int64).to(torch.float32) / pos_dim
    bands = 1.0 / (base ** exp)
    grid = torch.stack(torch.meshgrid(
        [torch.arange(s, dtype=torch.int64).to(torch.float32) for s in (h, w)], indexing="ij"))
    grid = grid.flatten(1).transpose(0, 1)
    pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)
    emb = torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=1).flatten(1)
    if cls:
        emb = torch.cat([torch.zeros(cls, dim), emb], dim=0)
    assert emb.dtype == torch.float32
    return emb.numpy()


def mp_sincos(ang):
    return kat.mp_round(mpmath.sin, ang), kat.mp_round(mpmath.cos, ang)


def add_mp(files, table, name, build_mp):
    """files["mp_f64"] = build_mp() (the table through mpmath), and how far NumPy's f64 is from it."""
    files["mp_f64"] = build_mp()
    print(f"{table} {name}: numpy f64 vs mpmath max {kat.max_ulps_f64(files['ref_f64'], files['mp_f64'])} ulp")


def add_torch_cases(m, table, cases, defaults, args_of, f64, torch_f32):
    """Each (name, query, want_mp) of cases into m: f64(*args) and torch_f32(*args) for the query's
    args_of(parameters), f64(*args, fn=mp_sincos) too where want_mp."""
    for name, query, want_mp in cases:
        args = args_of(kat.parse_query(query, defaults))
        ref = f64(*args)
        files = {"ref_f64": ref, "torch_f32": torch_f32(*args)}
        if want_mp:
            add_mp(files, table, name, lambda: f64(*args, fn=mp_sincos))
        m.add(name, table, query, ref.shape, files, hf_query=query + "&compat=hf")


S2D_CASES = [
    # name, query, mp
    ("mae_h14_w14_d32_cls1", "height=14&width=14&dim=32&cls_token=1", False),
    ("mae_h3_w5_d16", "height=3&width=5&dim=16", True),
    ("mae_h7_w2_d8_base100", "height=7&width=2&dim=8&base=100&variant=mae", True),
    ("mae_h5_w6_d80_base5e5", "height=5&width=6&dim=80&base=500000", False),
    ("timm_h6_w9_d32", "height=6&width=9&dim=32&variant=timm", True),
    ("timm_h4_w4_d64_base100_cls2", "height=4&width=4&dim=64&variant=timm&base=100&cls_token=2", False),
    ("timm_h6_w5_d80", "height=6&width=5&dim=80&variant=timm", False),
    ("timm_h3_w2_d136_base2.5", "height=3&width=2&dim=136&variant=timm&base=2.5", False),
    ("timm_h1_w800_d8_base3", "height=1&width=800&dim=8&variant=timm&base=3", False),
]


def gen_sinusoidal2d():
    m = kat.Manifest("sinusoidal2d", GEN)
    for name, query, want_mp in S2D_CASES:
        p = kat.parse_query(query, S2D_DEFAULTS)
        h, w, dim, base, cls = int(p["height"]), int(p["width"]), int(p["dim"]), float(p["base"]), int(p["cls_token"])
        build = mae_2d if p["variant"] == "mae" else timm_f64
        ref = build(h, w, dim, base, cls)
        shape = (cls + h * w, dim)
        files = {"ref_f64": ref}
        if want_mp:
            add_mp(files, "sinusoidal2d", name, lambda: build(h, w, dim, base, cls, fn=mp_sincos))
        if p["variant"] == "timm":
            files["torch_f32"] = timm_torch(h, w, dim, base, cls)
        m.add(name, "sinusoidal2d", query, shape, files, hf_query=query + "&compat=hf")
    return m.save(versions())


# ---- /v1/rope2d -------------------------------------------------------------------------------

ROPE2D_DEFAULTS = {"base": "10000"}


class VisionRotaryEmbedding(torch.nn.Module):
    """Qwen2-VL's vision rotary embedding, rewritten from transformers' modeling_qwen2_vl.py."""

    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))

    def forward(self, seqlen):
        seq = torch.arange(seqlen, dtype=self.inv_freq.dtype)
        return torch.outer(seq, self.inv_freq)


def qwen2vl_rot_pos_emb(h, w, head_dim, theta, merge=1):
    """rot_pos_emb for one image (t = 1) as Qwen2-VL's vision tower gathers it. merge is its
    spatial_merge_size; with 1 the patch order is plain row-major, the order of /v1/rope2d."""
    hpos = torch.arange(h).unsqueeze(1).expand(-1, w)
    hpos = hpos.reshape(h // merge, merge, w // merge, merge).permute(0, 2, 1, 3).flatten()
    wpos = torch.arange(w).unsqueeze(0).expand(h, -1)
    wpos = wpos.reshape(h // merge, merge, w // merge, merge).permute(0, 2, 1, 3).flatten()
    pos_ids = torch.stack([hpos, wpos], dim=-1)
    full = VisionRotaryEmbedding(head_dim // 2, theta)(max(h, w))
    return full[pos_ids].flatten(1)


def rope2d_torch(h, w, dim, base):
    f = qwen2vl_rot_pos_emb(h, w, dim, base)
    emb = torch.cat((f, f), dim=-1)
    out = torch.stack([emb.cos(), emb.sin()])
    assert out.dtype == torch.float32
    return out.numpy()


def rope2d_f64(h, w, dim, base, fn=sincos64):
    d = dim // 2
    inv = 1.0 / libm_pow(base, np.arange(0, d, 2, dtype=np.float64) / d)
    rows, cols = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    f = np.concatenate([rows.reshape(-1)[:, None] * inv, cols.reshape(-1)[:, None] * inv], axis=1)
    s, c = fn(np.concatenate([f, f], axis=1))
    return np.stack([c, s])


ROPE2D_CASES = [
    ("h4_w6_d16", "height=4&width=6&dim=16", True),
    ("h4_w5_d80", "height=4&width=5&dim=80", False),
    ("h3_w5_d32_base100", "height=3&width=5&dim=32&base=100", True),
    ("h5_w3_d136_base1e6", "height=5&width=3&dim=136&base=1e6", False),
    ("h1_w600_d8_base3", "height=1&width=600&dim=8&base=3", False),
    ("h700_w1_d8_base7", "height=700&width=1&dim=8&base=7", False),
]


def gen_rope2d():
    m = kat.Manifest("rope2d", GEN)
    add_torch_cases(m, "rope2d", ROPE2D_CASES, ROPE2D_DEFAULTS,
                    lambda p: (int(p["height"]), int(p["width"]), int(p["dim"]), float(p["base"])),
                    rope2d_f64, rope2d_torch)
    # Qwen2-VL's own order (spatial_merge_size 2) is a permutation of the row-major rows
    qwen = qwen2vl_rot_pos_emb(4, 6, 16, 10000.0, merge=2)
    plain = qwen2vl_rot_pos_emb(4, 6, 16, 10000.0, merge=1)
    assert sorted(map(tuple, qwen.tolist())) == sorted(map(tuple, plain.tolist()))
    return m.save(versions())


# ---- /v1/alibi/slopes and /v1/alibi -----------------------------------------------------------

def mp_slopes(n, max_bias):
    """2^(-max_bias*k/den) exactly as the contract defines them, rounded once to float64."""
    mpmath.mp.dps = 60
    m = 2 ** int(math.floor(math.log2(n)))
    mb = mpmath.mpf(max_bias)
    out = [mpmath.power(2, -mb * (i + 1) / m) for i in range(m)]
    out += [mpmath.power(2, -mb * (2 * j + 1) / (2 * m)) for j in range(n - m)]
    return np.array([float(x) for x in out], dtype=np.float64)


def paper_slopes(n):
    """Press et al.'s get_slopes (the ALiBi repository), Python floats: max_bias = 8 only."""
    def pow2(k):
        start = 2 ** (-2 ** -(math.log2(k) - 3))
        return [start * start ** i for i in range(k)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + paper_slopes(2 * c)[0::2][: n - c]


def bloom_slopes_f64(n):
    """BLOOM's build_alibi_tensor slopes, with its float32 tensors made float64."""
    c = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(c) - 3))), dtype=torch.float64)
    slopes = torch.pow(base, torch.arange(1, 1 + c, dtype=torch.int32))
    if c != n:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * c) - 3))), dtype=torch.float64)
        rest = min(c, n - c)
        slopes = torch.cat([slopes, torch.pow(extra_base, torch.arange(1, 1 + 2 * rest, 2, dtype=torch.int32))])
    return slopes.numpy()


def mpt_slopes_f64(n, max_bias):
    """MPT's gen_slopes (alibi_bias_max) in float64."""
    big = 2 ** math.ceil(math.log2(n))
    m = torch.arange(1, big + 1, dtype=torch.float64).mul(max_bias / big)
    slopes = 1.0 / torch.pow(2, m)
    if big != n:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n]
    return slopes.numpy()


SLOPE_CASES = [(n, 8.0) for n in (1, 2, 3, 5, 6, 8, 12, 16, 20, 24, 32, 40, 64, 71, 96, 100)] + \
    [(8, 16.0), (12, 16.0), (12, 0.1), (20, 3.7), (7, 64.0), (30, 11.3)]


def slopes_query(n, mb):
    return f"heads={n}" if mb == 8.0 else f"heads={n}&max_bias={mb:g}"


def check_slopes(n, mb, mp):
    """The published float64 formulas agree with the mpmath slopes to within a few ulp."""
    worst, bound = {}, {}
    if mb == 8.0:
        # start * ratio**i (paper) and base**i (BLOOM) round at every power: error grows with i
        worst["paper"] = kat.max_ulps_f64(np.array(paper_slopes(n)), mp)
        worst["bloom"] = kat.max_ulps_f64(bloom_slopes_f64(n), mp)
        bound["paper"] = bound["bloom"] = n
    # MPT rounds the exponent max_bias*k/n once: 1 ulp of it is ln2*|exponent| ulp of the slope
    worst["mpt"] = kat.max_ulps_f64(mpt_slopes_f64(n, mb), mp)
    bound["mpt"] = 2 + math.ceil(math.log(2) * mb)
    assert all(worst[k] <= bound[k] for k in worst), (n, mb, worst, bound)
    return worst


BIAS_DEFAULTS = {"max_bias": "8", "mask": "none"}
BIAS_CASES = [
    ("h4_q5_k9", "heads=4&q_len=5&k_len=9"),
    ("h12_q7_causal", "heads=12&q_len=7&mask=causal"),
    ("h3_q4_k6_off10_causal", "heads=3&q_len=4&k_len=6&offset=10&mask=causal"),
    ("h5_q6_k3", "heads=5&q_len=6&k_len=3"),
    ("h6_q5_k5_causal_off-2", "heads=6&q_len=5&offset=-2&mask=causal"),
    ("h2_q2_k1100_mb0.1", "heads=2&q_len=2&k_len=1100&max_bias=0.1"),
    ("h20_q4_k30_mb16_causal", "heads=20&q_len=4&k_len=30&max_bias=16&mask=causal"),
    # a double slope times the distance, rounded again, was 1.3 ulp from the real product in f64
    ("h21_q1_k6_off9_mb13.1", "heads=21&q_len=1&k_len=6&offset=9&max_bias=13.097201819612806"),
    ("h100_q3_k700_mb11.3", "heads=100&q_len=3&k_len=700&max_bias=11.3"),
]


def bias_ref(n, q_len, k_len, offset, mb, causal):
    mpmath.mp.dps = 60
    m = 2 ** int(math.floor(math.log2(n)))
    exps = [mpmath.mpf(mb) * (i + 1) / m for i in range(m)] + \
        [mpmath.mpf(mb) * (2 * j + 1) / (2 * m) for j in range(n - m)]
    out = np.zeros((n, q_len, k_len))
    for h in range(n):
        s = mpmath.power(2, -exps[h])
        for i in range(q_len):
            qp = offset + i
            for k in range(k_len):
                out[h, i, k] = -np.inf if causal and k > qp else float(-s * abs(qp - k))
    return out


def check_bloom_rows(bias, slopes, offset):
    """Unmasked entries: -slope*|q_pos - k| - slope*k (BLOOM) is -slope*q_pos, the same along a row."""
    n, q_len, k_len = bias.shape
    for h in range(n):
        bloom = slopes[h] * np.arange(k_len, dtype=np.float64)  # BLOOM's alibi for an all-ones mask
        for i in range(q_len):
            ks = [k for k in range(k_len) if k <= offset + i and np.isfinite(bias[h, i, k])]
            if len(ks) < 2:
                continue
            d = bias[h, i, ks] - bloom[ks]
            assert np.allclose(d, -slopes[h] * (offset + i), rtol=1e-12, atol=1e-12), (h, i)


def gen_alibi():
    m = kat.Manifest("alibi", GEN)
    for n, mb in SLOPE_CASES:
        mp = mp_slopes(n, mb)
        worst = check_slopes(n, mb, mp)
        name = f"slopes_h{n}" + ("" if mb == 8.0 else f"_mb{mb:g}")
        m.add(name, "alibi/slopes", slopes_query(n, mb), (n,), {"mp_f64": mp})
        print(f"alibi {name}: float64 formulas vs mpmath, max ulp {worst}")
    for name, query in BIAS_CASES:
        p = kat.parse_query(query, BIAS_DEFAULTS)
        n, q_len = int(p["heads"]), int(p["q_len"])
        k_len = int(p.get("k_len", q_len))
        offset = int(p.get("offset", k_len - q_len))
        mb, causal = float(p["max_bias"]), p["mask"] == "causal"
        ref = bias_ref(n, q_len, k_len, offset, mb, causal)
        check_bloom_rows(ref, mp_slopes(n, mb), offset)
        m.add(name, "alibi", query, ref.shape, {"ref_f64": ref})
    return m.save(versions())


# ---- /v1/relative/t5 and /v1/relative/xl ------------------------------------------------------

def t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """transformers' T5Attention._relative_position_bucket, rewritten from its published code."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def t5_torch(q_len, k_len, bidirectional, num_buckets, max_distance):
    """T5Attention.compute_bias's bucket table: memory_position - context_position."""
    context = torch.arange(q_len, dtype=torch.long)[:, None]
    memory = torch.arange(k_len, dtype=torch.long)[None, :]
    b = t5_relative_position_bucket(memory - context, bidirectional, num_buckets, max_distance)
    assert int(b.min()) >= 0 and int(b.max()) < num_buckets
    return b.to(torch.int32).numpy()


T5_DEFAULTS = {"num_buckets": "32", "max_distance": "128", "bidirectional": "1"}
T5_CASES = [
    ("q40_k300", "q_len=40&k_len=300"),
    ("q300_k20_decoder", "q_len=300&k_len=20&bidirectional=0"),
    ("q64_nb8_md20", "q_len=64&num_buckets=8&max_distance=20"),
    ("q3_k5000_nb37_md1000", "q_len=3&k_len=5000&num_buckets=37&max_distance=1000"),
    ("q2_k3_nb4_md2", "q_len=2&k_len=3&num_buckets=4&max_distance=2"),
    ("q700_k2_nb3_decoder", "q_len=700&k_len=2&num_buckets=3&max_distance=500&bidirectional=0"),
    ("q1_k9000_nb320_md8000", "q_len=1&k_len=9000&num_buckets=320&max_distance=8000&bidirectional=true"),
]


def gen_t5(m):
    for name, query in T5_CASES:
        p = kat.parse_query(query, T5_DEFAULTS)
        q_len = int(p["q_len"])
        k_len = int(p.get("k_len", q_len))
        bi = p["bidirectional"] in ("1", "true")
        b = t5_torch(q_len, k_len, bi, int(p["num_buckets"]), int(p["max_distance"]))
        m.add("t5_" + name, "relative/t5", query, b.shape, {"torch_i32": b})


class XLPositionalEmbedding(torch.nn.Module):
    """Transformer-XL's PositionalEmbedding (the kimiyoung/transformer-xl and HF TransfoXL code)."""

    def __init__(self, demb, base):
        super().__init__()
        self.inv_freq = 1 / (base ** (torch.arange(0.0, demb, 2.0) / demb))

    def forward(self, pos_seq):
        sinusoid_inp = torch.ger(pos_seq, self.inv_freq)
        return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


def xl_torch(n, dim, base, clamp_len):
    pos_seq = torch.arange(n - 1, -1, -1.0)  # klen-1 ... 0, as MemTransformerLM._forward
    if clamp_len > 0:
        pos_seq.clamp_(max=clamp_len)
    out = XLPositionalEmbedding(dim, base)(pos_seq)
    assert out.dtype == torch.float32
    return out.numpy()


def xl_f64(n, dim, base, clamp_len, fn=sincos64):
    inv = 1.0 / libm_pow(base, np.arange(0, dim, 2, dtype=np.float64) / dim)
    pos = np.arange(n - 1, -1, -1, dtype=np.float64)
    if clamp_len > 0:
        pos = np.minimum(pos, clamp_len)
    s, c = fn(pos[:, None] * inv[None, :])
    return np.concatenate([s, c], axis=1)


XL_DEFAULTS = {"base": "10000", "clamp_len": "0"}
XL_CASES = [
    ("xl_len40_d32", "len=40&dim=32", True),
    ("xl_len64_d66_clamp20", "len=64&dim=66&clamp_len=20", False),
    ("xl_len20_d10_base100", "len=20&dim=10&base=100", True),
    ("xl_len1000_d4", "len=1000&dim=4", False),
    ("xl_len30_d2_clamp1", "len=30&dim=2&clamp_len=1", False),
]


def gen_xl(m):
    add_torch_cases(m, "relative/xl", XL_CASES, XL_DEFAULTS,
                    lambda p: (int(p["len"]), int(p["dim"]), float(p["base"]), int(p["clamp_len"])),
                    xl_f64, xl_torch)


def gen_relative():
    m = kat.Manifest("relative", GEN)
    gen_t5(m)
    gen_xl(m)
    return m.save(versions())


def main():
    torch.set_num_threads(1)
    total = 0
    for gen in (gen_sinusoidal2d, gen_rope2d, gen_alibi, gen_relative):
        n = gen()
        print(f"{gen.__name__[4:]}: {n} bytes", file=sys.stderr)
        total += n
    print(f"{total} bytes of data under {kat.DATA}", file=sys.stderr)


if __name__ == "__main__":
    main()
