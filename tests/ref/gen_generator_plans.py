#!/usr/bin/python3
"""Known answers for POST /v1/plan?height&width&frames on diffusion transformers: for each diffusers
transformer config under tests/data/configs/diffusers/ and two output sizes, the parameters of the
positional encoding and of the timestep embedding that diffusers' code would use, and the latent
geometry. Output: tests/data/generator_plans/plans.json, a list of cases
{"config", "height", "width", "frames" (null for images), "generator": {...}, "encodings": [{"kind",
"params": {...}}]}; the test compares each listed parameter with the plan's (numbers as numbers,
axes_dim as a list) and fetches every url.

Regenerate (from the repository root, plain Python 3, no packages):

    /usr/bin/python3 tests/ref/gen_generator_plans.py

Each rule is written from a reading of diffusers (models/transformers/transformer_flux.py,
transformer_sd3.py, pixart_transformer_2d.py, dit_transformer_2d.py, transformer_hunyuan_video.py,
transformer_wan.py, cogvideox_transformer_3d.py, transformer_qwenimage.py, models/embeddings.py
PatchEmbed / CogVideoXPatchEmbed / Timesteps, and each pipeline's prepare_latents / rotary code):
- latents are pixels // 8 (every VAE here); video latents have (frames - 1) // 4 + 1 frames;
- FLUX and Qwen-Image pack 2x2 latents into one token (FluxPipeline._pack_latents, the image ids
  of height // 16 x width // 16); the others patch by the config's patch_size (Wan: [t, h, w]);
- FluxPosEmbed theta 10000 with axes_dims_rope; HunyuanVideo rope_axes_dim and rope_theta;
  Wan splits attention_head_dim d as d - 4 (d // 6), 2 (d // 6), 2 (d // 6); CogVideoX's
  get_3d_rotary_pos_embed d // 4, d // 8 * 3, d // 8 * 3 with the crop's base grid
  sample_width // patch_size x sample_height // patch_size;
- PatchEmbed's base_size is sample_size // patch_size, interpolation_scale 1, PixArt's the config's
  else max(sample_size // 64, 1); SD3 computes on pos_embed_max_size and crops;
- CogVideoX-2B's 3-D sin-cos has inner_dim channels and the config's interpolation scales;
- Timesteps: 256 channels, flip_sin_to_cos True, shift 0 (DiT's CombinedTimestepLabelEmbeddings:
  shift 1; Wan: freq_dim; CogVideoX: inner_dim and the config's flip_sin_to_cos / freq_shift;
  Qwen-Image: scale 1000).
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
CONFIGS = os.path.join(ROOT, "configs", "diffusers")
OUT = os.path.join(ROOT, "generator_plans")

SIZES = {  # two sizes per model: the model's usual one and a non-square one
    "FLUX.1-dev.json": [(1024, 1024, None), (768, 1360, None)],
    "stable-diffusion-3.5-medium.json": [(1024, 1024, None), (1440, 512, None)],
    "PixArt-Sigma-XL-2-1024-MS.json": [(1024, 1024, None), (512, 768, None)],
    "DiT-XL-2-256.json": [(256, 256, None), (512, 256, None)],
    "HunyuanVideo.json": [(720, 1280, 129), (544, 960, 61)],
    "Wan2.1-T2V-1.3B.json": [(480, 832, 81), (720, 1280, 33)],
    "CogVideoX-5b.json": [(480, 720, 49), (768, 1360, 85)],
    "CogVideoX-2b.json": [(480, 720, 49), (320, 480, 17)],
    "Qwen-Image.json": [(1328, 1328, None), (928, 1664, None)],
}


def plan(cfg, h, w, f):
    cls = cfg["_class_name"]
    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
    inner = heads * hd
    ps = cfg["patch_size"]
    pt = 1
    if isinstance(ps, list):
        pt, ps = ps[0], ps[1]
    elif cfg.get("patch_size_t"):
        pt = cfg["patch_size_t"]
    packing, patch = 1, ps
    if cls == "FluxTransformer2DModel":
        packing = 2
    if cls == "QwenImageTransformer2DModel":
        packing, patch = ps, 1
    lh, lw = h // 8, w // 8
    gh, gw = lh // packing // patch, lw // packing // patch
    gen = {"vae_scale_factor": 8, "patch_size": patch, "packing": packing,
           "latent": {"height": lh, "width": lw}, "tokens": {"height": gh, "width": gw}}
    video = f is not None
    lt = gt = 1
    if video:
        lt = (f - 1) // 4 + 1
        gt = lt // pt
        gen.update({"frames": f, "vae_temporal_scale_factor": 4, "patch_size_t": pt})
        gen["latent"]["frames"] = lt
        gen["tokens"]["frames"] = gt
    gen["tokens"]["count"] = gt * gh * gw
    grid = f"{gt}x{gh}x{gw}" if video else f"{gh}x{gw}"
    enc = []
    ts = {"dim": 256, "flip_sin_to_cos": 1, "downscale_freq_shift": 0, "scale": 1}
    if cls == "FluxTransformer2DModel":
        gen["text_tokens"] = 512
        enc.append({"kind": "rope_axial", "params": {"preset": "flux", "grid": grid, "text_tokens": 512,
                                                      "axes_dim": cfg["axes_dims_rope"], "theta": 10000}})
    elif cls == "QwenImageTransformer2DModel":
        gen["text_tokens"] = 512
        enc.append({"kind": "rope_axial", "params": {"preset": "qwenimage", "grid": grid, "text_tokens": 512,
                                                      "axes_dim": cfg["axes_dims_rope"], "theta": 10000}})
        ts["scale"] = 1000
    elif cls == "HunyuanVideoTransformer3DModel":
        enc.append({"kind": "rope_axial", "params": {"preset": "hunyuanvideo", "grid": grid,
                                                      "axes_dim": cfg["rope_axes_dim"], "theta": cfg["rope_theta"]}})
    elif cls == "WanTransformer3DModel":
        s = hd // 6
        enc.append({"kind": "rope_axial", "params": {"preset": "wan", "grid": grid,
                                                      "axes_dim": [hd - 4 * s, 2 * s, 2 * s], "theta": 10000}})
        ts["dim"] = cfg["freq_dim"]
    elif cls == "CogVideoXTransformer3DModel":
        if cfg["use_rotary_positional_embeddings"]:
            enc.append({"kind": "rope_axial", "params": {
                "preset": "cogvideox", "grid": grid, "axes_dim": [hd // 4, hd // 8 * 3, hd // 8 * 3], "theta": 10000,
                "base_width": cfg["sample_width"] // ps, "base_height": cfg["sample_height"] // ps}})
        else:
            enc.append({"kind": "sinusoidal3d", "params": {
                "frames": gt, "height": gh, "width": gw, "dim": inner,
                "spatial_interpolation_scale": cfg["spatial_interpolation_scale"],
                "temporal_interpolation_scale": cfg["temporal_interpolation_scale"]}})
        ts = {"dim": inner, "flip_sin_to_cos": int(cfg["flip_sin_to_cos"]), "downscale_freq_shift": cfg["freq_shift"],
              "scale": 1}
    else:  # PatchEmbed models
        base = cfg["sample_size"] // ps
        interp = 1
        if cls == "PixArtTransformer2DModel":
            interp = cfg.get("interpolation_scale") or max(cfg["sample_size"] // 64, 1)
        p = {"height": gh, "width": gw, "dim": inner, "base_size": base, "interpolation_scale": interp}
        if cfg.get("pos_embed_max_size"):
            p["pos_embed_max_size"] = cfg["pos_embed_max_size"]
        enc.append({"kind": "sinusoidal2d", "params": p})
        if cls == "DiTTransformer2DModel":
            ts["downscale_freq_shift"] = 1
    enc.append({"kind": "timestep", "params": ts})
    gen.update({"class_name": cls, "height": h, "width": w})
    return {"generator": gen, "encodings": enc}


def main():
    cases = []
    for name, sizes in SIZES.items():
        with open(os.path.join(CONFIGS, name)) as fh:
            cfg = json.load(fh)
        for h, w, f in sizes:
            case = {"config": name, "height": h, "width": w, "frames": f}
            case.update(plan(cfg, h, w, f))
            cases.append(case)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "plans.json"), "w") as fh:
        json.dump(cases, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
