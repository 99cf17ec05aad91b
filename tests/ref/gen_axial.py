#!/usr/bin/python3
"""Known answers for /v1/rope/axial/positions and /v1/rope/axial (axial RoPE of image and video
diffusion transformers), written here from the formulas in Hugging Face diffusers (layout and
conventions: tests/ref/kat.py).

Regenerate (from the repository root, with Debian's Python, which has numpy and torch):

    /usr/bin/python3 tests/ref/gen_axial.py

It rewrites tests/data/axial/; tests/core/test_axial.c and tests/e2e/test_axial_http.c read it.
Per case:

  rope/axial/positions  ref_f64 [S, 3]: the position ids in float64 (CogVideoX: np.linspace over
             the crop region); torch_f32 (hf_query): the ids as the model's torch code builds them
             (FLUX's text_ids / _prepare_latent_image_ids, HunyuanVideo's meshgrid of aranges, Wan's
             and Qwen-Image's slices of per-axis tables, CogVideoX's float32 torch.linspace).
  rope/axial  ref_f64 [2, S, sum(axes_dim)]: float64 from the formulas: frequencies
             1 / theta ** (arange(0, d, 2) / d) per axis, angles id * frequency, cos / sin, each
             value twice in a row (layout=interleaved) or the band's values then again (half).
             torch_f32: the model's own module re-done in PyTorch (float64 frequencies for FLUX
             and Wan, float32 for HunyuanVideo, CogVideoX, Qwen-Image's complex polar).
             Cases of table "rope/axial POST" are the POST form: the table of their "ids" (ids_f64 in
             the body); torch_f32 with float64 frequencies, torchf32freq_f32 with float32 ones.
"""
import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np
import torch

GEN = "tests/ref/gen_axial.py"
PRESETS = {  # axes_dim, theta
    "flux": ((16, 56, 56), 10000.0),
    "hunyuanvideo": ((16, 56, 56), 256.0),
    "wan": ((44, 42, 42), 10000.0),
    "cogvideox": ((16, 24, 24), 10000.0),
    "qwenimage": ((16, 56, 56), 10000.0),
}


def grid_of(text):
    s = [int(x) for x in text.split("x")]
    return (1, s[0], s[1]) if len(s) == 2 else tuple(s)


def crop_region(h, w, tw, th):
    """CogVideoX's get_resize_crop_region_for_grid (Python's round: half to even)."""
    if h / w > th / tw:
        rh, rw = th, int(round(th / h * w))
    else:
        rw, rh = tw, int(round(tw / w * h))
    top, left = int(round((th - rh) / 2.0)), int(round((tw - rw) / 2.0))
    return (top, left), (top + rh, left + rw)


def positions_f64(preset, q):
    t, h, w = grid_of(q["grid"])
    text = int(q.get("text_tokens", 0))
    f, r, c = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    img = np.stack([f.ravel(), r.ravel(), c.ravel()], axis=1).astype(np.float64)
    if preset == "flux":
        img[:, 0] = 0
        return np.concatenate([np.zeros((text, 3)), img])
    if preset == "cogvideox":
        (top, left), (bottom, right) = crop_region(h, w, int(q.get("base_width", 45)), int(q.get("base_height", 30)))
        gh = np.linspace(top, bottom * (h - 1) / h, h)
        gw = np.linspace(left, right * (w - 1) / w, w)
        img[:, 1] = gh[r.ravel()]
        img[:, 2] = gw[c.ravel()]
    if preset == "qwenimage":
        scale = q.get("scale_rope", "1") == "1"
        if scale:
            img[:, 1] -= h - h // 2
            img[:, 2] -= w - w // 2
        m = max(h // 2, w // 2) if scale else max(h, w)
        txt = np.repeat((m + np.arange(text, dtype=np.float64))[:, None], 3, axis=1)
        return np.concatenate([txt, img])
    return img


def table_f64(ids, axes_dim, theta, layout):
    cos, sin = [], []
    for a, d in enumerate(axes_dim):
        freqs = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.outer(ids[:, a], freqs)
        kat.check_libm(ang)
        for out, fn in ((cos, np.cos), (sin, np.sin)):
            v = fn(ang)
            out.append(np.repeat(v, 2, axis=1) if layout == "interleaved" else np.concatenate([v, v], axis=1))
    return np.stack([np.concatenate(cos, axis=1), np.concatenate(sin, axis=1)])


# ---- the models' torch code, re-done ----

def torch_1d(d, pos, theta, freqs_dtype, layout="interleaved"):
    """diffusers' get_1d_rotary_pos_embed(use_real=True) for one axis."""
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=freqs_dtype)[: d // 2] / d))
    freqs = torch.outer(pos, freqs)
    if layout == "interleaved":
        return freqs.cos().repeat_interleave(2, dim=1).float(), freqs.sin().repeat_interleave(2, dim=1).float()
    return torch.cat([freqs.cos(), freqs.cos()], -1).float(), torch.cat([freqs.sin(), freqs.sin()], -1).float()


def torch_positions(preset, q):
    t, h, w = grid_of(q["grid"])
    text = int(q.get("text_tokens", 0))
    if preset == "flux":
        img = torch.zeros(h, w, 3)
        img[..., 1] = img[..., 1] + torch.arange(h)[:, None]
        img[..., 2] = img[..., 2] + torch.arange(w)[None, :]
        return torch.cat([torch.zeros(text, 3), img.reshape(h * w, 3)])
    if preset == "cogvideox":
        (top, left), (bottom, right) = crop_region(h, w, int(q.get("base_width", 45)), int(q.get("base_height", 30)))
        gh = torch.linspace(top, bottom * (h - 1) / h, h, dtype=torch.float32)
        gw = torch.linspace(left, right * (w - 1) / w, w, dtype=torch.float32)
        gt = torch.linspace(0, t * (t - 1) / t, t, dtype=torch.float32)
        g = torch.meshgrid(gt, gh, gw, indexing="ij")
        return torch.stack([x.reshape(-1) for x in g], dim=1)
    if preset == "qwenimage":
        scale = q.get("scale_rope", "1") == "1"
        pos_index = torch.arange(4096)
        neg_index = torch.arange(4096).flip(0) * -1 - 1
        rows = torch.cat([neg_index[-(h - h // 2):], pos_index[: h // 2]]) if scale else pos_index[:h]
        cols = torch.cat([neg_index[-(w - w // 2):], pos_index[: w // 2]]) if scale else pos_index[:w]
        g = torch.meshgrid(pos_index[:t], rows, cols, indexing="ij")
        img = torch.stack([x.reshape(-1) for x in g], dim=1).float()
        m = max(h // 2, w // 2) if scale else max(h, w)
        txt = pos_index[m:m + text].float()[:, None].repeat(1, 3)
        return torch.cat([txt, img])
    g = torch.meshgrid(*[torch.arange(n, dtype=torch.float32) for n in (t, h, w)], indexing="ij")
    return torch.stack([x.reshape(-1) for x in g], dim=1)


def axes_of(q):
    """The case's axes_dim and theta: the query's, else the preset's."""
    axes_dim, theta = PRESETS[q["preset"]]
    if "axes_dim" in q:
        axes_dim = tuple(int(x) for x in q["axes_dim"].split(","))
    return axes_dim, float(q.get("theta", theta))


def torch_table(preset, q):
    axes_dim, theta = axes_of(q)
    t, h, w = grid_of(q["grid"])
    if preset == "wan":  # WanRotaryPosEmbed: per-axis tables over arange(max_seq_len), float64 frequencies
        tabs = [torch_1d(d, torch.arange(1024), theta, torch.float64) for d in axes_dim]
        idx = torch_positions(preset, q).long()
        cos = torch.cat([tabs[a][0][idx[:, a]] for a in range(3)], dim=1)
        sin = torch.cat([tabs[a][1][idx[:, a]] for a in range(3)], dim=1)
        return torch.stack([cos, sin])
    if preset == "qwenimage":  # QwenEmbedRope.rope_params: float32 angles, complex64 polar
        ids = torch_positions(preset, q).long()
        cos, sin = [], []
        for a, d in enumerate(axes_dim):
            freqs = torch.outer(ids[:, a], 1.0 / torch.pow(int(theta), torch.arange(0, d, 2).to(torch.float32).div(d)))
            cis = torch.polar(torch.ones_like(freqs), freqs)
            cos.append(cis.real.repeat_interleave(2, dim=1))
            sin.append(cis.imag.repeat_interleave(2, dim=1))
        return torch.stack([torch.cat(cos, 1), torch.cat(sin, 1)])
    pos = torch_positions(preset, q)
    fd = torch.float64 if preset == "flux" else torch.float32
    th = int(theta) if preset == "cogvideox" else theta
    parts = [torch_1d(d, pos[:, a], th, fd) for a, d in enumerate(axes_dim)]
    return torch.stack([torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1)])


def query_dict(query):
    return dict(kv.split("=", 1) for kv in query.split("&"))


POSITION_CASES = [
    ("pos_flux_6x9_t4", "preset=flux&grid=6x9&text_tokens=4"),
    ("pos_flux_5x3", "preset=flux&grid=5x3"),
    ("pos_hunyuanvideo_2x4x6", "preset=hunyuanvideo&grid=2x4x6"),
    ("pos_hunyuanvideo_3x3x5", "preset=hunyuanvideo&grid=3x3x5"),
    ("pos_wan_2x4x6", "preset=wan&grid=2x4x6"),
    ("pos_wan_5x7", "preset=wan&grid=5x7"),
    ("pos_cogvideox_2x20x30", "preset=cogvideox&grid=2x20x30"),
    ("pos_cogvideox_1x17x40", "preset=cogvideox&grid=1x17x40"),
    ("pos_cogvideox_2x30x45", "preset=cogvideox&grid=2x30x45"),
    ("pos_cogvideox_base", "preset=cogvideox&grid=3x19x21&base_width=33&base_height=18"),
    ("pos_qwenimage_6x8_t3", "preset=qwenimage&grid=6x8&text_tokens=3"),
    ("pos_qwenimage_2x5x7_noscale", "preset=qwenimage&grid=2x5x7&text_tokens=2&scale_rope=0"),
    # steps that are not integers: torch.linspace's fused block starts (7 of 34 rows 1 ulp apart unfused)
    ("pos_cogvideox_13x34x11", "preset=cogvideox&grid=13x34x11"),
    ("pos_cogvideox_1x40x50", "preset=cogvideox&grid=1x40x50"),
]

TABLE_CASES = [
    ("flux_6x9_t4", "preset=flux&grid=6x9&text_tokens=4"),
    ("flux_5x3", "preset=flux&grid=5x3"),
    ("hunyuanvideo_2x3x4", "preset=hunyuanvideo&grid=2x3x4"),
    ("hunyuanvideo_3x3x5", "preset=hunyuanvideo&grid=3x3x5"),
    ("wan_2x4x6", "preset=wan&grid=2x4x6"),
    ("wan_5x7", "preset=wan&grid=5x7"),
    ("cogvideox_2x5x7", "preset=cogvideox&grid=2x5x7&base_width=9&base_height=6"),
    ("cogvideox_1x20x6", "preset=cogvideox&grid=1x20x6"),
    ("qwenimage_6x8_t3", "preset=qwenimage&grid=6x8&text_tokens=3"),
    ("qwenimage_1x5x7_noscale", "preset=qwenimage&grid=1x5x7&text_tokens=2&scale_rope=0"),
    # narrow bands over more than one block of tokens: PyTorch's groups of 8 lanes span 8 tokens
    ("hunyuanvideo_3x20x20_narrow", "preset=hunyuanvideo&grid=3x20x20&axes_dim=2,4,2"),
    ("cogvideox_2x24x30_narrow", "preset=cogvideox&grid=2x24x30&axes_dim=2,4,6"),
    # linspace ids off the integers (a fused multiply-add in torch's kernel), and torch.polar's
    # libm cos/sin (about 1 element in 250 differs from the correctly rounded one)
    ("cogvideox_1x34x11", "preset=cogvideox&grid=1x34x11"),
    ("qwenimage_1x18x31_t64", "preset=qwenimage&grid=1x18x31&text_tokens=64"),
]

HALF_CASES = [("flux_5x3_half", "preset=flux&grid=5x3&layout=half")]

# The POST form: ids (fractional, negative) with their own axes_dim and theta.
IDS_CASES = [
    ("ids_4axes", "axes_dim=8,12,6,4&theta=100", 4),
    ("ids_flux_fractional", "preset=flux", 3),
]


def write_npy(name, arr):
    np.save(f"{kat.DATA}/axial/{name}.npy", arr)


def apply_case(rng):
    """rope/apply with axes_dim: x [1, 2, S, 128] rotated by FLUX ids (fractional, negative), as
    diffusers' apply_rotary_emb(use_real_unbind_dim=-1); ref in float64 from the formulas, torch
    the float32 module (FluxPosEmbed's cos/sin, then x*cos + rotate(x)*sin)."""
    s, axes, theta = 9, (16, 56, 56), 10000.0
    x = rng.standard_normal((1, 2, s, 128)).astype(np.float32)
    ids = (np.round(rng.uniform(-40, 40, size=(s, 3)) * 2) / 2).astype(np.float32)
    cs = table_f64(ids.astype(np.float64), axes, theta, "interleaved")
    xd = x.astype(np.float64)
    rot = np.stack([-xd[..., 1::2], xd[..., 0::2]], axis=-1).reshape(xd.shape)
    ref = xd * cs[0] + rot * cs[1]
    pos = torch.from_numpy(ids)
    parts = [torch_1d(d, pos[:, a], theta, torch.float64) for a, d in enumerate(axes)]
    cos, sin = torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1)
    xt = torch.from_numpy(x)
    xr, xi = xt.reshape(*xt.shape[:-1], -1, 2).unbind(-1)
    rt = torch.stack([-xi, xr], dim=-1).flatten(3)
    out = (xt.float() * cos[None, None] + rt.float() * sin[None, None]).numpy()
    for tag, arr in (("x", x), ("pos", ids), ("ref", ref), ("torch", out)):
        write_npy(f"apply_flux.{tag}", arr)


def main():
    m = kat.Manifest("axial", GEN)
    for name, query in POSITION_CASES:
        q = query_dict(query)
        ref = positions_f64(q["preset"], q)
        tp = torch_positions(q["preset"], q).numpy()
        m.add(name, "rope/axial/positions", query, ref.shape, {"ref_f64": ref, "torch_f32": tp},
              hf_query=query + "&compat=hf")
    for name, query in TABLE_CASES + HALF_CASES:
        q = query_dict(query)
        axes_dim, theta = axes_of(q)
        ids = positions_f64(q["preset"], q)
        ref = table_f64(ids, axes_dim, theta, q.get("layout", "interleaved"))
        files = {"ref_f64": ref}
        extra = {}
        if "layout" not in q:
            files["torch_f32"] = torch_table(q["preset"], q).numpy()
            extra["hf_query"] = query + "&compat=hf"
        m.add(name, "rope/axial", query, ref.shape, files, **extra)
    rng = np.random.default_rng(35)
    for name, query, naxes in IDS_CASES:
        q = query_dict(query)
        axes_dim, theta = PRESETS["flux"] if "preset" in q else (
            tuple(int(x) for x in q["axes_dim"].split(",")), float(q["theta"]))
        ids = np.round(rng.uniform(-300, 300, size=(23, naxes)) * 4) / 4  # quarters: exact in float32
        ids[0] = 0
        ids[1, 0] = 1e6
        ref = table_f64(ids, axes_dim, theta, "interleaved")
        f64 = [torch_1d(d, torch.from_numpy(ids[:, a]).float(), theta, torch.float64) for a, d in enumerate(axes_dim)]
        f32 = [torch_1d(d, torch.from_numpy(ids[:, a]).float(), theta, torch.float32) for a, d in enumerate(axes_dim)]
        both = {k: torch.stack([torch.cat([p[0] for p in v], 1), torch.cat([p[1] for p in v], 1)]).numpy()
                for k, v in (("torch_f32", f64), ("torchf32freq_f32", f32))}
        m.add(name, "rope/axial POST", query, ref.shape, {"ref_f64": ref, **both}, ids=ids.tolist(),
              hf_query=query + "&compat=hf&freqs_dtype=f64", hf32_query=query + "&compat=hf&freqs_dtype=f32")
    apply_case(rng)
    n = m.save({"numpy": np.__version__, "torch": torch.__version__})
    print(f"{GEN}: {len(m.cases)} cases, {n} bytes")


if __name__ == "__main__":
    main()
