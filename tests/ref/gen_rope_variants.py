#!/usr/bin/python3
"""Known answers for Llama 4's RoPE (/v1/rope with scaling=llama3 and low_freq_factor ==
high_freq_factor) and the vision 2-D variants of /v1/rope2d (variant=qwen2vl with
spatial_merge_size, pixtral, llama4, gemma4), from references written here from the models' published
constructions (transformers' modeling_llama4.py, modeling_pixtral.py, modeling_qwen2_vl.py,
modeling_gemma4.py and modeling_rope_utils.py; llama.cpp's convert_hf_to_gguf.py for compat=ggml), independently of the C
core. Layout and conventions: tests/ref/kat.py.

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_rope_variants.py

It rewrites tests/data/rope_variants/; tests/core/test_rope_variants.c and
tests/e2e/test_rope_variants_http.c read it. Files per case:

  ref_f64    float64: the formulas in Python floats / NumPy with glibc's pow, sin, cos (compat=exact's
             definition). Llama 4 text: transformers' llama3 frequencies (gen_rope.inv_freq_f64; with
             low == high the smoothing branch is never taken), angle p*w. rope2d: the angles each model
             forms, in float64, in the model's patch order.
  mp_f64     (some cases) sin/cos of the same float64 angles in mpmath, rounded once.
  torch_f32  PyTorch float32 as the model code builds it (torch.set_num_threads(1)):
             Llama 4 text: _compute_llama3_parameters on torch tensors, then Llama4TextRotaryEmbedding's
             forward (inv_freq @ position_ids in float32, torch.polar) and the complex freqs_cis
             written as the interleaved table apply_rotary_emb amounts to (real part twice, imaginary
             part twice per pair; checked here by rotating a random tensor both ways).
             qwen2vl: VisionRotaryEmbedding + rot_pos_emb's spatial_merge_size windows, cat(f, f).
             pixtral: PixtralRotaryEmbedding's inv_freq table over max_patches_per_side, indexed by
             position_ids_in_meshgrid, cat(inv, inv).cos()/.sin().
             llama4: Llama4VisionRotaryEmbedding's freqs_ci for a square grid with its class token,
             as the interleaved table (checked against vision_apply_rotary_emb's complex product).
             gemma4: Gemma4VisionRotaryEmbedding (inv_freq over head_dim/2, cat(freqs, freqs) per
             axis, the column's (x) block then the row's) at row-major patch positions (x, y).
  ggml_f32   (Llama 4 text) llama.cpp's CPU rope with the converter's rope_freqs (gen_rope's emulation;
             the converter's assert on low != high is commented out "for Llama4").
"""
import math
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import gen_rope
import gen_tables
import mpmath
import numpy as np
import torch

GEN = "tests/ref/gen_rope_variants.py"

L4 = "base=500000&scaling=llama3&original_max_position_embeddings=8192&low_freq_factor=1&high_freq_factor=1"

# name, query, mpmath values, llama.cpp
ROPE_CASES = [
    ("l4_scout_inter_d128", "len=32&dim=128&layout=interleaved&factor=16&" + L4, True, True),
    ("l4_inter_d128_off1e6", "len=24&dim=128&layout=interleaved&factor=8&offset=1000000&" + L4, False, True),
    ("l4_half_d64_lohi2", "len=32&dim=64&base=10000&scaling=llama3&factor=8&original_max_position_embeddings=4096"
     "&low_freq_factor=2&high_freq_factor=2&offset=100", False, True),
]
INV_FREQ_CASES = [
    ("inv_l4_d128", "dim=128&factor=16&" + L4, True),
    ("inv_l4_d96_lohi3", "dim=96&base=500000&scaling=llama3&factor=8&original_max_position_embeddings=8192"
     "&low_freq_factor=3&high_freq_factor=3", True),
]

ROPE2D_DEFAULTS = {"base": "10000", "variant": "qwen2vl", "spatial_merge_size": "1"}

# name, query, mpmath values
ROPE2D_CASES = [
    ("qwen_m2_h4_w6_d16", "height=4&width=6&dim=16&variant=qwen2vl&spatial_merge_size=2", True),
    ("qwen_m2_h6_w10_d80", "height=6&width=10&dim=80&spatial_merge_size=2", False),
    ("qwen_m4_h8_w12_d32_base100", "height=8&width=12&dim=32&base=100&spatial_merge_size=4", True),
    ("qwen_m2_h520_w2_d8_base7", "height=520&width=2&dim=8&base=7&spatial_merge_size=2", False),
    ("pixtral_h4_w6_d16", "height=4&width=6&dim=16&variant=pixtral", True),
    ("pixtral_h5_w7_d64_max64", "height=5&width=7&dim=64&variant=pixtral&max_patches_per_side=64", False),
    ("pixtral_h3_w9_d40_base1e6", "height=3&width=9&dim=40&base=1e6&variant=pixtral", False),
    ("pixtral_h2_w600_d8_base3", "height=2&width=600&dim=8&base=3&variant=pixtral", False),
    ("llama4_h4_d16", "height=4&width=4&dim=16&variant=llama4", True),
    ("llama4_h8_d88", "height=8&width=8&dim=88&variant=llama4", False),
    ("llama4_h3_d8_base100", "height=3&width=3&dim=8&base=100&variant=llama4", True),
    ("gemma4_h4_w6_d16", "height=4&width=6&dim=16&variant=gemma4", True),
    ("gemma4_h5_w33_d64_base100", "height=5&width=33&dim=64&base=100&variant=gemma4", False),
    ("gemma4_h3_w5_d8_base100", "height=3&width=5&dim=8&base=100&variant=gemma4", True),
]


def versions():
    return {"numpy": np.__version__, "mpmath": mpmath.__version__, "torch": torch.__version__}


def mp_sincos(ang):
    return kat.mp_round(mpmath.sin, ang), kat.mp_round(mpmath.cos, ang)


# ---- Llama 4 text --------------------------------------------------------------------------------

def rotate_every_two(x):
    """The real form of multiplying adjacent pairs (x0 + i x1) by cos + i sin: (-x1, x0) per pair."""
    y = torch.empty_like(x)
    y[..., 0::2] = -x[..., 1::2]
    y[..., 1::2] = x[..., 0::2]
    return y


def check_complex_is_interleaved(freqs_cis, cos, sin):
    """HF's view_as_complex product equals x*cos + rotate_every_two(x)*sin with the interleaved table."""
    gen = torch.Generator().manual_seed(17)
    x = torch.randn(*cos.shape, generator=gen)
    via_complex = torch.view_as_real(torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * freqs_cis).flatten(-2)
    via_table = x * cos + rotate_every_two(x) * sin
    assert torch.allclose(via_complex, via_table, rtol=0, atol=4e-7), (via_complex - via_table).abs().max()


def llama4_text_torch(c):
    """Llama4TextRotaryEmbedding: llama3 inv_freq (transformers' code on torch), freqs = inv_freq @
    positions in float32, freqs_cis = polar(1, freqs) * attention_scaling; as [2, len, dim]."""
    inv_freq = gen_rope.hf_inv_freq(c)
    position_ids = torch.arange(c.offset, c.offset + c.len, dtype=torch.int64)[None, :]
    inv_freq_expanded = inv_freq[None, :, None].float().expand(1, -1, 1)
    freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * gen_rope.attention_scaling(c)
    freqs_cis = freqs_cis[0]
    cos = torch.view_as_real(freqs_cis)[..., 0].repeat_interleave(2, dim=-1)
    sin = torch.view_as_real(freqs_cis)[..., 1].repeat_interleave(2, dim=-1)
    check_complex_is_interleaved(freqs_cis, cos, sin)
    out = torch.stack([cos, sin])
    assert out.dtype == torch.float32
    return out.numpy()


def add_rope(m, name, query, want_mp, ggml):
    c = gen_rope.Cfg(query, "rope")
    assert c.low == c.high
    ref, ang = gen_rope.rope_f64(c)
    torch_ref = llama4_text_torch(c) if c.layout == "interleaved" else gen_rope.rope_torch(c)
    files = {"ref_f64": ref, "torch_f32": torch_ref}
    extra = {"hf_query": query + "&compat=hf", "attention_scaling": gen_rope.attention_scaling(c)}
    if want_mp:
        files["mp_f64"] = gen_rope.rope_mp(c, ang)
    if ggml:
        files["ggml_f32"] = gen_rope.rope_ggml(c)
        extra["ggml_query"] = query + "&compat=ggml"
    m.add(name, "rope", query, (2, c.len, c.dim), files, **extra)


def add_inv_freq(m, name, query, ggml):
    c = gen_rope.Cfg(query, "rope/inv_freq")
    files = {"ref_f64": gen_rope.inv_freq_f64(c), "torch_f32": gen_rope.hf_inv_freq(c).numpy()}
    # the step itself: every frequency is kept or divided by factor, and both kinds occur
    base = gen_rope.inv_freq_f64(gen_rope.Cfg(f"dim={c.dim}&base={c.base!r}", "rope/inv_freq"))
    kept = files["ref_f64"] == base
    assert kept.any() and (~kept).any() and np.array_equal(files["ref_f64"][~kept], base[~kept] / c.factor)
    extra = {"hf_query": query + "&compat=hf", "attention_scaling": 1.0}
    if ggml:
        files["ggml_f32"] = gen_rope.ggml_angles(c, np.array([1], dtype=np.int64))[0]
        extra["ggml_query"] = query + "&compat=ggml"
    m.add(name, "rope/inv_freq", query, (c.h,), files, **extra)


# ---- rope2d: patch orders and angles ---------------------------------------------------------------

def merge_order(h, w, m):
    """(row, col) of each patch in Qwen2-VL's spatial-merge order."""
    return [(bh * m + i, bw * m + j) for bh in range(h // m) for bw in range(w // m) for i in range(m) for j in range(m)]


def angles_f64(variant, h, w, dim, base, merge):
    """[rows, dim] float64 angles in the table's channel layout."""
    if variant == "qwen2vl":
        d = dim // 2
        inv = 1.0 / gen_tables.libm_pow(base, np.arange(0, d, 2, dtype=np.float64) / d)
        rows = []
        for r, c in merge_order(h, w, merge):
            f = np.concatenate([r * inv, c * inv])
            rows.append(np.concatenate([f, f]))
        return np.array(rows)
    if variant == "pixtral":
        f = 1.0 / gen_tables.libm_pow(base, np.arange(0, dim, 2, dtype=np.float64) / dim)
        rows = []
        for r in range(h):
            for c in range(w):
                a = np.concatenate([r * f[0::2], c * f[1::2]])
                rows.append(np.concatenate([a, a]))
        return np.array(rows)
    if variant == "gemma4":  # per axis half layout, column block first
        d = dim // 2
        inv = 1.0 / gen_tables.libm_pow(base, np.arange(0, d, 2, dtype=np.float64) / d)
        return np.array([np.concatenate([c * inv, c * inv, r * inv, r * inv]) for r in range(h) for c in range(w)])
    d = dim // 2  # llama4: x = column + 1, y = row + 1, adjacent pairs; class token last, angle 0
    inv = 1.0 / gen_tables.libm_pow(base, np.arange(0, d, 2, dtype=np.float64) / d)
    rows = [np.repeat(np.concatenate([(c + 1) * inv, (r + 1) * inv]), 2) for r in range(h) for c in range(w)]
    rows.append(np.zeros(dim))
    return np.array(rows)


def qwen2vl_torch(h, w, dim, base, merge):
    f = gen_tables.qwen2vl_rot_pos_emb(h, w, dim, base, merge=merge)
    emb = torch.cat((f, f), dim=-1)
    return torch.stack([emb.cos(), emb.sin()])


def pixtral_torch(h, w, dim, base, max_side):
    """PixtralRotaryEmbedding's inv_freq table and forward for one image of h x w patches."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    hh, ww = torch.arange(max_side), torch.arange(max_side)
    freqs_h = torch.outer(hh, freqs[::2]).float()
    freqs_w = torch.outer(ww, freqs[1::2]).float()
    inv_freq = torch.cat([freqs_h[:, None, :].repeat(1, max_side, 1), freqs_w[None, :, :].repeat(max_side, 1, 1)],
                         dim=-1).reshape(-1, dim // 2)
    inv_freq = torch.cat((inv_freq, inv_freq), dim=-1)
    mesh = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    h_grid, v_grid = torch.stack(mesh, dim=-1).reshape(-1, 2).chunk(2, -1)
    position_ids = (h_grid * max_side + v_grid)[:, 0]
    emb = inv_freq[position_ids]
    return torch.stack([emb.cos(), emb.sin()])


def llama4_vision_torch(idx, dim, base):
    """Llama4VisionRotaryEmbedding for image_size / patch_size = idx, head_dim = dim."""
    img_idx = torch.arange(idx**2, dtype=torch.int32).reshape(idx**2, 1)
    img_idx = torch.cat([img_idx, img_idx[:1]], dim=0)
    img_idx[-1, -1] = -2  # the class token
    frequencies_x = img_idx % idx
    frequencies_y = img_idx // idx
    freq_dim = dim // 2
    rope_freq = 1.0 / (base ** (torch.arange(0, freq_dim, 2)[: (freq_dim // 2)].float() / freq_dim))
    freqs_x = ((frequencies_x + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs_y = ((frequencies_y + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs = torch.cat([freqs_x, freqs_y], dim=-1).float().contiguous()[..., ::2]
    freqs = freqs.masked_fill(img_idx.reshape(-1, 1, 1) < 0, 0)
    freqs_ci = torch.view_as_complex(torch.stack([torch.cos(freqs), torch.sin(freqs)], dim=-1))[:, 0, :]
    cos = freqs_ci.real.repeat_interleave(2, dim=-1)
    sin = freqs_ci.imag.repeat_interleave(2, dim=-1)
    check_complex_is_interleaved(freqs_ci, cos, sin)
    return torch.stack([cos, sin])


def gemma4_vision_torch(h, w, dim, base):
    """Gemma4VisionRotaryEmbedding's forward for patches (x, y) = (col, row), row-major."""
    sd = dim // 2
    inv = 1.0 / (base ** (torch.arange(0, sd, 2, dtype=torch.int64).to(dtype=torch.float) / sd))
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    pos = torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=-1)[None]  # [1, patches, 2]
    cos, sin = [], []
    for i in range(2):
        f = (inv[None, :, None].float() @ pos[:, :, i][:, None, :].float()).transpose(1, 2)
        emb = torch.cat((f, f), dim=-1)
        cos.append(emb.cos())
        sin.append(emb.sin())
    return torch.stack([torch.cat(cos, dim=-1)[0], torch.cat(sin, dim=-1)[0]])


def add_rope2d(m, name, query, want_mp):
    p = kat.parse_query(query, ROPE2D_DEFAULTS)
    h, w, dim, base = int(p["height"]), int(p["width"]), int(p["dim"]), float(p["base"])
    variant, merge = p["variant"], int(p["spatial_merge_size"])
    ang = angles_f64(variant, h, w, dim, base, merge)
    s, c = gen_tables.sincos64(ang)
    ref = np.stack([c, s])
    if variant == "qwen2vl":
        t = qwen2vl_torch(h, w, dim, base, merge)
    elif variant == "pixtral":
        t = pixtral_torch(h, w, dim, base, int(p.get("max_patches_per_side", max(h, w))))
    elif variant == "gemma4":
        t = gemma4_vision_torch(h, w, dim, base)
    else:
        t = llama4_vision_torch(h, dim, base)
    assert t.dtype == torch.float32 and tuple(t.shape) == ref.shape, (name, t.shape, ref.shape)
    files = {"ref_f64": ref, "torch_f32": t.numpy()}
    if want_mp:
        ms, mc = mp_sincos(ang)
        files["mp_f64"] = np.stack([mc, ms])
        print(f"rope2d {name}: numpy f64 vs mpmath max {kat.max_ulps_f64(ref, files['mp_f64'])} ulp")
    m.add(name, "rope2d", query, ref.shape, files, hf_query=query + "&compat=hf")


def main():
    torch.set_num_threads(1)
    m = kat.Manifest("rope_variants", GEN)
    for name, query, want_mp, ggml in ROPE_CASES:
        add_rope(m, name, query, want_mp, ggml)
    for name, query, ggml in INV_FREQ_CASES:
        add_inv_freq(m, name, query, ggml)
    for name, query, want_mp in ROPE2D_CASES:
        add_rope2d(m, name, query, want_mp)
    # Qwen2-VL's merged order is a permutation of the row-major rows
    plain, merged = qwen2vl_torch(4, 6, 16, 10000.0, 1), qwen2vl_torch(4, 6, 16, 10000.0, 2)
    assert sorted(map(tuple, merged[0].tolist())) == sorted(map(tuple, plain[0].tolist()))
    total = m.save(versions())
    print(f"{len(m.cases)} cases, {total} bytes in {m.dir}", file=sys.stderr)
    assert total <= 2 << 20, "keep the committed data small"


if __name__ == "__main__":
    main()
