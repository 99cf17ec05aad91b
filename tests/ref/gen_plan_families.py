#!/usr/bin/python3
"""Known answers for POST /v1/plan on the model families of issue #34: for each published config under
tests/data/configs/ named in FAMILIES below, the encodings the model's own code uses, with the numbers
a correct plan must give under compat=hf. Format: tests/data/plan_families/README.md.

Regenerate (from the repository root, with Debian's Python: numpy, torch; transformers is not needed):

    /usr/bin/python3 tests/ref/gen_plan_families.py

Every formula here is written from a reading of the transformers source named in each family's
"source" field (4.57 unless it says otherwise; model code that ships with the checkpoint where the
family is remote code). The tables are computed the way that code computes them: float32 torch in
the same order of operations (inv_freq from base ** (arange / dim), the angle as one float32 product
inv_freq * position, torch.cos / torch.sin, times attention_scaling in float32), Python floats where
the model uses Python floats (YaRN's correction range, HunYuan's alpha base, softmax scales).
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kat  # noqa: E402  (for DATA; numpy is not used here)

torch.set_num_threads(1)
GEN = "tests/ref/gen_plan_families.py"
CONFIGS = os.path.join(kat.DATA, "configs")
OUT = os.path.join(kat.DATA, "plan_families")
TF = "transformers/src/transformers/"


# ---- number formats -------------------------------------------------------------------------------

def f32_hex(t):
    """A float32 tensor as a list (nested like the tensor) of 8-digit hex bit patterns."""
    t = t.detach().to(torch.float32).contiguous()
    bits = t.view(torch.int32).tolist()

    def conv(x):
        return [conv(y) for y in x] if isinstance(x, list) else format(x & 0xFFFFFFFF, "08x")
    return conv(bits)


def half_hex(t, dtype):
    """A float32 tensor rounded to bfloat16 / float16 as torch does, as 4-digit hex bit patterns."""
    bits = t.to(dtype).view(torch.int16).tolist()

    def conv(x):
        return [conv(y) for y in x] if isinstance(x, list) else format(x & 0xFFFF, "04x")
    return conv(bits)


def f32_of(x):
    """A Python float rounded to float32, as hex bits (how a float32 tensor op sees a scalar)."""
    return f32_hex(torch.tensor(x, dtype=torch.float32))


# ---- config access --------------------------------------------------------------------------------

class Cfg:
    """A config dict with class defaults under it: get() looks in the dict, then the defaults."""

    def __init__(self, d, defaults=None):
        self.d = d or {}
        self.defaults = defaults or {}

    def get(self, *keys, default=None):
        for k in keys:
            if self.d.get(k) is not None:
                return self.d[k]
        for k in keys:
            if self.defaults.get(k) is not None:
                return self.defaults[k]
        return default


def positions_for(max_len):
    """The positions a table is given at: 0, 1, 7, 4095 and the last one the model accepts."""
    return sorted({p for p in (0, 1, 7, 4095, max_len - 1) if 0 <= p < max_len})


# ---- rope inv_freq, as modeling_rope_utils.py computes it ----------------------------------------

def inv_default(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))


def inv_linear(base, dim, factor):
    inv = inv_default(base, dim)
    inv /= factor
    return inv


def inv_llama3(base, dim, s):
    inv = inv_default(base, dim)
    factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > lo_wl, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < hi_wl) * ~(wavelen > lo_wl)
    return torch.where(medium, smoothed, inv_l)


def yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def inv_yarn(base, dim, s, max_pos):
    """_compute_yarn_parameters: (inv_freq, attention_factor). factor is max_position_embeddings /
    original_max_position_embeddings when the dict has the latter (4.57); every config here has the
    two agree with its explicit factor, so 4.57 and 5.x give the same numbers."""
    factor = s.get("factor")
    orig = s.get("original_max_position_embeddings") or max_pos
    if s.get("original_max_position_embeddings"):
        factor = max_pos / orig
        assert factor == s["factor"], "fixture's yarn factor disagrees with its lengths"
    att = s.get("attention_factor")
    if att is None:
        if s.get("mscale") and s.get("mscale_all_dim"):
            att = float(yarn_mscale(factor, s["mscale"]) / yarn_mscale(factor, s["mscale_all_dim"]))
        else:
            att = yarn_mscale(factor)
    beta_fast = s.get("beta_fast") or 32
    beta_slow = s.get("beta_slow") or 1
    truncate = s.get("truncate", True)

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extra = 1.0 / pos_freqs
    inter = 1.0 / (factor * pos_freqs)
    ext_factor = 1 - ramp.to(dtype=torch.float)
    inv = inter * (1 - ext_factor) + extra * ext_factor
    return inv, att, {"low": low, "high": high, "truncate": bool(truncate), "factor_used": factor}


def inv_longrope(base, dim, s, max_pos, seq_len):
    """_compute_longrope_parameters as 5.x reads rope_parameters: an explicit factor wins."""
    orig = s["original_max_position_embeddings"]
    factor = s.get("factor") or max_pos / orig
    att = s.get("attention_factor")
    if att is None:
        att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = s["long_factor"] if seq_len and seq_len > orig else s["short_factor"]
    ext = torch.tensor(ext, dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext * base ** shape), att, factor


def inv_proportional(base, head_dim, partial, factor=1.0):
    """_compute_proportional_rope_parameters (5.x, Gemma 4): the exponent divides by head_dim, not by
    the rotary share, and the pairs past the share get frequency 0 (cos 1, sin 0)."""
    angles = int(partial * head_dim // 2)
    rot = 1.0 / (base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(dtype=torch.float) / head_dim))
    nope = head_dim // 2 - angles
    inv = torch.cat((rot, torch.zeros(nope, dtype=torch.float32))) if nope > 0 else rot
    inv /= factor
    return inv


# ---- tables ---------------------------------------------------------------------------------------

def angles(inv, pos):
    """inv_freq[None, :, None] @ position_ids[:, None, :].float(), transposed: [len(pos), dim/2]."""
    p = torch.tensor(pos, dtype=torch.int64)
    return (inv[None, :, None].float() @ p[None, None, :].float()).transpose(1, 2)[0]


def cos_sin(inv, pos, att=1.0, polar=False):
    a = angles(inv, pos)
    if polar:  # Llama 4: torch.polar(ones, freqs) * attention_scaling
        c = torch.polar(torch.ones_like(a), a) * att
        return c.real.contiguous(), c.imag.contiguous()
    return a.cos() * att, a.sin() * att


def rope_table(inv, pos, att=1.0, seq_len=None, polar=False, cache_dtype=None):
    c, s = cos_sin(inv, pos, att, polar)
    t = {"seq_len": seq_len, "inv_freq": f32_hex(inv), "positions": pos, "cos": f32_hex(c), "sin": f32_hex(s)}
    if cache_dtype is not None:
        t["cache_dtype"] = str(cache_dtype).replace("torch.", "")
        t["cos_cache"] = half_hex(c, cache_dtype)
        t["sin_cache"] = half_hex(s, cache_dtype)
    return t


def rope_enc(tower, layers, head_dim, rot, layout, base, rope_type, inv, att, sm, max_len, extra=None,
             polar=False, tables=None):
    e = {"tower": tower, "kind": "rope", "layers": layers, "head_dim": head_dim, "rotary_dim": rot,
         "layout": layout, "rope_type": rope_type, "base": base, "attention_scaling": att,
         "attention_scaling_f32": f32_of(att),
         "softmax_scale": sm}
    e.update(extra or {})
    e["tables"] = tables if tables is not None else [rope_table(inv, positions_for(max_len), att, max_len, polar)]
    return e


def none_enc(tower, layers, head_dim, sm, why):
    return {"tower": tower, "kind": "none", "layers": layers, "head_dim": head_dim, "softmax_scale": sm,
            "why": why}


def learned_enc(tower, layers, num, offset=0, grid=None, cls=0, extra=None):
    e = {"tower": tower, "kind": "learned", "layers": layers, "num_positions": num, "offset": offset,
         "first_position_ids": [offset + i for i in range(4)]}
    if grid is not None:
        e["grid"] = grid
        e["cls_tokens"] = cls
    e.update(extra or {})
    return e


def layers_where(types, pred):
    return [i for i, t in enumerate(types) if pred(t)]


def std_rope(cfg, mt, layout="half", partial_keys=("partial_rotary_factor",), sm=None, tower="text",
             layers="all", scaling=None, base=None, max_len=None, note=None):
    """A text tower with one rope for the layers given: default / linear / llama3 / yarn / longrope."""
    heads = cfg.get("num_attention_heads", "n_head", "n_heads", "num_heads")
    hidden = cfg.get("hidden_size", "n_embd", "d_model")
    hd = cfg.get("head_dim") or hidden // heads
    partial = cfg.get(*partial_keys, default=1.0)
    rot = int(hd * partial)
    base = base if base is not None else cfg.get("rope_theta", default=10000.0)
    max_len = max_len or cfg.get("max_position_embeddings")
    s = scaling if scaling is not None else (cfg.get("rope_scaling") or {})
    kind = s.get("rope_type") or s.get("type") or "default"
    extra = {}
    if kind == "default":
        inv, att = inv_default(base, rot), 1.0
    elif kind == "linear":
        inv, att = inv_linear(base, rot, s["factor"]), 1.0
        extra["factor"] = s["factor"]
    elif kind == "llama3":
        inv, att = inv_llama3(base, rot, s), 1.0
        extra.update({k: s[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings")})
    elif kind == "yarn":
        inv, att, info = inv_yarn(base, rot, s, max_len)
        extra.update({"factor": s["factor"], "original_max_position_embeddings": s.get("original_max_position_embeddings"),
                      "beta_fast": s.get("beta_fast") or 32, "beta_slow": s.get("beta_slow") or 1,
                      "correction_range": [info["low"], info["high"]], "truncate": info["truncate"]})
    else:
        raise SystemExit(f"{mt}: rope type {kind} not handled here")
    sm = sm if sm is not None else hd ** -0.5
    if note:
        extra["note"] = note
    return rope_enc(tower, layers, hd, rot, layout, base, kind, inv, att, sm, max_len, extra)


# ---- relative-position buckets --------------------------------------------------------------------

def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5Attention._relative_position_bucket (UMT5 the same), rel = memory - query, int64."""
    rel = torch.tensor(rel, dtype=torch.int64)
    out = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        out += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    out += torch.where(small, rel, large)
    return out.tolist()


def deberta_bucket(rel, bucket_size, max_position):
    """make_log_bucket_position (deberta-v2) on int64 relative positions q - k."""
    rel = torch.tensor(rel, dtype=torch.int64)
    sign = torch.sign(rel)
    mid = bucket_size // 2
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1).type_as(rel), torch.abs(rel))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    bucket = torch.where(abs_pos <= mid, rel.type_as(log_pos), log_pos * sign)
    return bucket.to(torch.long).tolist()


REL = [-1000, -512, -300, -200, -129, -128, -127, -100, -20, -8, -7, -1, 0, 1, 7, 8, 20, 100, 127, 128, 129,
       200, 300, 511, 512, 1000]


# ---- families -------------------------------------------------------------------------------------

def fam_standard(c, mt, layout="half", **kw):
    return [std_rope(Cfg(c), mt, layout=layout, **kw)]


def fam_gpt_oss(c):
    cfg = Cfg(c)
    e = std_rope(cfg, "gpt_oss", layout="half")
    e["note"] = "sinks per head; YaRN with truncate=false keeps the correction range unrounded"
    return [e]


def fam_cohere(c):
    return [std_rope(Cfg(c), "cohere", layout="interleaved")]


def fam_cohere2(c):
    cfg = Cfg(c)
    n = cfg.get("num_hidden_layers")
    pat = cfg.get("sliding_window_pattern", default=4)
    types = c.get("layer_types") or ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n)]
    sl = layers_where(types, lambda t: t == "sliding_attention")
    fu = layers_where(types, lambda t: t == "full_attention")
    hd = cfg.get("head_dim") or cfg.get("hidden_size") // cfg.get("num_attention_heads")
    return [std_rope(cfg, "cohere2", layout="interleaved", layers=sl),
            none_enc("text", fu, hd, hd ** -0.5, "full-attention layers apply no rotary (NoPE)")]


def fam_glm(c):  # glm, glm4: partial rotary, interleaved on the first rotary_dim channels
    return [std_rope(Cfg(c), c["model_type"], layout="interleaved")]


def fam_chatglm(c):
    """modeling_chatglm.py (remote code): RotaryEmbedding(kv_channels // 2) with base 10000 * rope_ratio,
    pairs interleaved on the first kv_channels/2 channels, the cache cast to the model's dtype."""
    cfg = Cfg(c)
    hd = cfg.get("kv_channels")
    rot = hd // 2
    ratio = cfg.get("rope_ratio", default=1)
    base = 10000 * ratio
    theta = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float) / rot))
    seq = cfg.get("seq_length")
    pos = positions_for(seq)
    idx = torch.outer(torch.tensor(pos, dtype=torch.float), theta).float()
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(c.get("torch_dtype"))
    t = {"seq_len": seq, "inv_freq": f32_hex(theta), "positions": pos, "cos": f32_hex(torch.cos(idx)),
         "sin": f32_hex(torch.sin(idx))}
    if dt is not None:
        t["cache_dtype"] = str(dt).replace("torch.", "")
        t["cos_cache"] = half_hex(torch.cos(idx), dt)
        t["sin_cache"] = half_hex(torch.sin(idx), dt)
    e = {"tower": "text", "kind": "rope", "layers": "all", "head_dim": hd, "rotary_dim": rot,
         "layout": "interleaved", "rope_type": "default", "base": base, "rope_ratio": ratio,
         # CoreAttention.norm_factor: q·k divided by math.sqrt(head_dim)
         "attention_scaling": 1.0, "attention_scaling_f32": f32_of(1.0), "softmax_scale": 1.0 / math.sqrt(hd),
         "tables": [t]}
    return [e]


def fam_olmo3(c):
    cfg = Cfg(c)
    types = c["layer_types"]
    sl = layers_where(types, lambda t: t == "sliding_attention")
    fu = layers_where(types, lambda t: t == "full_attention")
    return [std_rope(cfg, "olmo3", layers=sl, scaling={"rope_type": "default"},
                     note="sliding layers: default rope (rotary_embs['sliding_attention'])"),
            std_rope(cfg, "olmo3", layers=fu, note="full-attention layers: YaRN")]


def fam_stablelm(c):
    return [std_rope(Cfg(c, {"partial_rotary_factor": 0.25}), "stablelm")]


def fam_granite(c):
    cfg = Cfg(c)
    return [std_rope(cfg, c["model_type"], sm=cfg.get("attention_multiplier"))]


def fam_granitemoehybrid(c):
    cfg = Cfg(c)
    types = c["layer_types"]
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    att = layers_where(types, lambda t: t == "attention")
    mam = layers_where(types, lambda t: t != "attention")
    sm = cfg.get("attention_multiplier")
    if cfg.get("position_embedding_type", default="nope") == "rope":
        first = std_rope(cfg, "granitemoehybrid", layers=att, sm=sm)
    else:
        first = none_enc("text", att, hd, sm, "position_embedding_type nope: attention layers apply no rotary")
    return [first, none_enc("text", mam, hd, None, "mamba layers: no attention, no positions")]


def fam_internlm2(c):
    """modeling_internlm2.py (remote code): dynamic NTK whose long base is a Python float."""
    cfg = Cfg(c)
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    base = cfg.get("rope_theta")
    mx = cfg.get("max_position_embeddings")
    s = cfg.get("rope_scaling")
    inv = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))
    long_len = 2 * mx
    long_base = base * ((s["factor"] * long_len / mx) - (s["factor"] - 1)) ** (hd / (hd - 2))
    inv_long = 1.0 / (long_base ** (torch.arange(0, hd, 2).float() / hd))
    tables = [rope_table(inv, positions_for(mx), 1.0, mx),
              rope_table(inv_long, positions_for(long_len), 1.0, long_len)]
    tables[1]["base"] = long_base
    # the remote code divides q·k by math.sqrt(head_dim)
    return [rope_enc("text", "all", hd, hd, "half", base, "dynamic", inv, 1.0, 1.0 / math.sqrt(hd), mx,
                     {"factor": s["factor"]}, tables=tables)]


def fam_exaone4(c):
    cfg = Cfg(c)
    types = c["layer_types"]
    hd = cfg.get("head_dim")
    if cfg.get("sliding_window") is None:
        return [std_rope(cfg, "exaone4")]
    sl = layers_where(types, lambda t: t == "sliding_attention")
    fu = layers_where(types, lambda t: t != "sliding_attention")
    return [std_rope(cfg, "exaone4", layers=sl),
            none_enc("text", fu, hd, hd ** -0.5, "with a sliding window, global layers apply no rotary")]


def fam_smollm3(c):
    cfg = Cfg(c)
    n = cfg.get("num_hidden_layers")
    flags = c.get("no_rope_layers") or [int((i + 1) % cfg.get("no_rope_layer_interval", default=4) != 0)
                                        for i in range(n)]
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    return [std_rope(cfg, "smollm3", layers=[i for i in range(n) if flags[i]]),
            none_enc("text", [i for i in range(n) if not flags[i]], hd, hd ** -0.5, "no_rope_layers[i] == 0")]


def fam_qwen3_next(c):
    cfg = Cfg(c)
    n = cfg.get("num_hidden_layers")
    k = cfg.get("full_attention_interval", default=4)
    types = c.get("layer_types") or ["linear_attention" if (i + 1) % k else "full_attention" for i in range(n)]
    fu = layers_where(types, lambda t: t == "full_attention")
    li = layers_where(types, lambda t: t != "full_attention")
    hd = cfg.get("head_dim")
    return [std_rope(cfg, "qwen3_next", layers=fu),
            none_enc("text", li, hd, None, "linear-attention (gated delta net) layers: no positions")]


def fam_ernie(c):
    return [std_rope(Cfg(c), "ernie4_5", layout="interleaved",
                     note="cos/sin stay float32 (not cast to the model dtype) and q, k are rotated in float32")]


def fam_hunyuan(c):
    cfg = Cfg(c)
    hd = cfg.get("head_dim")
    s = cfg.get("rope_scaling")
    base = cfg.get("rope_theta") * s.get("alpha") ** (hd / (hd - 2))
    inv = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))
    mx = cfg.get("max_position_embeddings")
    return [rope_enc("text", "all", hd, hd, "half", base, "dynamic", inv, 1.0, hd ** -0.5, mx,
                     {"alpha": s["alpha"], "rope_theta": cfg.get("rope_theta"),
                      "note": "NTK by alpha: base = rope_theta * alpha ** (dim / (dim - 2)), in Python floats"})]


def fam_partial_half(c):  # nemotron, persimmon
    return [std_rope(Cfg(c), c["model_type"])]


def fam_codegen(c):
    """modeling_codegen.py: create_sinusoidal_positions(n_positions, rotary_dim), rotate_every_two."""
    cfg = Cfg(c)
    rot = cfg.get("rotary_dim")
    hd = cfg.get("n_embd") // cfg.get("n_head")
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.int64) / rot))
    mx = cfg.get("n_positions")
    pos = positions_for(mx)
    inp = torch.einsum("i , j -> i j", torch.tensor(pos, dtype=torch.int64).float(), inv).float()
    t = {"seq_len": mx, "inv_freq": f32_hex(inv), "positions": pos, "cos": f32_hex(torch.cos(inp)),
         "sin": f32_hex(torch.sin(inp))}
    sm = 1.0 / torch.sqrt(torch.tensor(hd, dtype=torch.float32)).item()
    return [{"tower": "text", "kind": "rope", "layers": "all", "head_dim": hd, "rotary_dim": rot,
             "layout": "interleaved", "rope_type": "default", "base": 10000, "attention_scaling": 1.0,
             "attention_scaling_f32": f32_of(1.0), "softmax_scale": sm, "tables": [t]}]


def fam_dbrx(c):
    cfg = Cfg(c)
    a = Cfg(c["attn_config"])
    hd = cfg.get("d_model") // cfg.get("n_heads")
    inv = inv_default(a.get("rope_theta"), hd)
    return [rope_enc("text", "all", hd, hd, "half", a.get("rope_theta"), "default", inv, 1.0, hd ** -0.5,
                     cfg.get("max_seq_len"))]


GEMMA3_TEXT = {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "query_pre_attn_scalar": 256,
               "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
               "max_position_embeddings": 131072}
SIGLIP_VISION = {"image_size": 224, "patch_size": 16, "hidden_size": 768, "num_attention_heads": 12}


def gemma_layers(t, n):
    types = t.get("layer_types") or ["sliding_attention" if (i + 1) % t.get("sliding_window_pattern") else
                                     "full_attention" for i in range(n)]
    return (layers_where(types, lambda x: x == "sliding_attention"),
            layers_where(types, lambda x: x == "full_attention"))


def vision_learned(v, tower="vision", cls=0, layers="all", extra=None):
    side = v.get("image_size") // v.get("patch_size")
    return learned_enc(tower, layers, side * side + cls, 0, [side, side], cls, extra)


def fam_gemma3(c):
    t = Cfg(c.get("text_config") or c, GEMMA3_TEXT)
    n = t.get("num_hidden_layers")
    sl, fu = gemma_layers(t, n)
    sm = t.get("query_pre_attn_scalar") ** -0.5
    out = [std_rope(t, "gemma3", layers=sl, scaling={"rope_type": "default"},
                    base=t.get("rope_local_base_freq"), sm=sm,
                    note="sliding layers: rope_local_base_freq, no scaling; class defaults filled in"),
           std_rope(t, "gemma3", layers=fu, sm=sm)]
    if c.get("vision_config"):
        out.append(vision_learned(Cfg(c["vision_config"], SIGLIP_VISION)))
    return out


def fam_gemma3n(c):
    t = Cfg(c["text_config"])
    n = t.get("num_hidden_layers")
    sl, fu = gemma_layers(t, n)
    return [std_rope(t, "gemma3n", layers=sl, scaling={"rope_type": "default"},
                     base=t.get("rope_local_base_freq"), sm=1.0, note="Gemma3nTextAttention.scaling is 1.0"),
            std_rope(t, "gemma3n", layers=fu, sm=1.0),
            gemma3n_audio_enc(Cfg(c["audio_config"]))]


def gemma3n_audio_enc(a):
    """Gemma3nAudioRelativePositionEmbedding: the timing signal (sin then cos, inv_timescales
    exp(-i * ln(1e4) / (channels/2 - 1))) of relative positions max_backward .. -max_forward,
    max_backward = conf_attention_context_left - 1, max_forward = conf_attention_context_right,
    projected per layer by pos_proj. Row p of the table is relative position p."""
    ch = a.get("hidden_size")
    back = max(0, a.get("conf_attention_context_left") - 1)
    fwd = a.get("conf_attention_context_right")
    assert fwd == 0, "a forward context has negative positions: not a table posenc serves"
    n = ch // 2
    inc = math.log(1.0e4 / 1.0) / max(n - 1, 1)
    inv = 1.0 * torch.exp(torch.arange(n) * -inc)
    pos = torch.arange(back, -fwd - 1, -1).float().unsqueeze(-1)
    sig = torch.cat([torch.sin(pos * inv), torch.cos(pos * inv)], dim=-1)
    rows = [0, 1, 2, back]
    tab = sig[[back - r for r in rows]]  # the model's order is descending: position r is index back - r
    return {"tower": "audio", "kind": "sinusoidal", "layers": "all", "dim": ch, "num_positions": back + 1,
            "order": "sin_then_cos", "softmax_scale": None, "inv_timescales": f32_hex(inv), "rows": rows,
            "table": f32_hex(tab),
            "note": "relative positions max_backward down to -max_forward, projected by each layer's pos_proj; "
                    "the query's scale is learned (head_dim^-0.5 / ln 2 * softplus(per_dim_scale))"}


def fam_gemma4(c):
    """Gemma 4 text: sliding layers default rope over head_dim; full layers proportional rope over
    global_head_dim with partial_rotary_factor; scaling 1.0 (q/k norms)."""
    t = Cfg(c["text_config"])
    types = t.get("layer_types")
    sl = layers_where(types, lambda x: x == "sliding_attention")
    fu = layers_where(types, lambda x: x == "full_attention")
    rp = t.get("rope_parameters")
    hd, ghd = t.get("head_dim"), t.get("global_head_dim", default=512)
    mx = t.get("max_position_embeddings")
    ps, pf = rp["sliding_attention"], rp["full_attention"]
    inv_s = inv_default(ps["rope_theta"], hd)
    part = pf.get("partial_rotary_factor", 1.0)
    inv_f = inv_proportional(pf["rope_theta"], ghd, part, pf.get("factor", 1.0))
    return [rope_enc("text", sl, hd, hd, "half", ps["rope_theta"], "default", inv_s, 1.0, 1.0, mx),
            rope_enc("text", fu, ghd, ghd, "half", pf["rope_theta"], "proportional", inv_f, 1.0, 1.0, mx,
                     {"partial_rotary_factor": part, "rotated_pairs": int(part * ghd // 2),
                      "note": "frequencies past the rotary share are 0: those channels see cos 1, sin 0"}),
            gemma4_vision_enc(Cfg(c["vision_config"])),
            gemma4_vision_learned(Cfg(c["vision_config"], GEMMA4_VISION))]


GEMMA4_VISION = {"position_embedding_size": 10240}


def gemma4_vision_learned(v):
    """Gemma4VisionPatchEmbedder.position_embedding_table [2, position_embedding_size, hidden]:
    one_hot(pixel_position_ids (x, y)) @ table, summed over the two axes, so a patch at column x,
    row y adds table[0][x] + table[1][y] (padding patches add 0); scaling 1 (q/k norms)."""
    n = v.get("position_embedding_size")
    return learned_enc("vision", "all", n, 0, extra={
        "softmax_scale": 1.0, "per_axis": ["col", "row"], "shape": [2, n, v.get("hidden_size")],
        "note": "a table per axis: a patch at column x, row y adds table[0][x] + table[1][y]"})


def gemma4_vision_enc(v):
    """Gemma4VisionRotaryEmbedding: the head splits into an x block and a y block of head_dim/2
    channels, each rotated in half layout with inv_freq over head_dim/2; x is the column."""
    hd = v.get("head_dim")
    sd = hd // 2
    base = v.get("rope_parameters")["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, sd, 2, dtype=torch.float32) / sd))
    pts = [(r, q) for r, q in PATCHES if r >= 0] + [(40, 63)]
    rows = []
    for r, q in pts:
        ax = angles(inv, [q])[0]
        ay = angles(inv, [r])[0]
        rows.append(torch.cat([ax, ay]))
    a = torch.stack(rows)
    return {"tower": "vision", "kind": "rope2d", "variant": "gemma4", "layers": "all", "head_dim": hd,
            "rotary_dim": hd, "layout": "half_per_axis", "base": base, "softmax_scale": 1.0,
            "inv_freq": f32_hex(inv), "pair_axis": ["col"] * (sd // 2) + ["row"] * (sd // 2),
            "patches": pts, "cos": f32_hex(a.cos()), "sin": f32_hex(a.sin()),
            "note": "channels [0, head_dim/2) rotate by the column (pair i at i, i + head_dim/4), "
                    "[head_dim/2, head_dim) by the row"}


def query_scale_enc(variant, layers, beta, floor, mx, why):
    """Position-dependent query scale, float32 as the attention module computes it."""
    pos = positions_for(mx) + [floor - 1, floor, 2 * floor - 1, 2 * floor, 5 * floor + 3]
    pos = sorted({p for p in pos if p < mx})
    p = torch.tensor(pos, dtype=torch.int64)
    if variant == "llama4":  # Llama4TextAttention: log(floor((pos + 1) / floor_scale) + 1) * attn_scale + 1
        v = torch.log(torch.floor((p.float() + 1.0) / floor) + 1.0) * beta + 1.0
    else:  # ministral3 get_llama_4_attn_scale: 1 + beta * log(1 + floor(pos / original_max))
        v = 1 + beta * torch.log(1 + torch.floor(p / floor))
    return {"tower": "text", "kind": "query_scale", "variant": variant, "layers": layers, "beta": beta,
            "floor": floor, "positions": pos, "scale": f32_hex(v), "why": why}


def fam_ministral3(c):
    t = Cfg(c["text_config"])
    rp = dict(t.get("rope_parameters"))
    e = std_rope(t, "ministral3", scaling=rp, base=rp["rope_theta"])
    out = [e]
    if rp.get("llama_4_scaling_beta") is not None:
        out.append(query_scale_enc("ministral3", "all", rp["llama_4_scaling_beta"],
                                   rp["original_max_position_embeddings"], t.get("max_position_embeddings"),
                                   "query_states *= 1 + beta * log(1 + floor(position / original_max_position_embeddings))"))
    out.append(pixtral_enc(Cfg(c["vision_config"])))
    return out


def fam_mistral3(c):
    out = [std_rope(Cfg(c["text_config"]), "mistral")]
    out.append(pixtral_enc(Cfg(c["vision_config"])))
    return out


PATCHES = [(0, 0), (0, 1), (1, 0), (3, 5), (-1, -1)]


def pixtral_enc(v):
    """PixtralRotaryEmbedding: rows take the even frequencies, columns the odd ones; position id
    row * side + col; cat(freqs, freqs): half layout over head_dim."""
    hd = v.get("head_dim") or v.get("hidden_size") // v.get("num_attention_heads")
    base = v.get("rope_theta")
    side = v.get("image_size") // v.get("patch_size")
    freqs = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))
    h = torch.arange(side)
    w = torch.arange(side)
    fh = torch.outer(h, freqs[::2]).float()
    fw = torch.outer(w, freqs[1::2]).float()
    inv = torch.cat([fh[:, None, :].repeat(1, side, 1), fw[None, :, :].repeat(side, 1, 1)], dim=-1).reshape(-1, hd // 2)
    pts = [(r % side, q % side) for r, q in PATCHES]
    ids = torch.tensor([r * side + q for r, q in pts])
    a = inv[ids]
    return {"tower": "vision", "kind": "rope2d", "variant": "pixtral", "layers": "all", "head_dim": hd,
            "rotary_dim": hd, "layout": "half", "base": base, "grid": [side, side], "softmax_scale": hd ** -0.5,
            "inv_freq": f32_hex(freqs), "pair_axis": ["row" if k < hd // 4 else "col" for k in range(hd // 2)],
            "patches": pts, "cos": f32_hex(a.cos()), "sin": f32_hex(a.sin())}


def qwen_vision_enc(v, variant, hd):
    """Qwen2-VL-style VisionRotaryEmbedding(head_dim / 2): pairs [row * f, col * f], cat with itself."""
    dim = hd // 2
    inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    side = 64
    full = torch.outer(torch.arange(side, dtype=inv.dtype), inv)
    pts = [(r % side, q % side) for r, q in PATCHES]
    a = torch.stack([torch.cat([full[r], full[q]]) for r, q in pts])
    return {"tower": "vision", "kind": "rope2d", "variant": variant, "layers": "all", "head_dim": hd,
            "rotary_dim": hd, "layout": "half", "base": 10000.0, "softmax_scale": hd ** -0.5,
            "inv_freq": f32_hex(inv), "pair_axis": ["row"] * (dim // 2) + ["col"] * (dim // 2),
            "patches": pts, "cos": f32_hex(a.cos()), "sin": f32_hex(a.sin()),
            "note": "patch (row, col) in the merge-window order of rot_pos_emb; the table is indexed by row and col"}


CLIP_VISION = {"image_size": 224, "patch_size": 32}
CLIP_TEXT = {"max_position_embeddings": 77}


def text_of(c, defaults=None):
    return Cfg(c.get("text_config") or {}, defaults)


def fam_llava(c):  # llava, llava_next, llava_onevision, pixtral-12b (llava + pixtral vision)
    out = [std_rope(text_of(c), c["text_config"]["model_type"])]
    v = c["vision_config"]
    if v["model_type"] == "pixtral":
        out.append(pixtral_enc(Cfg(v)))
    elif v["model_type"] == "clip_vision_model":
        out.append(vision_learned(Cfg(v, CLIP_VISION), cls=1))
    else:
        out.append(vision_learned(Cfg(v, SIGLIP_VISION)))
    return out


GEMMA_TEXT = {"head_dim": 256, "rope_theta": 10000.0, "max_position_embeddings": 8192}


def fam_paligemma(c):
    t = text_of(c, GEMMA_TEXT)
    return [std_rope(t, "gemma"), vision_learned(Cfg(c["vision_config"], SIGLIP_VISION))]


def fam_idefics3(c):
    out = [std_rope(text_of(c), "llama")]
    out.append(vision_learned(Cfg(c["vision_config"]), extra={
        "note": "for a partial image, position ids come from bucketize of fractional patch coordinates"}))
    return out


def fam_internvl(c):
    v = c["vision_config"]
    side = v["image_size"][0] // v["patch_size"][0]
    return [std_rope(text_of(c), "qwen2"),
            learned_enc("vision", "all", side * side + 1, 0, [side, side], 1)]


def fam_mllama(c):
    t = text_of(c)
    n = t.get("num_hidden_layers")
    xl = t.get("cross_attention_layers")
    hd = t.get("hidden_size") // t.get("num_attention_heads")
    v = Cfg(c["vision_config"])
    side = v.get("image_size") // v.get("patch_size")
    return [std_rope(t, "mllama", layers=[i for i in range(n) if i not in xl]),
            none_enc("text", xl, hd, hd ** -0.5, "cross-attention layers: keys are image states, no rotary"),
            learned_enc("vision", "all", side * side + 1, 0, [side, side], 1,
                        {"gated": True, "max_num_tiles": v.get("max_num_tiles"),
                         "note": "plus a tile position embedding per aspect-ratio id"})]


def fam_glm4v(c, layout="interleaved"):
    """GLM-4.1V (layout interleaved) and GLM-4.5V (glm4v_moe, half: Glm4vMoeTextAttention's
    apply_rotary_pos_emb is rotate_half's on the first rotary_dim channels)."""
    t = text_of(c)
    e = std_rope(t, c["model_type"], layout=layout, scaling={"rope_type": "default"})
    sec = t.get("rope_scaling")["mrope_section"]
    e["kind"] = "mrope"
    e["variant"] = "glm4v"  # get_rope_index: each video frame a group of its own, at time 0
    e["mrope_section"] = sec
    e["mrope_interleaved"] = False
    e["pair_axis"] = mrope_axes(sec, False)
    if layout == "interleaved":
        e["note"] = ("Glm4vTextAttention applies apply_multimodal_rotary_pos_emb: pair k takes the t, h or w "
                     "row by mrope_section in order, then repeat_interleave puts it at channels 2k, 2k + 1 of "
                     "the first rotary_dim; text alone: the three position rows are equal")
    else:
        e["note"] = ("Glm4vMoeTextRotaryEmbedding: pair k takes the t, h or w row by mrope_section in order, "
                     "cat(freq, freq) puts it at channels k, k + rotary_dim/2; text alone: the rows are equal")
    v = Cfg(c["vision_config"])
    vhd = v.get("hidden_size") // v.get("num_heads")
    side = v.get("image_size") // v.get("patch_size")
    return [e, qwen_vision_enc(v, "glm4v", vhd),
            learned_enc("vision", "all", side * side, 0, [side, side], 0,
                        {"note": "resampled to the image's grid (bicubic grid_sample)"})]


def fam_whisper(c):
    """Whisper: the encoder's sinusoids (checkpoint weights equal to sinusoids(1500, d_model)), the
    decoder's learned table from position 0."""
    cfg = Cfg(c)
    d = cfg.get("d_model")
    n = cfg.get("max_source_positions")
    inc = math.log(10000) / (d // 2 - 1)
    inv = torch.exp(-inc * torch.arange(d // 2))
    rows = [0, 1, 2, n - 1]
    st = torch.arange(n).view(-1, 1) * inv.view(1, -1)
    tab = torch.cat([torch.sin(st), torch.cos(st)], dim=1)[rows]
    hd = d // cfg.get("encoder_attention_heads")
    return [{"tower": "audio", "kind": "sinusoidal", "layers": "encoder", "dim": d, "num_positions": n,
             "order": "sin_then_cos", "softmax_scale": hd ** -0.5, "inv_timescales": f32_hex(inv),
             "rows": rows, "table": f32_hex(tab)},
            learned_enc("text", "decoder", cfg.get("max_target_positions"), 0)]


def fam_learned_offset(c, offset, num_key="max_position_embeddings", heads_key="num_attention_heads",
                       hidden_key="hidden_size", layers="all", note=None, rows_key=False):
    """rows_key: the config's number counts the table's rows, offset ones included (RoBERTa's 514
    rows hold 512 positions); else it counts positions (BART's 1024 positions are 1026 rows)."""
    cfg = Cfg(c)
    hd = cfg.get(hidden_key) // cfg.get(heads_key)
    num = cfg.get(num_key) - (offset if rows_key else 0)
    e = learned_enc("text", layers, num, offset, extra={"softmax_scale": hd ** -0.5})
    if note:
        e["note"] = note
    return e


def fam_roberta(c):
    pad = c["pad_token_id"]
    return [fam_learned_offset(c, pad + 1, rows_key=True,
                               note="create_position_ids_from_input_ids: padding_idx + 1 + index")]


def fam_bart(c):
    return [fam_learned_offset(c, 2, heads_key="encoder_attention_heads", hidden_key="d_model", layers="encoder",
                               note="LearnedPositionalEmbedding offset 2 (fixed, not from pad_token_id)"),
            fam_learned_offset(c, 2, heads_key="decoder_attention_heads", hidden_key="d_model", layers="decoder")]


def fam_opt(c):
    return [fam_learned_offset(c, 2, note="position = cumsum(attention_mask) - 1 + 2")]


def fam_distilbert(c):
    return [fam_learned_offset(c, 0, heads_key="n_heads", hidden_key="dim")]


def fam_bigcode(c):
    """GPTBigCodeAttention: scale_factor /= head_dim**0.5, q·k scaled by 1 / math.sqrt(head_dim)."""
    e = fam_learned_offset(c, 0, num_key="n_positions", heads_key="n_head", hidden_key="n_embd")
    e["softmax_scale"] = 1.0 / math.sqrt(c["n_embd"] // c["n_head"])
    return [e]


def fam_mpnet(c):
    cfg = Cfg(c)
    nb = cfg.get("relative_attention_num_buckets", default=32)
    return [fam_learned_offset(c, c["pad_token_id"] + 1, rows_key=True),
            {"tower": "text", "kind": "t5", "layers": "all", "shared_across_layers": True, "bidirectional": True,
             "num_buckets": nb, "max_distance": 128, "relative_position": REL,
             "bucket": t5_bucket(REL, True, nb, 128),
             "note": "added to the scores after the 1/sqrt(head_dim) scale"}]


def fam_deberta(c):
    cfg = Cfg(c)
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    pb = cfg.get("position_buckets", default=-1)
    mrp = cfg.get("max_relative_positions", default=-1)
    if mrp < 1:
        mrp = cfg.get("max_position_embeddings")
    types = cfg.get("pos_att_type")
    types = types.split("|") if isinstance(types, str) else types
    scale = torch.sqrt(torch.tensor(hd, dtype=torch.float) * (1 + len(types)))
    q = torch.arange(512)
    table = q[:, None] - q[None, :]
    rows = [0, 1, 300, 511]
    tab = [deberta_bucket(table[r].tolist(), pb, mrp) for r in rows]
    return [{"tower": "text", "kind": "deberta", "layers": "all", "position_buckets": pb,
             "max_relative_positions": mrp, "att_span": pb if pb > 0 else mrp, "pos_att_type": types,
             "softmax_divisor_f32": f32_hex(scale), "softmax_scale": 1.0 / scale.item(),
             "relative_position": REL, "bucket": deberta_bucket(REL, pb, mrp),
             "table": {"q_len": 512, "k_len": 512, "rows": rows, "values": tab},
             "note": "scores and both relative terms are divided by sqrt(head_dim * (1 + len(pos_att_type)))"}]


def fam_modernbert(c):
    cfg = Cfg(c)
    n = cfg.get("num_hidden_layers")
    k = cfg.get("global_attn_every_n_layers")
    glob = [i for i in range(n) if i % k == 0]
    loc = [i for i in range(n) if i % k]
    return [std_rope(cfg, "modernbert", layers=glob, base=cfg.get("global_rope_theta"), scaling={}),
            std_rope(cfg, "modernbert", layers=loc, base=cfg.get("local_rope_theta"), scaling={},
                     note="local (sliding 128) layers")]


def fam_clip(c):
    v = Cfg(c["vision_config"], CLIP_VISION)
    t = Cfg(c["text_config"], CLIP_TEXT)
    return [learned_enc("text", "all", t.get("max_position_embeddings"), 0), vision_learned(v, cls=1)]


def fam_siglip(c):
    v = Cfg(c["vision_config"], SIGLIP_VISION)
    t = Cfg(c["text_config"], {"max_position_embeddings": 64})
    return [learned_enc("text", "all", t.get("max_position_embeddings"), 0), vision_learned(v)]


def fam_dinov2(c):
    return [vision_learned(Cfg(c), cls=1, extra={
        "note": "resampled bicubic to the input's patch grid when it differs (224 px: 16 x 16)"})]


def fam_umt5(c):
    cfg = Cfg(c)
    nb, md = cfg.get("relative_attention_num_buckets"), cfg.get("relative_attention_max_distance")
    return [{"tower": "text", "kind": "t5", "layers": stack, "per_layer_bias": True, "bidirectional": bd,
             "num_buckets": nb, "max_distance": md, "softmax_scale": 1.0, "relative_position": REL,
             "bucket": t5_bucket(REL, bd, nb, md)} for stack, bd in (("encoder", True), ("decoder", False))]


def fam_deepseek_v3(c):
    """DeepseekV3: rope on qk_rope_head_dim; rope_interleave (default true) reorders q/k's rope part from
    pairs to halves before a half-layout rotation, which is interleaved rope; softmax scale carries
    yarn_get_mscale(factor, mscale_all_dim) squared."""
    cfg = Cfg(c)
    rot = cfg.get("qk_rope_head_dim")
    qk = cfg.get("qk_nope_head_dim") + rot
    s = cfg.get("rope_scaling")
    mx = cfg.get("max_position_embeddings")
    inv, att, info = inv_yarn(cfg.get("rope_theta"), rot, s, mx)
    sm = qk ** -0.5
    if s.get("mscale_all_dim"):
        m = yarn_mscale(s["factor"], s["mscale_all_dim"])
        sm = sm * m * m
    inter = c.get("rope_interleave", True)
    return [rope_enc("text", "all", qk, rot, "interleaved" if inter else "half", cfg.get("rope_theta"), "yarn",
                     inv, att, sm, mx, {"rope_interleave": inter, "factor": s["factor"],
                                        "mscale": s.get("mscale"), "mscale_all_dim": s.get("mscale_all_dim"),
                                        "correction_range": [info["low"], info["high"]]})]


def fam_mistral_large3(c):
    """Mistral Large 3: a DeepSeek-V3 text model (MLA, YaRN, mscale in the softmax scale) whose
    rope_parameters carry llama_4_scaling_beta: queries times 1 + beta * log(1 + floor(pos / original)).
    The config is reconstructed from transformers' deepseek_v3 and ministral3 config classes."""
    t = Cfg(c["text_config"])
    rp = t.get("rope_parameters")
    rot = t.get("qk_rope_head_dim")
    qk = t.get("qk_nope_head_dim") + rot
    mx = t.get("max_position_embeddings")
    inv, att, info = inv_yarn(rp["rope_theta"], rot, rp, mx)
    m = yarn_mscale(rp["factor"], rp["mscale_all_dim"])
    inter = t.get("rope_interleave", default=True)
    return [rope_enc("text", "all", qk, rot, "interleaved" if inter else "half", rp["rope_theta"], "yarn", inv, att,
                     qk ** -0.5 * m * m, mx, {"rope_interleave": inter, "factor": rp["factor"], "mscale": rp["mscale"],
                                              "mscale_all_dim": rp["mscale_all_dim"],
                                              "correction_range": [info["low"], info["high"]]}),
            query_scale_enc("ministral3", "all", rp["llama_4_scaling_beta"], rp["original_max_position_embeddings"], mx,
                            "query_states *= 1 + beta * log(1 + floor(position / original_max_position_embeddings))"),
            pixtral_enc(Cfg(c["vision_config"]))]


def fam_per_layer_type(c):
    """rope_parameters keyed by layer type (5.x configs with layer_types): each type's layers turn with
    that type's own rope_theta and scaling."""
    cfg = Cfg(c)
    out = []
    for typ, s in c["rope_parameters"].items():
        out.append(std_rope(cfg, c["model_type"], layers=layers_where(c["layer_types"], lambda t, typ=typ: t == typ),
                            scaling=s, base=s["rope_theta"], note=f"layers of type {typ}: rope_parameters.{typ}"))
    return out


def fam_phi3_longrope(c):
    cfg = Cfg(c)
    rp = cfg.get("rope_parameters")
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    rot = int(hd * rp.get("partial_rotary_factor", 1.0))
    mx = cfg.get("max_position_embeddings")
    orig = rp["original_max_position_embeddings"]
    tables = []
    for seq in (orig, mx):
        inv, att, factor = inv_longrope(rp["rope_theta"], rot, rp, mx, seq)
        tables.append(rope_table(inv, positions_for(seq), att, seq))
    return [rope_enc("text", "all", hd, rot, "half", rp["rope_theta"], "longrope", inv, att, hd ** -0.5, mx,
                     {"factor": factor, "original_max_position_embeddings": orig,
                      "note": "short factors while the sequence is at most original_max_position_embeddings long, "
                              "long factors past it; attention_scaling from the explicit factor"},
                     tables=tables)]


def fam_phimoe(c):
    """PhimoeRotaryEmbedding: LongRoPE frequencies (short / long factors by sequence length), but the
    tables are scaled by short_mscale / long_mscale from the config, not LongRoPE's attention factor."""
    cfg = Cfg(c)
    s = dict(cfg.get("rope_scaling"))
    hd = cfg.get("hidden_size") // cfg.get("num_attention_heads")
    mx = cfg.get("max_position_embeddings")
    orig = cfg.get("original_max_position_embeddings") or s["original_max_position_embeddings"]
    s.setdefault("original_max_position_embeddings", orig)
    s.pop("factor", None)
    tables = []
    for seq in (orig, mx):
        inv, _, factor = inv_longrope(cfg.get("rope_theta"), hd, s, mx, seq)
        msc = s["long_mscale"] if seq > orig else s["short_mscale"]
        t = rope_table(inv, positions_for(seq), msc, seq)
        t["attention_scaling"] = msc
        tables.append(t)
    return [rope_enc("text", "all", hd, hd, "half", cfg.get("rope_theta"), "longrope", inv, s["long_mscale"],
                     hd ** -0.5, mx, {"original_max_position_embeddings": orig, "short_mscale": s["short_mscale"],
                                      "long_mscale": s["long_mscale"], "longrope_attention_factor_unused":
                                      math.sqrt(1 + math.log(factor) / math.log(orig))}, tables=tables)]


def mrope_axes(section, interleaved):
    """Which position row (t, h, w) each frequency pair uses."""
    n = sum(section)
    if interleaved:  # Qwen3-VL apply_interleaved_mrope
        ax = ["t"] * n
        for d, off in ((1, 1), (2, 2)):
            for k in range(off, section[d] * 3, 3):
                ax[k] = "thw"[d]
        return ax
    return ["t"] * section[0] + ["h"] * section[1] + ["w"] * section[2]


def qwen25vl_video_positions(spg, as_int, text_before=4, grid=(4, 4, 4), merge=2, tps=2, text_after=3):
    """get_rope_index for [text_before text tokens, one video, text_after text tokens]: [3][n] ints.
    as_int: the time step cast to int64 before use (transformers since 4.52); else the float form."""
    t, h, w = grid[0], grid[1] // merge, grid[2] // merge
    rows = [[], [], []]
    for i in range(text_before):
        for r in rows:
            r.append(i)
    rng = torch.arange(t).view(-1, 1).expand(-1, h * w)
    step = torch.as_tensor(spg, dtype=rng.dtype) if as_int else torch.as_tensor(spg)
    tt = (rng * step * tps).long().flatten()
    hh = torch.arange(h).view(1, -1, 1).expand(t, -1, w).flatten()
    ww = torch.arange(w).view(1, 1, -1).expand(t, h, -1).flatten()
    for r, v in zip(rows, (tt, hh, ww)):
        r.extend((v + text_before).tolist())
    nxt = max(max(r) for r in rows) + 1
    for i in range(text_after):
        for r in rows:
            r.append(nxt + i)
    return rows


def fam_qwen_vl(c):
    mt = c["model_type"]
    t = Cfg(c.get("text_config") or c)
    s = t.get("rope_scaling") or c.get("rope_scaling")
    sec = s["mrope_section"]
    inter = bool(s.get("mrope_interleaved"))
    e = std_rope(t, mt, scaling={"rope_type": "default"})
    e["kind"] = "mrope"
    e["variant"] = {"qwen2_5_vl": "qwen25vl", "qwen3_vl": "qwen3vl"}.get(mt, "qwen2vl")
    e["mrope_section"] = sec
    e["mrope_interleaved"] = inter
    e["pair_axis"] = mrope_axes(sec, inter)
    e["note"] = "text alone: the three position rows are equal, the table is plain rope"
    out = [e]
    v = c["vision_config"]
    if mt == "qwen2_5_vl":
        e["video_example"] = {
            "segments": "text:4,video:4x4x4,text:3", "spatial_merge_size": 2,
            "tokens_per_second": v.get("tokens_per_second", 2),
            "second_per_grid_t": {str(x): {"hf": qwen25vl_video_positions(x, True),
                                           "float": qwen25vl_video_positions(x, False)}
                                  for x in (0.5, 1.0, 1.5, 2.0)}}
        out.append(qwen_vision_enc(v, "qwen2vl", v["hidden_size"] // v["num_heads"]))
    else:
        out.append(qwen_vision_enc(v, "qwen2vl", v["hidden_size"] // v["num_heads"]))
        side = int(math.isqrt(v["num_position_embeddings"]))
        out.append(learned_enc("vision", "all", v["num_position_embeddings"], 0, [side, side], 0,
                               {"note": "bilinearly resampled to each image's patch grid"}))
    return out


def llama4_vision_enc(v):
    """Llama4VisionRotaryEmbedding: patches (x = idx % side, y = idx // side) then the class token last
    with angle 0; pair k < freq_dim/2 uses (x + 1), the rest (y + 1); complex (interleaved) layout."""
    hd = v.get("hidden_size") // v.get("num_attention_heads")
    side = v.get("image_size") // v.get("patch_size")
    idx = torch.arange(side ** 2, dtype=torch.int32).reshape(side ** 2, 1)
    idx = torch.cat([idx, idx[:1]], dim=0)
    idx[-1, -1] = -2
    fx, fy = idx % side, idx // side
    fd = hd // 2
    rf = 1.0 / (v.get("rope_theta") ** (torch.arange(0, fd, 2)[: (fd // 2)].float() / fd))
    ax = ((fx + 1)[..., None] * rf[None, None, :]).repeat_interleave(2, dim=-1)
    ay = ((fy + 1)[..., None] * rf[None, None, :]).repeat_interleave(2, dim=-1)
    f = torch.cat([ax, ay], dim=-1).float().contiguous()[..., ::2]
    f = f.masked_fill(idx.reshape(-1, 1, 1) < 0, 0)
    rows = [0, 1, side, side * 3 + 5, side * side - 1, side * side]
    a = f[rows, 0]
    return {"tower": "vision", "kind": "rope2d", "variant": "llama4", "layers": "all", "head_dim": hd,
            "rotary_dim": hd, "layout": "interleaved", "base": v.get("rope_theta"), "grid": [side, side],
            "softmax_scale": hd ** -0.5, "inv_freq": f32_hex(rf),
            "pair_axis": ["col"] * (fd // 2) + ["row"] * (fd // 2),
            "tokens": rows, "cos": f32_hex(torch.cos(a)), "sin": f32_hex(torch.sin(a)),
            "note": "token side*side is the class token (angle 0); angles use col + 1 and row + 1"}


def fam_llama4(c):
    t = Cfg(c["text_config"])
    n = t.get("num_hidden_layers")
    flags = t.get("no_rope_layers") or [int((i + 1) % t.get("no_rope_layer_interval", default=4) != 0)
                                        for i in range(n)]
    rope_l = [i for i in range(n) if flags[i]]
    nope_l = [i for i in range(n) if not flags[i]]
    hd = t.get("head_dim")
    s = t.get("rope_scaling")
    inv = inv_llama3(t.get("rope_theta"), hd, s)
    mx = t.get("max_position_embeddings")
    out = [rope_enc("text", rope_l, hd, hd, "interleaved", t.get("rope_theta"), "llama3", inv, 1.0, hd ** -0.5,
                    mx, {k: s[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings")}, polar=True),
           none_enc("text", nope_l, hd, hd ** -0.5, "no_rope_layers: every 4th layer")]
    if t.get("attn_temperature_tuning", default=True):
        out.append(query_scale_enc("llama4", nope_l, t.get("attn_scale", default=0.1),
                                   t.get("floor_scale", default=8192), mx,
                                   "NoPE layers only: query_states *= log(floor((pos + 1) / floor_scale) + 1) * attn_scale + 1"))
    v = Cfg(c["vision_config"])
    side = v.get("image_size") // v.get("patch_size")
    out.append(llama4_vision_enc(v))
    out.append(learned_enc("vision", "all", side * side + 1, 0, [side, side], 1,
                           {"note": "positional_embedding_vlm: the patches, then the class token appended last"}))
    return out


M = TF + "models/"
FAMILIES = {
    # LLMs
    "gpt-oss-20b": (fam_gpt_oss, [M + "gpt_oss/modeling_gpt_oss.py", TF + "modeling_rope_utils.py"]),
    "cohere-command-r": (fam_cohere, [M + "cohere/modeling_cohere.py"]),
    "c4ai-command-r7b-12-2024": (fam_cohere2, [M + "cohere2/modeling_cohere2.py"]),
    "glm-4-9b-chat-hf": (fam_glm, [M + "glm/modeling_glm.py"]),
    "glm-4-9b-0414": (fam_glm, [M + "glm4/modeling_glm4.py"]),
    "glm-4.5-air": (lambda c: fam_standard(c, "glm4_moe"), [M + "glm4_moe/modeling_glm4_moe.py"]),
    "glm-4-9b-chat": (fam_chatglm, ["THUDM/glm-4-9b-chat modeling_chatglm.py (remote code)"]),
    "chatglm3-6b": (fam_chatglm, ["THUDM/chatglm3-6b modeling_chatglm.py (remote code)"]),
    "olmo-1b-hf": (lambda c: fam_standard(c, "olmo"), [M + "olmo/modeling_olmo.py"]),
    "olmo-2-1124-7b": (lambda c: fam_standard(c, "olmo2"), [M + "olmo2/modeling_olmo2.py"]),
    "olmo-3-7b": (fam_olmo3, [M + "olmo3/modeling_olmo3.py (4.57: rotary_embs per layer type)"]),
    "starcoder2-7b": (lambda c: fam_standard(c, "starcoder2"), [M + "starcoder2/modeling_starcoder2.py"]),
    "stablelm-2-1_6b": (fam_stablelm, [M + "stablelm/modeling_stablelm.py", M + "stablelm/configuration_stablelm.py"]),
    "granite-3.1-8b-instruct": (fam_granite, [M + "granite/modeling_granite.py"]),
    "granite-3.1-3b-a800m-instruct": (fam_granite, [M + "granitemoe/modeling_granitemoe.py"]),
    "granite-4.0-h-350m": (fam_granitemoehybrid, [M + "granitemoehybrid/modeling_granitemoehybrid.py"]),
    "internlm2-chat-7b": (fam_internlm2, ["internlm/internlm2-chat-7b modeling_internlm2.py (remote code)"]),
    "exaone-4.0-32b": (fam_exaone4, [M + "exaone4/modeling_exaone4.py"]),
    "smollm3-3b": (fam_smollm3, [M + "smollm3/modeling_smollm3.py", M + "smollm3/configuration_smollm3.py"]),
    "qwen3-next-80b-a3b-instruct": (fam_qwen3_next, [M + "qwen3_next/modeling_qwen3_next.py"]),
    "ernie-4.5-0.3b-pt": (fam_ernie, [M + "ernie4_5/modeling_ernie4_5.py"]),
    "hunyuan-7b-instruct": (fam_hunyuan, [M + "hunyuan_v1_dense/modeling_hunyuan_v1_dense.py"]),
    "hunyuan-a13b-instruct": (fam_hunyuan, [M + "hunyuan_v1_moe/modeling_hunyuan_v1_moe.py"]),
    "nemotron-mini-4b-instruct": (fam_partial_half, [M + "nemotron/modeling_nemotron.py"]),
    "persimmon-8b-base": (fam_partial_half, [M + "persimmon/modeling_persimmon.py"]),
    "codegen-350m-mono": (fam_codegen, [M + "codegen/modeling_codegen.py"]),
    "dbrx-instruct": (fam_dbrx, [M + "dbrx/modeling_dbrx.py"]),
    "gemma-3n-e4b-it": (fam_gemma3n, [M + "gemma3n/modeling_gemma3n.py (text; the audio conformer's "
                                      "relative position embedding)"]),
    "ministral-3-8b-instruct-2512": (fam_ministral3, [M + "ministral3/modeling_ministral3.py (5.x)",
                                                      M + "pixtral/modeling_pixtral.py"]),
    "gemma-4-e2b-it": (fam_gemma4, [M + "gemma4/configuration_gemma4.py (5.x)", TF + "modeling_rope_utils.py (5.x)"]),
    # vision-language
    "llava-1.5-7b": (fam_llava, [M + "llava/modeling_llava.py", M + "clip/modeling_clip.py"]),
    "llava-v1.6-mistral-7b": (fam_llava, [M + "llava_next/modeling_llava_next.py", M + "clip/modeling_clip.py"]),
    "llava-onevision-qwen2-7b-ov": (fam_llava, [M + "llava_onevision/modeling_llava_onevision.py",
                                                M + "siglip/modeling_siglip.py"]),
    "mistral-small-3.1-24b-instruct-2503": (fam_mistral3, [M + "mistral3/modeling_mistral3.py",
                                                           M + "pixtral/modeling_pixtral.py"]),
    "pixtral-12b": (fam_llava, [M + "llava/modeling_llava.py", M + "pixtral/modeling_pixtral.py"]),
    "paligemma-3b-pt-224": (fam_paligemma, [M + "paligemma/modeling_paligemma.py", M + "siglip/modeling_siglip.py"]),
    "smolvlm-256m-instruct": (fam_idefics3, [M + "idefics3/modeling_idefics3.py"]),
    "smolvlm2-256m-video-instruct": (fam_idefics3, [M + "smolvlm/modeling_smolvlm.py"]),
    "internvl3-1b-hf": (fam_internvl, [M + "internvl/modeling_internvl.py"]),
    "mllama-11b-vision": (fam_mllama, [M + "mllama/modeling_mllama.py"]),
    "glm-4.1v-9b-thinking": (fam_glm4v, [M + "glm4v/modeling_glm4v.py"]),
    "glm-4.5v": (lambda c: fam_glm4v(c, "half"), [M + "glm4v_moe/modeling_glm4v_moe.py", M + "glm4v/modeling_glm4v.py"]),
    "gemma-3-4b-it": (fam_gemma3, [M + "gemma3/modeling_gemma3.py", M + "gemma3/configuration_gemma3.py"]),
    # encoders and speech
    "whisper-small": (fam_whisper, [M + "whisper/modeling_whisper.py"]),
    "roberta-base": (fam_roberta, [M + "roberta/modeling_roberta.py"]),
    "xlm-roberta-base": (fam_roberta, [M + "xlm_roberta/modeling_xlm_roberta.py"]),
    "distilbert-base-uncased": (fam_distilbert, [M + "distilbert/modeling_distilbert.py"]),
    "mpnet-base": (fam_mpnet, [M + "mpnet/modeling_mpnet.py"]),
    "bart-base": (fam_bart, [M + "bart/modeling_bart.py"]),
    "mbart-large-50": (fam_bart, [M + "mbart/modeling_mbart.py"]),
    "opt-125m": (fam_opt, [M + "opt/modeling_opt.py"]),
    "gpt-bigcode-santacoder": (fam_bigcode, [M + "gpt_bigcode/modeling_gpt_bigcode.py"]),
    "deberta-v3-base": (fam_deberta, [M + "deberta_v2/modeling_deberta_v2.py"]),
    "modernbert-base": (fam_modernbert, [M + "modernbert/modeling_modernbert.py"]),
    "clip-vit-base-patch32": (fam_clip, [M + "clip/modeling_clip.py"]),
    "siglip-base-patch16-224": (fam_siglip, [M + "siglip/modeling_siglip.py"]),
    "dinov2-base": (fam_dinov2, [M + "dinov2/modeling_dinov2.py"]),
    "umt5-small": (fam_umt5, [M + "umt5/modeling_umt5.py"]),
    # details that change numbers (item 5), on published configs already under tests/data/configs
    "deepseek-v3": (fam_deepseek_v3, [M + "deepseek_v3/modeling_deepseek_v3.py"]),
    "deepseek-v3-rope-interleave-false": (fam_deepseek_v3, [M + "deepseek_v3/modeling_deepseek_v3.py"]),
    "phi-3.5-moe-instruct": (fam_phimoe, [M + "phimoe/modeling_phimoe.py"]),
    "phi4-mini-instruct-longrope-factor": (fam_phi3_longrope, [TF + "modeling_rope_utils.py (5.x longrope)"]),
    "qwen2.5-vl-7b": (fam_qwen_vl, [M + "qwen2_5_vl/modeling_qwen2_5_vl.py (get_rope_index)"]),
    "qwen3-vl-8b": (fam_qwen_vl, [M + "qwen3_vl/modeling_qwen3_vl.py"]),
    "llama4-scout": (fam_llama4, [M + "llama4/modeling_llama4.py"]),
    "mistral-large-3-675b-instruct-2512": (fam_mistral_large3, [M + "deepseek_v3/modeling_deepseek_v3.py",
                                                                M + "ministral3/modeling_ministral3.py (5.x)",
                                                                M + "pixtral/modeling_pixtral.py"]),
    "qwen2.5-7b-per-layer-rope-parameters": (fam_per_layer_type, [TF + "modeling_rope_utils.py (5.x, rope_parameters "
                                                                   "per layer type)"]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".json"):
            os.remove(os.path.join(OUT, f))
    total = 0
    for name, (fn, src) in sorted(FAMILIES.items()):
        with open(os.path.join(CONFIGS, name + ".json")) as f:
            cfg = json.load(f)
        encs = fn(cfg)
        doc = {"generator": GEN, "config": name + ".json", "model_type": cfg["model_type"], "source": src,
               "versions": {"torch": torch.__version__}, "encodings": encs}
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        total += len(encs)
        print(f"{name:40s} {cfg['model_type']:18s} " + ", ".join(f"{e['tower']}:{e['kind']}" for e in encs))
    print(f"{len(FAMILIES)} configs, {total} encodings -> {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
