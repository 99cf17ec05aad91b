#!/usr/bin/python3
"""Known answers for /v1/rope and /v1/rope/inv_freq, from references written independently of the C
core (layout and conventions: tests/ref/kat.py).

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_rope.py

It rewrites tests/data/rope/ and prints a summary; tests/core/test_rope.c reads it. Files per case
(shape [2, len, dim] = cos plane, sin plane, both times attention_scaling; rope/inv_freq: [dim/2]):

  ref_f64    float64 from transformers' formulas (modeling_rope_utils.py: default, linear, static NTK
             base*factor**(dim/(dim-2)), dynamic NTK, YaRN with truncate/mscale/mscale_all_dim/
             attention_factor, LongRoPE, Llama 3) in Python floats with math.pow/log (glibc), the angle
             float64(p)*inv_freq, np.cos/np.sin (glibc, checked), times attention_scaling in float64.
             This is compat=exact's definition.
  mp_f64     (some cases) cos/sin of the same float64 angles in mpmath at 50 digits, times
             attention_scaling, rounded once: the true values of exact's angles.
  torch_f32  PyTorch float32 in transformers' order (hf_query = query + compat=hf): the
             _compute_*_parameters functions re-implemented here on torch tensors, then the rotary
             forward: inv_freq[None, :, None] @ position_ids[:, None, :].float(), cat(freqs, freqs)
             (half) or repeat_interleave(freqs, 2) (interleaved), .cos() / .sin(), times
             attention_scaling; torch.set_num_threads(1). rope/inv_freq: HF's inv_freq. Dynamic NTK
             past original_max_position_embeddings takes seq_len as the int64 tensor that
             dynamic_rope_update passes (torch.max(position_ids) + 1), so its base is float32.
  ggml_f32   (cases llama.cpp can express; ggml_query) llama.cpp's CPU rope cache emulated in NumPy
             float32 with libm's powf/logf/cosf/sinf through ctypes: theta_scale =
             powf(base, -2/n_dims), theta = float(p) multiplied by theta_scale once per pair, divided
             by freq factors (llama3: convert_hf_to_gguf.py's rope_freqs, computed on torch float32
             as the converter does; longrope: the factor list), freq_scale = 1/factor (linear, yarn),
             rope_yarn's ramp blend over ggml_rope_yarn_corr_dims, cosf(theta)*mscale.
             rope/inv_freq: the angles at position 1.

Extra fields: attention_scaling (as transformers computes it) and ggml_attention_scaling (llama.cpp's
float mscale).
"""
import ctypes
import math
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import mpmath
import numpy as np
import torch

GEN = "tests/ref/gen_rope.py"
LIBM = ctypes.CDLL("libm.so.6")
for _fn in ("powf", "logf", "cosf", "sinf"):
    getattr(LIBM, _fn).restype = ctypes.c_float
LIBM.powf.argtypes = [ctypes.c_float, ctypes.c_float]
for _fn in ("logf", "cosf", "sinf"):
    getattr(LIBM, _fn).argtypes = [ctypes.c_float]

DEFAULTS = {"base": "10000", "offset": "0", "layout": "half", "scaling": "none", "beta_fast": "32",
            "beta_slow": "1", "truncate": "1", "low_freq_factor": "1", "high_freq_factor": "4"}

# Phi-3-mini-128k's first and last factors, spread over 8 pairs (dim 16): realistic magnitudes.
SHORT8 = "1.05,1.05,1.1,1.15,1.25,1.4,1.6,1.9"
LONG8 = "1.07,1.25,2.1,4.8,9.5,15.3,26.0,44.5"

# name, query (as a client sends it, compat=exact by default), mpmath values, llama.cpp can express it
CASES = [
    ("none_d64", "len=64&dim=64", True, True),
    ("none_inter_d32_off1e6", "len=40&dim=32&layout=interleaved&offset=1000000", True, True),
    ("none_d128_base5e5_off2p31", "len=6&dim=128&base=500000&offset=2147483000", False, True),
    ("none_d6_base2.5", "len=50&dim=6&base=2.5&offset=3", True, True),
    ("none_d2", "len=40&dim=2&offset=7", False, True),
    ("linear_d32_f4", "len=64&dim=32&scaling=linear&factor=4", False, True),
    ("linear_inter_d20_f0.5", "len=36&dim=20&scaling=linear&factor=0.5&layout=interleaved&offset=100", False, True),
    ("ntk_d64_f8", "len=48&dim=64&scaling=ntk&factor=8", True, False),
    ("dynamic_d32_f2_long", "len=40&dim=32&scaling=dynamic&factor=2&original_max_position_embeddings=16", False, False),
    ("dynamic_d32_f2_short", "len=20&dim=32&scaling=dynamic&factor=2&original_max_position_embeddings=4096", False, False),
    ("dynamic_d48_seq", "len=33&dim=48&scaling=dynamic&factor=3.5&original_max_position_embeddings=2048&seq_len=100000&offset=5",
     False, False),
    # HF's dynamic NTK base is a float32 tensor expression: at this length a double base moves 24 of 64
    # frequencies by an ulp and cos at the last position by ~1e-4
    ("dynamic_d128_long", "len=4&dim=128&base=1e6&scaling=dynamic&factor=4&original_max_position_embeddings=4096&offset=777773",
     False, False),
    ("yarn_d64_f4", "len=64&dim=64&scaling=yarn&factor=4&original_max_position_embeddings=2048", True, True),
    ("yarn_d64_f8_off1e6", "len=24&dim=64&scaling=yarn&factor=8&original_max_position_embeddings=4096&offset=1000000",
     False, True),
    ("yarn_inter_d32_beta", "len=40&dim=32&scaling=yarn&factor=16&original_max_position_embeddings=1024&beta_fast=16&beta_slow=2&layout=interleaved",
     False, True),
    ("yarn_d64_notrunc", "len=40&dim=64&scaling=yarn&factor=4&original_max_position_embeddings=4096&truncate=0", False, False),
    ("yarn_d64_deepseek", "len=40&dim=64&scaling=yarn&factor=40&original_max_position_embeddings=4096&mscale=1&mscale_all_dim=0.707",
     True, False),
    ("yarn_d32_attn", "len=40&dim=32&scaling=yarn&factor=4&original_max_position_embeddings=512&attention_factor=1.25&base=1e6",
     False, False),
    ("longrope_d16_short", "len=48&dim=16&scaling=longrope&factor=32&original_max_position_embeddings=64&short_factor="
     + SHORT8 + "&long_factor=" + LONG8, True, True),
    ("longrope_d16_long", "len=32&dim=16&scaling=longrope&factor=32&original_max_position_embeddings=64&offset=100&short_factor="
     + SHORT8 + "&long_factor=" + LONG8, False, True),
    ("longrope_d16_seq_attn", "len=32&dim=16&scaling=longrope&attention_factor=1.19&original_max_position_embeddings=4096&seq_len=5000&short_factor="
     + SHORT8 + "&long_factor=" + LONG8, False, True),
    ("llama3_d128", "len=40&dim=128&scaling=llama3&factor=8&original_max_position_embeddings=8192&base=500000", True, True),
    ("llama3_d64_lohi_off", "len=24&dim=64&scaling=llama3&factor=4&original_max_position_embeddings=1024&low_freq_factor=2&high_freq_factor=8&offset=2000000",
     False, True),
    ("llama3_inter_d32_far", "len=8&dim=32&scaling=llama3&factor=8&original_max_position_embeddings=8192&base=500000&layout=interleaved&offset=2147483600",
     False, True),
]

INV_FREQ_CASES = [
    ("inv_none_d128", "dim=128", True),
    ("inv_none_d96_base5e5", "dim=96&base=500000", True),
    ("inv_none_d40_base1234.5", "dim=40&base=1234.5", True),
    ("inv_linear_d64", "dim=64&scaling=linear&factor=2.5", True),
    ("inv_ntk_d128", "dim=128&scaling=ntk&factor=4", False),
    ("inv_dynamic_d64", "dim=64&scaling=dynamic&factor=4&original_max_position_embeddings=2048&seq_len=9000", False),
    ("inv_dynamic_d128_long", "dim=128&base=1e6&scaling=dynamic&factor=4&original_max_position_embeddings=4096&seq_len=777777",
     False),
    ("inv_yarn_d128", "dim=128&scaling=yarn&factor=32&original_max_position_embeddings=4096&base=1e6", True),
    ("inv_yarn_d80_notrunc", "dim=80&scaling=yarn&factor=4&original_max_position_embeddings=32768&truncate=0&base=1e6", False),
    ("inv_longrope_long", "dim=16&scaling=longrope&factor=32&original_max_position_embeddings=4096&seq_len=4097&short_factor="
     + SHORT8 + "&long_factor=" + LONG8, True),
    ("inv_llama3_d128", "dim=128&scaling=llama3&factor=8&original_max_position_embeddings=8192&base=500000", True),
    ("inv_llama3_d96", "dim=96&scaling=llama3&factor=32&original_max_position_embeddings=8192&low_freq_factor=1&high_freq_factor=4&base=500000",
     True),
]


class Cfg:
    """A query with the table's defaults, as Python numbers."""

    def __init__(self, query, table):
        p = kat.parse_query(query, DEFAULTS)
        self.table = table
        self.dim = int(p["dim"])
        self.h = self.dim // 2
        self.base = float(p["base"])
        self.scaling = p["scaling"]
        self.layout = p["layout"]
        self.len = int(p.get("len", "1"))
        self.offset = int(p["offset"])
        self.factor = float(p["factor"]) if "factor" in p else None
        self.orig = int(p["original_max_position_embeddings"]) if "original_max_position_embeddings" in p else None
        if "seq_len" in p:
            self.seq_len = int(p["seq_len"])
        elif table == "rope":
            self.seq_len = self.offset + self.len
        else:
            self.seq_len = self.orig
        self.beta_fast, self.beta_slow = float(p["beta_fast"]), float(p["beta_slow"])
        self.truncate = p["truncate"] in ("1", "true")
        self.mscale = float(p["mscale"]) if "mscale" in p else None
        self.mscale_all_dim = float(p["mscale_all_dim"]) if "mscale_all_dim" in p else None
        self.attention_factor = float(p["attention_factor"]) if "attention_factor" in p else None
        self.low, self.high = float(p["low_freq_factor"]), float(p["high_freq_factor"])
        self.short = [float(x) for x in p["short_factor"].split(",")] if "short_factor" in p else None
        self.long = [float(x) for x in p["long_factor"].split(",")] if "long_factor" in p else None

    def positions(self):
        return np.arange(self.offset, self.offset + self.len, dtype=np.int64)

    def ext_factors(self):
        return self.long if self.seq_len > self.orig else self.short


# ---- transformers' scalars (Python floats, shared by the float64 and the torch references) -----

def attention_scaling(c):
    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if c.scaling == "yarn":
        if c.attention_factor is not None:
            return c.attention_factor
        if c.mscale and c.mscale_all_dim:
            return float(get_mscale(c.factor, c.mscale) / get_mscale(c.factor, c.mscale_all_dim))
        return get_mscale(c.factor)
    if c.scaling == "longrope":
        if c.attention_factor is not None:
            return c.attention_factor
        return 1.0 if c.factor <= 1.0 else math.sqrt(1 + math.log(c.factor) / math.log(c.orig))
    return 1.0


def scaled_base(c):
    """Static NTK (API: base * factor**(dim/(dim-2))) and dynamic NTK change the base."""
    d = c.dim
    if c.scaling == "ntk":
        return c.base * c.factor ** (d / (d - 2))
    if c.scaling == "dynamic" and c.seq_len > c.orig:
        return c.base * ((c.factor * c.seq_len / c.orig) - (c.factor - 1)) ** (d / (d - 2))
    return c.base


def yarn_range(c):
    def correction_dim(rot):
        return (c.dim * math.log(c.orig / (rot * 2 * math.pi))) / (2 * math.log(c.base))

    low, high = correction_dim(c.beta_fast), correction_dim(c.beta_slow)
    if c.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, c.dim - 1)
    if low == high:
        high += 0.001
    return low, high


# ---- float64 (compat=exact) ---------------------------------------------------------------------

def inv_freq_f64(c):
    base = scaled_base(c)
    pos = [math.pow(base, (2 * i) / c.dim) for i in range(c.h)]
    if c.scaling == "linear":
        w = [1.0 / p / c.factor for p in pos]
    elif c.scaling == "yarn":
        low, high = yarn_range(c)
        w = []
        for i, p in enumerate(pos):
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            ef = 1 - ramp
            w.append(1.0 / (c.factor * p) * (1 - ef) + 1.0 / p * ef)
    elif c.scaling == "longrope":
        w = [1.0 / (e * p) for e, p in zip(c.ext_factors(), pos)]
    elif c.scaling == "llama3":
        w = []
        for p in pos:
            f = 1.0 / p
            wavelen = 2 * math.pi / f
            if wavelen < c.orig / c.high:
                w.append(f)
            elif wavelen > c.orig / c.low:
                w.append(f / c.factor)
            else:
                smooth = (c.orig / wavelen - c.low) / (c.high - c.low)
                w.append((1 - smooth) * f / c.factor + smooth * f)
    else:
        w = [1.0 / p for p in pos]
    return np.array(w, dtype=np.float64)


def layout(c, v):
    """[len, h] per-pair values into [len, dim] rows."""
    return np.repeat(v, 2, axis=1) if c.layout == "interleaved" else np.concatenate([v, v], axis=1)


def rope_f64(c):
    ang = c.positions().astype(np.float64)[:, None] * inv_freq_f64(c)[None, :]
    kat.check_libm(ang)
    att = attention_scaling(c)
    return np.stack([layout(c, np.cos(ang) * att), layout(c, np.sin(ang) * att)]), ang


def rope_mp(c, ang):
    att = mpmath.mpf(attention_scaling(c))
    mpmath.mp.dps = 50
    cs = [[float(mpmath.cos(mpmath.mpf(float(a))) * att) for a in row] for row in ang]
    sn = [[float(mpmath.sin(mpmath.mpf(float(a))) * att) for a in row] for row in ang]
    return np.stack([layout(c, np.array(cs)), layout(c, np.array(sn))])


# ---- PyTorch float32 in transformers' order (compat=hf) -----------------------------------------

def hf_base(c):
    """The base as transformers passes it to the float32 pow. Dynamic NTK past orig is recomputed by
    dynamic_rope_update with seq_len = torch.max(position_ids) + 1, an int64 tensor: the whole
    expression is then a float32 0-dim tensor (the other scalings, and dynamic within orig, use the
    Python-float base computed at init)."""
    if c.scaling != "dynamic" or c.seq_len <= c.orig:
        return scaled_base(c)
    d = c.dim
    seq_len = torch.tensor(c.seq_len, dtype=torch.int64)
    seq_len = torch.maximum(seq_len, torch.tensor(c.orig, dtype=seq_len.dtype))
    base = c.base * ((c.factor * seq_len / c.orig) - (c.factor - 1)) ** (d / (d - 2))
    assert base.dtype == torch.float32 and base.dim() == 0
    return base


def hf_inv_freq(c):
    dim, base = c.dim, hf_base(c)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if c.scaling == "linear":
        inv_freq /= c.factor
    elif c.scaling == "yarn":
        low, high = yarn_range(c)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        extrapolation = 1.0 / pos_freqs
        interpolation = 1.0 / (c.factor * pos_freqs)
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    elif c.scaling == "longrope":
        ext = torch.tensor(c.ext_factors(), dtype=torch.float32)
        shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        inv_freq = 1.0 / (ext * base**shape)
    elif c.scaling == "llama3":
        low_wavelen, high_wavelen = c.orig / c.low, c.orig / c.high
        wavelen = 2 * math.pi / inv_freq
        inv_llama = torch.where(wavelen > low_wavelen, inv_freq / c.factor, inv_freq)
        smooth = (c.orig / wavelen - c.low) / (c.high - c.low)
        smoothed = (1 - smooth) * inv_llama / c.factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, inv_llama)
    assert inv_freq.dtype == torch.float32
    return inv_freq


def rope_torch(c):
    inv_freq = hf_inv_freq(c)
    position_ids = torch.arange(c.offset, c.offset + c.len, dtype=torch.int64)[None, :]
    freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)[0]
    emb = torch.repeat_interleave(freqs, 2, dim=-1) if c.layout == "interleaved" else torch.cat((freqs, freqs), dim=-1)
    att = attention_scaling(c)
    out = torch.stack([emb.cos() * att, emb.sin() * att])
    assert out.dtype == torch.float32
    return out.numpy()


# ---- llama.cpp (compat=ggml), NumPy float32 + libm -----------------------------------------------

F = np.float32


def ggml_freq_factors(c):
    if c.scaling == "longrope":
        return np.array(c.ext_factors(), dtype=np.float32)
    if c.scaling != "llama3":
        return None
    # convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors), on torch float32 as it runs there
    freqs = 1.0 / (c.base ** (torch.arange(0, c.dim, 2, dtype=torch.float32) / c.dim))
    low_wavelen, high_wavelen = c.orig / c.low, c.orig / c.high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(c.factor)
        else:
            smooth = (c.orig / wavelen - c.low) / (c.high - c.low)
            factors.append(1 / ((1 - smooth) / c.factor + smooth))
    return torch.tensor(factors, dtype=torch.float32).numpy()


def ggml_corr_dims(c):
    def corr_dim(n_rot):
        return F(F(c.dim) * F(LIBM.logf(F(F(c.orig) / F(F(F(n_rot) * F(2)) * F(math.pi)))))) / F(F(2) * F(LIBM.logf(F(c.base))))

    start = F(math.floor(corr_dim(c.beta_fast)))
    end = F(math.ceil(corr_dim(c.beta_slow)))
    return max(F(0), start), min(F(c.dim - 1), end)


def ggml_mscale(c):
    if c.scaling == "yarn":
        freq_scale = F(F(1) / F(c.factor))
        return F(F(1) * F(F(1) + F(F(0.1) * F(LIBM.logf(F(F(1) / freq_scale))))))
    if c.scaling == "longrope":
        return F(attention_scaling(c))
    return F(1)


def ggml_angles(c, positions):
    """[len(positions), h] float32 angles as ggml_rope_cache_init forms them."""
    theta_scale = F(LIBM.powf(F(c.base), F(F(-2.0) / F(c.dim))))
    freq_scale = F(F(1) / F(c.factor)) if c.scaling in ("linear", "yarn") else F(1)
    ext = F(1) if c.scaling == "yarn" else F(0)
    low, high = ggml_corr_dims(c) if c.scaling == "yarn" else (F(0), F(0))
    ff = ggml_freq_factors(c)
    theta = positions.astype(np.float32)
    out = np.zeros((len(positions), c.h), dtype=np.float32)
    for i in range(c.h):
        te = theta / ff[i] if ff is not None else theta
        ti = freq_scale * te
        if ext != 0:
            y = F(F(i) - low) / max(F(0.001), F(high - low))
            ramp_mix = F(F(1) - min(F(1), max(F(0), y))) * ext
            ti = ti * F(F(1) - ramp_mix) + te * ramp_mix
        out[:, i] = ti
        theta = theta * theta_scale
    assert out.dtype == np.float32
    return out


def rope_ggml(c):
    ang = ggml_angles(c, c.positions())
    m = ggml_mscale(c)
    cos = np.array([[LIBM.cosf(a) for a in row] for row in ang], dtype=np.float32) * m
    sin = np.array([[LIBM.sinf(a) for a in row] for row in ang], dtype=np.float32) * m
    return np.stack([layout(c, cos), layout(c, sin)])


# ---- cases --------------------------------------------------------------------------------------

def versions():
    return {"numpy": np.__version__, "mpmath": mpmath.__version__, "torch": torch.__version__}


def add_rope(m, name, query, want_mp, ggml):
    c = Cfg(query, "rope")
    shape = (2, c.len, c.dim)
    ref, ang = rope_f64(c)
    files = {"ref_f64": ref, "torch_f32": rope_torch(c)}
    extra = {"hf_query": query + "&compat=hf", "attention_scaling": attention_scaling(c)}
    if want_mp:
        files["mp_f64"] = rope_mp(c, ang)
        extra["ref_vs_mp_ulps"] = kat.max_ulps_f64(ref, files["mp_f64"])
    if ggml:
        files["ggml_f32"] = rope_ggml(c)
        extra["ggml_query"] = query + "&compat=ggml"
        extra["ggml_attention_scaling"] = float(ggml_mscale(c))
    m.add(name, "rope", query, shape, files, **extra)


def add_inv_freq(m, name, query, ggml):
    c = Cfg(query, "rope/inv_freq")
    files = {"ref_f64": inv_freq_f64(c), "torch_f32": hf_inv_freq(c).numpy()}
    extra = {"hf_query": query + "&compat=hf", "attention_scaling": attention_scaling(c)}
    if ggml:
        files["ggml_f32"] = ggml_angles(c, np.array([1], dtype=np.int64))[0]
        extra["ggml_query"] = query + "&compat=ggml"
    m.add(name, "rope/inv_freq", query, (c.h,), files, **extra)


def main():
    torch.set_num_threads(1)
    m = kat.Manifest("rope", GEN)
    for name, query, want_mp, ggml in CASES:
        add_rope(m, name, query, want_mp, ggml)
    for name, query, ggml in INV_FREQ_CASES:
        add_inv_freq(m, name, query, ggml)
    total = m.save(versions())
    for case in m.cases:
        if "ref_vs_mp_ulps" in case:
            print(f"{case['name']}: numpy f64 vs mpmath max {case['ref_vs_mp_ulps']} ulp")
    print(f"{len(m.cases)} cases, {total} bytes in {m.dir}", file=sys.stderr)
    assert total <= 2 << 20, "keep the committed data small"


if __name__ == "__main__":
    main()
