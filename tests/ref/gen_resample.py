#!/usr/bin/python3
"""Known answers for resampling learned position tables (src/core/resample.c), from PyTorch.

Regenerate (from the repository root, with Debian's Python, which has numpy and torch):

    /usr/bin/python3 tests/ref/gen_resample.py

It rewrites tests/data/resample/ (layout: tests/ref/kat.py) and prints a summary; the C test
tests/core/test_resample.c and the end-to-end test tests/e2e/test_learned.c read it. Files per case:

  in_f64     the table resampled: standard normal values from a seeded generator, shape in_shape
             ([n, d], or [prefix + h*w, d] for a grid). Written here, not through Manifest.add, because
             its shape is not the case's shape.
  torch_f64  PyTorch on the float64 table: the reference the C code (float64 throughout) must match
             to a few ulps, since both use the same index and weight formulas.
  torch_f32  PyTorch on the table rounded to float32, in float32: what a model's own resampling
             gives; the issue asks for agreement within 1e-5. It can differ from torch_f64 by more
             (printed below: ~1e-4 for 512 -> 1000 rows), because PyTorch computes the source
             coordinates of a float32 table in float32.

How PyTorch is called:
  len=       F.interpolate(t.T[None], size=m, mode='linear', align_corners=False)[0].T
  grid       timm.layers.resample_abs_pos_embed (re-implemented below from timm's published code,
             timm is not packaged in Debian): prefix rows kept, the grid reshaped to [1, d, h, w],
             F.interpolate(size=(oh, ow), mode='bicubic', align_corners=False, antialias=aa).

Case fields besides the files: kind ("linear" | "grid"), n, d, m (linear), prefix, h, w, oh, ow,
antialias (grid), and query, the request a client sends to GET /v1/learned/{name}.
"""
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np
import torch
import torch.nn.functional as F

GEN = "tests/ref/gen_resample.py"

# (name, n, d, m)
LINEAR = [
    ("lin_n7_d5_m16", 7, 5, 16),
    ("lin_n7_d5_m3", 7, 5, 3),
    ("lin_n7_d5_m7", 7, 5, 7),
    ("lin_n9_d3_m1", 9, 3, 1),
    ("lin_n1_d4_m5", 1, 4, 5),
    ("lin_n512_d8_m1000", 512, 8, 1000),
    ("lin_n1000_d2_m333", 1000, 2, 333),
]

# (name, prefix, h, w, d, oh, ow, antialias)
GRID = [
    ("cub_p1_h3_w4_d5_7x9", 1, 3, 4, 5, 7, 9, 0),
    ("cub_p0_h5_w5_d3_3x2", 0, 5, 5, 3, 3, 2, 0),
    ("cub_p1_h14_w14_d8_24x24", 1, 14, 14, 8, 24, 24, 0),
    ("cub_p0_h2_w2_d2_1x1", 0, 2, 2, 2, 1, 1, 0),
    ("cub_p0_h1_w1_d3_3x3", 0, 1, 1, 3, 3, 3, 0),
    ("cub_p4_h4_w6_d4_6x4", 4, 4, 6, 4, 6, 4, 0),
    ("cub_p0_h3_w3_d2_3x3", 0, 3, 3, 2, 3, 3, 0),
    ("aa_p1_h14_w14_d8_7x7", 1, 14, 14, 8, 7, 7, 1),
    ("aa_p0_h8_w8_d3_5x3", 0, 8, 8, 3, 5, 3, 1),
    ("aa_p0_h5_w5_d3_8x8", 0, 5, 5, 3, 8, 8, 1),
    ("aa_p2_h4_w6_d4_6x4", 2, 4, 6, 4, 6, 4, 1),
    ("aa_p0_h24_w24_d2_1x1", 0, 24, 24, 2, 1, 1, 1),
    ("aa_p1_h16_w16_d4_16x16", 1, 16, 16, 4, 16, 16, 1),
    ("aa_p1_h37_w11_d2_5x29", 1, 37, 11, 2, 5, 29, 1),
]


def versions():
    return {"numpy": np.__version__, "torch": torch.__version__}


def linear_torch(t, m):
    x = torch.from_numpy(t).T[None]
    return F.interpolate(x, size=m, mode="linear", align_corners=False)[0].T.contiguous().numpy()


def resample_abs_pos_embed(posemb, new_size, old_size, num_prefix_tokens, antialias):
    """timm.layers.pos_embed.resample_abs_pos_embed (timm 0.9-1.0) for a [1, prefix + h*w, d] table,
    without its float32 cast (posemb keeps its dtype, so the float64 reference stays float64)."""
    if num_prefix_tokens:
        posemb_prefix, posemb = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    else:
        posemb_prefix = None
    embed_dim = posemb.shape[-1]
    posemb = posemb.reshape(1, old_size[0], old_size[1], -1).permute(0, 3, 1, 2)
    posemb = F.interpolate(posemb, size=new_size, mode="bicubic", antialias=antialias, align_corners=False)
    posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)
    if posemb_prefix is not None:
        posemb = torch.cat([posemb_prefix, posemb], dim=1)
    return posemb


def grid_torch(t, prefix, h, w, oh, ow, aa):
    x = torch.from_numpy(t)[None]
    return resample_abs_pos_embed(x, (oh, ow), (h, w), prefix, bool(aa))[0].numpy()


def write_input(m, name, t):
    fname = f"{name}.in.f64.bin"
    np.ascontiguousarray(t, dtype="<f8").tofile(f"{m.dir}/{fname}")
    m.bytes += t.nbytes
    return fname


def add_case(man, name, t, out64, out32, query, **fields):
    worst = float(np.max(np.abs(out64 - out32.astype(np.float64))))
    fname = write_input(man, name, t)
    man.add(name, "learned", query, out64.shape, {"torch_f64": out64, "torch_f32": out32},
          in_f64=fname, in_shape=list(t.shape), **fields)
    print(f"resample {name}: torch f32 vs f64 max |diff| {worst:.2e}")


def main():
    torch.set_num_threads(1)
    m = kat.Manifest("resample", GEN)
    rng = np.random.default_rng(20240606)
    for name, n, d, mm in LINEAR:
        t = rng.standard_normal((n, d))
        out64 = linear_torch(t, mm)
        out32 = linear_torch(t.astype(np.float32), mm)
        add_case(m, name, t, out64, out32, f"len={mm}", kind="linear", n=n, d=d, m=mm)
    for name, prefix, h, w, d, oh, ow, aa in GRID:
        t = rng.standard_normal((prefix + h * w, d))
        out64 = grid_torch(t, prefix, h, w, oh, ow, aa)
        out32 = grid_torch(t.astype(np.float32), prefix, h, w, oh, ow, aa)
        query = f"height={oh}&width={ow}" + ("&antialias=1" if aa else "")
        add_case(m, name, t, out64, out32, query, kind="grid", prefix=prefix, h=h, w=w, d=d, oh=oh, ow=ow,
                 antialias=aa)
    total = m.save(versions())
    print(f"{total} bytes of data under {m.dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
