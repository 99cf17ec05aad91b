#!/usr/bin/python3
"""Known answers for diffusers' sin-cos grids and timestep embeddings: /v1/sinusoidal2d with
base_size / interpolation_scale / pos_embed_max_size, /v1/sinusoidal3d and /v1/sinusoidal/timestep,
from references written here from diffusers' published formulas (models/embeddings.py:
get_2d_sincos_pos_embed, get_1d_sincos_pos_embed_from_grid, get_3d_sincos_pos_embed,
PatchEmbed.cropped_pos_embed, get_timestep_embedding), independently of the C core.

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_sincos_grids.py

It rewrites tests/data/{sinusoidal2d_scaled,sinusoidal3d,timestep}/ (layout: tests/ref/kat.py);
tests/core/test_sincos_grids.c reads them. Files per case:

  ref_f64    the float64 formula in NumPy: coordinates index / (grid / base_size) / scale in
             double, frequencies 1/10000**(k/q), sin/cos (glibc's, checked); timesteps
             exp(-ln(max_period)·k/(h - shift)), scale·(t·f), sin/cos.
  torch_f32  diffusers' current arithmetic in PyTorch: the grids' float32 arange divided in
             float32, the rest in float64 (output_type="pt", CPU), copied into float32 (PatchEmbed's
             .float(), CogVideoX's float32 buffer); timesteps torch float32 throughout.

Parameter sets are the models' (SD3: base_size 64, pos_embed_max_size 192; PixArt-alpha 1024:
base_size 64, interpolation_scale 2; DiT: base_size = the grid; CogVideoX-2B: spatial scale 1.875,
dim 1920; SD/SDXL UNets' and DiTs' timestep settings), at small grids so the files stay small.
"""
import math

import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np
import torch

GEN = "tests/ref/gen_sincos_grids.py"


def versions():
    return {"numpy": np.__version__, "torch": torch.__version__}


# ---- float64 references (NumPy) ----------------------------------------------------------------

def omega64(q):
    return 1.0 / 10000.0 ** (np.arange(q, dtype=np.float64) / float(q))


def sincos_block64(pos, q):
    """[sin | cos] of pos (M,) at q frequencies: (M, 2q)."""
    ang = np.outer(np.asarray(pos, dtype=np.float64), omega64(q))
    kat.check_libm(ang)
    return np.concatenate([np.sin(ang), np.cos(ang)], axis=1)


def grid2d_64(dim, gh, gw, base_size, interp):
    """[gh*gw, dim], row-major, [column block | row block] (meshgrid puts w first). base_size None:
    each axis' own size (the quotient is 1)."""
    rows = np.arange(gh, dtype=np.float64) / (gh / (base_size or gh)) / interp
    cols = np.arange(gw, dtype=np.float64) / (gw / (base_size or gw)) / interp
    r = np.repeat(rows, gw)
    c = np.tile(cols, gh)
    return np.concatenate([sincos_block64(c, dim // 4), sincos_block64(r, dim // 4)], axis=1)


def crop(table, m, h, w):
    top, left = (m - h) // 2, (m - w) // 2
    return table.reshape(m, m, -1)[top:top + h, left:left + w, :].reshape(h * w, -1)


def grid3d_64(dim, t, h, w, ss, ts):
    rows = np.arange(h, dtype=np.float64) / ss
    cols = np.arange(w, dtype=np.float64) / ss
    qs = 3 * dim // 16
    sp = np.concatenate([sincos_block64(np.tile(cols, h), qs), sincos_block64(np.repeat(rows, w), qs)], axis=1)
    tm = sincos_block64(np.arange(t, dtype=np.float64) / ts, dim // 8)
    out = np.empty((t, h * w, dim))
    out[:, :, :dim // 4] = tm[:, None, :]
    out[:, :, dim // 4:] = sp[None, :, :]
    return out


def timestep64(ts, dim, flip, shift, scale, period):
    h = dim // 2
    f = np.exp(-math.log(period) * np.arange(h, dtype=np.float64) / (h - shift))
    ang = scale * (np.asarray(ts, dtype=np.float64)[:, None] * f[None, :])
    kat.check_libm(ang)
    s, c = np.sin(ang), np.cos(ang)
    out = np.concatenate([c, s] if flip else [s, c], axis=1)
    if dim % 2:
        out = np.concatenate([out, np.zeros((len(ts), 1))], axis=1)
    return out


# ---- diffusers' arithmetic (PyTorch) -----------------------------------------------------------

def sincos_block_torch(pos, q):
    """get_1d_sincos_pos_embed_from_grid(2q, pos) on the CPU: float64 frequencies and products."""
    om = torch.arange(q, dtype=torch.float64)
    om /= (2 * q) / 2.0
    om = 1.0 / 10000 ** om
    ang = torch.outer(pos.reshape(-1), om)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)


def grid2d_torch(dim, gh, gw, base_size, interp):
    rows = torch.arange(gh, dtype=torch.float32) / (gh / base_size) / interp
    cols = torch.arange(gw, dtype=torch.float32) / (gw / base_size) / interp
    g = torch.stack(torch.meshgrid(cols, rows, indexing="xy"), dim=0)  # [2, gh, gw]: w first
    return torch.cat([sincos_block_torch(g[0], dim // 4), sincos_block_torch(g[1], dim // 4)], dim=1).float()


def grid3d_torch(dim, t, h, w, ss, ts):
    rows = torch.arange(h, dtype=torch.float32) / ss
    cols = torch.arange(w, dtype=torch.float32) / ss
    g = torch.stack(torch.meshgrid(cols, rows, indexing="xy"), dim=0)
    qs = 3 * dim // 16
    sp = torch.cat([sincos_block_torch(g[0], qs), sincos_block_torch(g[1], qs)], dim=1)
    tm = sincos_block_torch(torch.arange(t, dtype=torch.float32) / ts, dim // 8)
    sp = sp[None].repeat_interleave(t, dim=0)
    tm = tm[:, None, :].repeat_interleave(h * w, dim=1)
    buf = torch.zeros(t, h * w, dim, dtype=torch.float32)
    buf.copy_(torch.cat([tm, sp], dim=-1))
    return buf


def timestep_torch(ts, dim, flip, shift, scale, period):
    h = dim // 2
    e = -math.log(period) * torch.arange(0, h, dtype=torch.float32)
    e = e / (h - shift)
    f = torch.exp(e)
    ang = torch.tensor(ts, dtype=torch.float64)[:, None].float() * f[None, :]
    ang = scale * ang
    emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)
    if flip:
        emb = torch.cat([emb[:, h:], emb[:, :h]], dim=-1)
    if dim % 2:
        emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
    return emb


# ---- cases -------------------------------------------------------------------------------------

def q2d(h, w, d, bs, isc, m):
    q = f"height={h}&width={w}&dim={d}"
    q += f"&base_size={bs}" if bs is not None else ""
    q += f"&interpolation_scale={isc}" if isc is not None else ""
    q += f"&pos_embed_max_size={m}" if m is not None else ""
    return q


def cases2d(man):
    # name, height, width, dim, base_size, interpolation_scale, pos_embed_max_size
    rows = [
        ("sd3_h64_w64_d16", 64, 64, 16, 64, None, 192),
        ("sd3_h40_w24_d32", 40, 24, 32, 64, None, 192),
        ("sd3_h4_w6_d1536", 4, 6, 1536, 64, 1, 192),
        ("pixart1024_h32_w32_d16", 32, 32, 16, 64, 2, None),
        ("pixart1024_h24_w40_d32", 24, 40, 32, 64, 2, None),
        ("pixart512_h4_w6_d1152", 4, 6, 1152, 32, 1, None),
        ("dit_h16_w16_d72", 16, 16, 72, 16, 1, None),
        ("dit_h8_w12_d72", 8, 12, 72, 16, 1, None),
        ("interp_only_h9_w5_d16", 9, 5, 16, None, 0.75, None),
    ]
    for name, h, w, d, bs, isc, m in rows:
        gh, gw = (m, m) if m else (h, w)
        ref = grid2d_64(d, gh, gw, bs, isc or 1.0)
        tor = grid2d_torch(d, gh, gw, bs, isc or 1.0).numpy() if bs is not None else None
        if m:
            ref = crop(ref, m, h, w)
            tor = crop(tor, m, h, w)
        q = q2d(h, w, d, bs, isc, m)
        files = {"ref_f64": ref}
        if tor is not None:
            files["torch_f32"] = tor
        man.add(name, "sinusoidal2d", q, (h * w, d), files, hf_query=q + "&compat=hf")


def cases3d(man):
    # name, frames, height, width, dim, spatial scale, temporal scale
    rows = [
        ("cogvideox2b_t4_h6_w10_d64", 4, 6, 10, 64, 1.875, 1.0),
        ("cogvideox2b_t2_h2_w3_d1920", 2, 2, 3, 1920, 1.875, 1.0),
        ("cogvideox2b_t13_h3_w5_d16", 13, 3, 5, 16, 1.875, 1.0),
        ("latte_t16_h4_w4_d32", 16, 4, 4, 32, 1.0, 1.0),
        ("scaled_t5_h3_w7_d48", 5, 3, 7, 48, 0.7, 3.0),
    ]
    for name, t, h, w, d, ss, ts in rows:
        q = f"frames={t}&height={h}&width={w}&dim={d}"
        q += f"&spatial_interpolation_scale={ss}" if ss != 1.0 else ""
        q += f"&temporal_interpolation_scale={ts}" if ts != 1.0 else ""
        man.add(name, "sinusoidal3d", q, (t, h * w, d),
                {"ref_f64": grid3d_64(d, t, h, w, ss, ts), "torch_f32": grid3d_torch(d, t, h, w, ss, ts).numpy()},
                hf_query=q + "&compat=hf")


def casests(man):
    # name, timesteps, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period
    frac = [0, 250.5, 999, 1, 500.25, 0.001, 998.75, 37.3]
    rows = [
        ("sd_unet_d320", frac, 320, 1, 0, 1, 10000),
        ("sd3_d256", [0, 1.5, 28.571428, 1000, 999.999], 256, 1, 0, 1, 10000),
        ("dit_d256_shift1", list(range(0, 1000, 37)) + [999], 256, 1, 1, 1, 10000),
        ("flux_d256_scale1000", [0.0, 0.25, 0.5, 0.999, 1.0], 256, 1, 0, 1000, 10000),
        ("odd_d33", [-3.5, 0, 7, 12345.678], 33, 0, 1, 1, 5000),
        ("odd_d7_scale", [1, 2, 3], 7, 1, 0.5, 2.5, 100),
        ("d1", [5, 6], 1, 0, 1, 1, 10000),
    ]
    for name, ts, d, flip, shift, scale, period in rows:
        q = "timesteps=" + ",".join(repr(float(x)) if not float(x).is_integer() else str(int(x)) for x in ts)
        q += f"&dim={d}&flip_sin_to_cos={flip}&downscale_freq_shift={shift}&scale={scale}&max_period={period}"
        man.add(name, "sinusoidal/timestep", q, (len(ts), d),
                {"ref_f64": timestep64(ts, d, flip, shift, scale, period),
                 "torch_f32": timestep_torch(ts, d, flip, shift, scale, period).numpy()},
                hf_query=q + "&compat=hf", timesteps=[float(x) for x in ts])


def main():
    total = 0
    for sub, fill in (("sinusoidal2d_scaled", cases2d), ("sinusoidal3d", cases3d), ("timestep", casests)):
        man = kat.Manifest(sub, GEN)
        fill(man)
        total += man.save(versions())
        print(f"{sub}: {len(man.cases)} cases")
    print(f"{total} bytes; torch {torch.__version__}")


if __name__ == "__main__":
    main()
