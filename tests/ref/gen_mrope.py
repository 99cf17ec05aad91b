#!/usr/bin/python3
"""Known answers for /v1/rope/mrope/positions and /v1/rope/mrope (M-RoPE: Qwen2-VL, Qwen2.5-VL,
Qwen3-VL, GLM-4.1V), from references written independently of the C core (layout and conventions:
tests/ref/kat.py; Qwen3-VL's own cases: gen_mrope_qwen3vl.py).

Regenerate (from the repository root, with Debian's Python, which has numpy and torch):

    /usr/bin/python3 tests/ref/gen_mrope.py

It rewrites tests/data/mrope/; tests/core/test_mrope.c reads it. Files per case:

  rope/mrope/positions  ref_i32 [3, seq]: transformers' get_rope_index (Qwen2-VL; Qwen2.5-VL with
             its time scaling) re-done on segments instead of token ids, on torch int64 tensors:
             each block starts at the previous block's max + 1, text is arange on all three rows,
             a vision block is stack(t_index, h_index, w_index) over the merged (t, h, w) grid,
             Qwen2.5-VL's video t_index = (arange(t) * second_per_grid_t * tokens_per_second).long(),
             images 0: time_step=int (the default) as transformers 4.52 and later, second_per_grid_t
             an int64 tensor (torch.as_tensor(..., dtype=range_tensor.dtype)) and tokens_per_second
             the config's number (a Python int when integral, else a float); time_step=float as
             earlier versions, second_per_grid_t a float32 tensor as the processor gives it.
             Extra field mrope_position_delta = max + 1 - seq.
             GLM-4.1V (variant=glm4v, cases pos_glm4v_*) goes through token ids, as the model
             does (glm4v_rope_index): the prompt as Glm4vProcessor writes it (a `text:N` segment
             is N ordinary tokens, the chat template's <|begin_of_video|> / <|end_of_video|>
             among them: the text before a video ends with <|begin_of_video|>, the text after it
             starts with <|end_of_video|>; an image is its <|image|> tokens; a video of grid
             T x H x W is, per frame f, <|begin_of_image|>, H*W / m^2 <|image|>, <|end_of_image|>
             and str(int(t_f)) as timestamp_tokens[f] ordinary tokens), then Glm4vModel's
             get_rope_index: <|image|> tokens inside <|begin_of_video|> .. <|end_of_video|> are
             video, consecutive tokens of one type form a group (itertools.groupby), each group
             starts at the previous group's max + 1, a text group is arange, an image group its
             (t, h, w) grid, a video group one frame at t = video_frame_num - 1 (reset to 1 by
             every text group), video_grid_thw's T counting the groups of a video.
  rope/mrope ref_f64 [2, seq, dim]: float64 from the published formulas: inv_freq as
             transformers' rope init functions (gen_rope.inv_freq_f64), angles float64(position) *
             inv_freq for each of the three position rows, cat(freqs, freqs), cos/sin times
             attention_scaling, then apply_multimodal_rotary_pos_emb's split: the dim channels cut
             into mrope_section * 2 chunks, chunk i from row i % 3 (Qwen2-VL) - or, interleaved=1,
             Qwen3-VL's apply_interleaved_mrope on the frequencies (rows 1 and 2 take the channels
             1::3 and 2::3 below 3 * their section) before cat. compat=exact's definition.
             torch_f32: the same in PyTorch float32 in transformers' order (hf_query = query +
             compat=hf): inv_freq (gen_rope.hf_inv_freq), inv_freq[None, None, :, None] @
             position_ids[:, :, None, :].float(), cat, .cos() / .sin() * attention_scaling, split.
             dynamic / longrope take seq_len = max position + 1 (dynamic_rope_update).
"""
import itertools
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np
import torch

import gen_rope  # transformers' inv_freq and attention_scaling per scaling (float64 and torch float32)

GEN = "tests/ref/gen_mrope.py"
SEQ_DEFAULTS = {"variant": "qwen2vl", "spatial_merge_size": "2", "tokens_per_second": "2",
                "mrope_section": "16,24,24", "interleaved": "0", "dim": "128"}

MIX = "text:5,image:1x28x28,text:3,video:8x28x28,text:4"
SMALL = "text:5,image:1x8x8,text:3,video:3x8x8,text:4"
Q25 = "variant=qwen25vl&segments=text:2,video:6x8x12,text:1,image:2x4x4,video:5x4x6,text:3&second_per_grid_t=0.3,1.7"

POSITION_CASES = [
    ("pos_qwen2vl_mix", "segments=" + MIX),
    ("pos_qwen25vl_two_videos", Q25),
    ("pos_qwen25vl_two_videos_float", Q25 + "&time_step=float"),
    ("pos_qwen25vl_tps", "variant=qwen25vl&segments=video:4x4x4,text:2,video:3x2x2&tokens_per_second=25"),
    ("pos_qwen25vl_fractions", "variant=qwen25vl&segments=text:1,video:40x2x2&second_per_grid_t=0.3&tokens_per_second=25"
     "&time_step=float"),
    ("pos_qwen25vl_int_steps", "variant=qwen25vl&segments=video:9x2x2,text:1,video:5x2x2,video:3x2x2"
     "&second_per_grid_t=2.9,1.5,0.99&tokens_per_second=7"),
    ("pos_qwen25vl_int_fractional_tps", "variant=qwen25vl&segments=text:2,video:40x2x2&second_per_grid_t=3.7"
     "&tokens_per_second=0.3"),
    # frame 10: float32(10) * float32(0.7) rounds to 7.0, where the real product is below 7
    ("pos_qwen25vl_int_f32_product", "variant=qwen25vl&segments=video:11x2x2&second_per_grid_t=1.9&tokens_per_second=0.7"),
    ("pos_merge1_adjacent", "spatial_merge_size=1&segments=image:1x3x5,video:3x2x2,text:2,image:2x1x1"),
    ("pos_text_only", "segments=text:17"),
    ("pos_merge4", "spatial_merge_size=4&segments=text:3,image:2x16x8,text:1"),
]

# GLM-4.1V: timestamps are the frames' whole seconds; their token counts (one per digit here, a
# stand-in for the tokenizer's) only need to vary: positions see the counts alone
GLM_STAMPS = [len(str(int(t))) for t in (0, 2, 4, 8, 10, 12)]
GLM_STAMPS_B = [len(str(int(t))) for t in (0, 1, 9, 10)] + [len(str(int(t))) for t in (96, 100, 104)]

GLM4V_CASES = [
    ("pos_glm4v_video_frames", "variant=glm4v&segments=text:3,video:6x8x12,text:2&timestamp_tokens="
     + ",".join(map(str, GLM_STAMPS))),
    ("pos_glm4v_text_image_video_text", "variant=glm4v&segments=text:5,image:1x28x28,text:3,video:8x28x28,text:4"
     "&timestamp_tokens=1"),
    ("pos_glm4v_two_videos_merge1", "variant=glm4v&spatial_merge_size=1&segments=text:2,video:4x3x5,text:2,image:2x2x3,"
     "text:2,video:3x4x2,text:3&timestamp_tokens=" + ",".join(map(str, GLM_STAMPS_B))),
    ("pos_glm4v_merge4_tall", "variant=glm4v&spatial_merge_size=4&segments=text:4,video:2x32x8,text:2,image:1x8x24,text:1"
     "&timestamp_tokens=0"),
    ("pos_glm4v_image_only", "variant=glm4v&segments=text:1,image:1x28x28,text:1"),
    ("pos_glm4v_long_video_one_count", "variant=glm4v&segments=text:2,video:60x2x4,text:2,video:7x2x2,text:1"
     "&timestamp_tokens=2"),
]

TABLE_CASES = [
    ("qwen2vl_d128", "dim=128&mrope_section=16,24,24&base=1000000&segments=" + SMALL),
    ("qwen3vl_interleaved_d128", "dim=128&mrope_section=24,20,20&interleaved=1&base=5000000&segments=" + SMALL),
    ("qwen25vl_d64", "dim=64&mrope_section=8,12,12&base=1000000&" + Q25 + "&time_step=float"),
    ("interleaved_short_d20", "dim=20&mrope_section=4,3,3&interleaved=1&segments=text:2,image:1x6x4,text:1"),
    ("empty_w_d16", "dim=16&mrope_section=5,3,0&segments=text:2,image:1x4x4"),
    ("yarn_d64", "dim=64&mrope_section=8,12,12&scaling=yarn&factor=4&original_max_position_embeddings=2048&segments=" + SMALL),
    ("dynamic_d32", "dim=32&mrope_section=4,6,6&scaling=dynamic&factor=2&original_max_position_embeddings=16&segments=" + SMALL),
    ("linear_d16", "dim=16&mrope_section=2,3,3&scaling=linear&factor=2.5&segments=text:3,video:2x4x4"),
    ("longrope_d16", "dim=16&mrope_section=2,3,3&scaling=longrope&factor=32&original_max_position_embeddings=16&short_factor="
     + gen_rope.SHORT8 + "&long_factor=" + gen_rope.LONG8 + "&segments=" + SMALL),
    ("far_d32", "dim=32&mrope_section=4,6,6&variant=qwen25vl&segments=text:1,video:3x2x2,text:2&tokens_per_second=1000000"
     "&second_per_grid_t=500"),
    # scaled, with angles on both sides of where SLEEF's float sin/cos change how they reduce, in
    # one group of 8 lanes: PyTorch's cos/sin differ from the correctly rounded ones there
    ("yarn_text150_d64", "dim=64&mrope_section=8,12,12&base=1000000&scaling=yarn&factor=4"
     "&original_max_position_embeddings=2048&segments=text:150,image:1x8x8,text:3"),
    ("yarn_far_d128", "dim=128&mrope_section=16,24,24&scaling=yarn&factor=4&original_max_position_embeddings=2048"
     "&variant=qwen25vl&segments=text:1,video:3x2x2,text:2&tokens_per_second=1000000&second_per_grid_t=500"),
    # a group of 8 frequencies across the t and h sections: PyTorch groups each row's own angles
    ("yarn_far_split_d64", "dim=64&mrope_section=4,14,14&scaling=yarn&factor=4&original_max_position_embeddings=2048"
     "&variant=qwen25vl&segments=text:1,video:3x4x4,text:2&tokens_per_second=1000000&second_per_grid_t=500"),
    ("yarn_far_interleaved_d128", "dim=128&mrope_section=24,20,20&interleaved=1&scaling=yarn&factor=4"
     "&original_max_position_embeddings=2048&variant=qwen25vl&segments=text:1,video:3x2x2,text:2"
     "&tokens_per_second=1000000&second_per_grid_t=500"),
]


def params(query):
    return kat.parse_query(query, SEQ_DEFAULTS)


def segments(p):
    out = []
    for s in p["segments"].split(","):
        kind, spec = s.split(":")
        out.append((kind, [int(x) for x in spec.split("x")]))
    return out


def get_rope_index(p):
    """[3, seq] int64 positions and mrope_position_delta of the query's sequence."""
    m, variant, tps = int(p["spatial_merge_size"]), p["variant"], float(p["tokens_per_second"])
    as_int = p.get("time_step", "int") == "int"
    tps_cfg = int(tps) if tps == int(tps) else tps
    second = [float(x) for x in p["second_per_grid_t"].split(",")] if "second_per_grid_t" in p else None
    blocks, video = [], 0
    for kind, dims in segments(p):
        st_idx = int(blocks[-1].max()) + 1 if blocks else 0
        if kind == "text":
            blocks.append(torch.arange(dims[0]).view(1, -1).expand(3, -1) + st_idx)
            continue
        t, h, w = dims[0], dims[1] // m, dims[2] // m
        rng = torch.arange(t).view(-1, 1).expand(-1, h * w)
        if variant == "qwen2vl":
            t_index = rng.flatten()
        elif kind == "image":
            t_index = (rng * 0 * tps).long().flatten()
        elif as_int:
            spg = torch.as_tensor(second[video] if second else 1.0, dtype=rng.dtype)
            time = rng * spg * tps_cfg
            assert time.dtype == (torch.int64 if isinstance(tps_cfg, int) else torch.float32)
            t_index = time.long().flatten()
        else:
            spg = torch.tensor(second[video] if second else 1.0, dtype=torch.float32)
            time = rng * spg * tps
            assert time.dtype == torch.float32
            t_index = time.long().flatten()
        video += kind == "video"
        h_index = torch.arange(h).view(1, -1, 1).expand(t, -1, w).flatten()
        w_index = torch.arange(w).view(1, 1, -1).expand(t, h, -1).flatten()
        blocks.append(torch.stack([t_index, h_index, w_index]) + st_idx)
    pos = torch.cat(blocks, dim=1)
    assert pos.shape[0] == 3 and int(pos.max()) < 2**31
    return pos, int(pos.max()) + 1 - pos.shape[1]


TEXT, IMAGE, BEGIN_IMAGE, END_IMAGE, BEGIN_VIDEO, END_VIDEO = 1, 2, 3, 4, 5, 6


def glm4v_prompt(p):
    """Token ids, image_grid_thw and video_grid_thw of a glm4v query's sequence, as the processor
    lays them out (the docstring above)."""
    m = int(p["spatial_merge_size"])
    stamps = [int(x) for x in p["timestamp_tokens"].split(",")] if "timestamp_tokens" in p else []
    ids, images, videos, frame, after_video = [], [], [], 0, False
    for kind, dims in segments(p):
        if kind == "text":
            ids += [TEXT] * dims[0]
            if after_video:
                ids[-dims[0]] = END_VIDEO
            after_video = False
            continue
        assert not after_video, "text follows a video (its <|end_of_video|>)"
        t, h, w = dims
        if kind == "image":
            images.append(dims)
            ids += [IMAGE] * (t * h * w // (m * m))
            continue
        assert ids and ids[-1] == TEXT, "text before a video (its <|begin_of_video|>)"
        ids[-1] = BEGIN_VIDEO
        videos.append(dims)
        for _ in range(t):
            n = stamps[0] if len(stamps) == 1 else stamps[frame]
            ids += [BEGIN_IMAGE] + [IMAGE] * (h * w // (m * m)) + [END_IMAGE] + [TEXT] * n
            frame += 1
        after_video = True
    return torch.tensor(ids), torch.tensor(images).view(-1, 3), torch.tensor(videos).view(-1, 3)


def glm4v_rope_index(ids, image_grid_thw, video_grid_thw, m):
    """Glm4vModel.get_rope_index for one unpadded sequence, on torch int64 tensors."""
    types, in_video = [], False
    for tok in ids.tolist():
        in_video = True if tok == BEGIN_VIDEO else False if tok == END_VIDEO else in_video
        types.append("text" if tok != IMAGE else "video" if in_video else "image")
    groups = []
    for key, g in itertools.groupby(enumerate(types), lambda x: x[1]):
        g = list(g)
        groups.append((key, g[0][0], g[-1][0] + 1))
    blocks, image_index, video_index, video_group_index, video_frame_num = [], 0, 0, 0, 1
    for kind, start, end in groups:
        st_idx = int(blocks[-1].max()) + 1 if blocks else 0
        if kind == "image":
            t, h, w = (int(x) for x in image_grid_thw[image_index])
            gt, gh, gw = t, h // m, w // m
            t_index = torch.arange(gt).view(-1, 1).expand(-1, gh * gw).flatten()
            h_index = torch.arange(gh).view(1, -1, 1).expand(gt, -1, gw).flatten()
            w_index = torch.arange(gw).view(1, 1, -1).expand(gt, gh, -1).flatten()
            blocks.append(torch.stack([t_index, h_index, w_index]) + st_idx)
            image_index, video_frame_num = image_index + 1, 1
        elif kind == "video":
            gh, gw = int(video_grid_thw[video_index][1]) // m, int(video_grid_thw[video_index][2]) // m
            for t_idx in range(video_frame_num):
                t_index = torch.tensor(t_idx).view(-1, 1).expand(-1, gh * gw).flatten()
                h_index = torch.arange(gh).view(1, -1, 1).expand(1, -1, gw).flatten()
                w_index = torch.arange(gw).view(1, 1, -1).expand(1, gh, -1).flatten()
                blocks.append(torch.stack([t_index, h_index, w_index]) + st_idx)
            video_group_index += 1
            if video_group_index >= int(video_grid_thw[video_index][0]):
                video_index, video_group_index = video_index + 1, 0
            video_frame_num += 1
        else:
            blocks.append(torch.arange(end - start).view(1, -1).expand(3, -1) + st_idx)
            video_frame_num = 1
    pos = torch.cat(blocks, dim=1)
    assert pos.shape == (3, len(ids)) and int(pos.max()) < 2**31
    assert video_index == video_grid_thw.shape[0] and image_index == image_grid_thw.shape[0]
    return pos, int(pos.max()) + 1 - len(ids)


def sections(p):
    return [int(x) for x in p["mrope_section"].split(",")]


def split_channels(p, emb):
    """apply_multimodal_rotary_pos_emb: emb [3, seq, dim] -> [seq, dim], chunk i from row i % 3."""
    sec = sections(p) * 2
    if isinstance(emb, np.ndarray):
        cuts = np.cumsum(sec)[:-1]
        return np.concatenate([c[i % 3] for i, c in enumerate(np.split(emb, cuts, axis=-1))], axis=-1)
    return torch.cat([c[i % 3] for i, c in enumerate(emb.split(sec, dim=-1))], dim=-1)


def interleave(p, freqs):
    """Qwen3-VL's apply_interleaved_mrope: freqs [3, seq, dim/2] -> [seq, dim/2]."""
    sec = sections(p)
    out = freqs[0].copy() if isinstance(freqs, np.ndarray) else freqs[0].clone()
    for row, offset in ((1, 1), (2, 2)):
        idx = slice(offset, sec[row] * 3, 3)
        out[..., idx] = freqs[row][..., idx]
    return out


def cos_sin(p, freqs, att, lib):
    """[2, seq, dim] from the three rows' frequencies [3, seq, dim/2]."""
    cat = np.concatenate if lib is np else torch.cat
    if p["interleaved"] == "1":
        emb = cat((interleave(p, freqs),) * 2, -1)
        return [emb.cos() * att if lib is torch else np.cos(emb) * att,
                emb.sin() * att if lib is torch else np.sin(emb) * att]
    emb = cat((freqs, freqs), -1)
    c = emb.cos() * att if lib is torch else np.cos(emb) * att
    s = emb.sin() * att if lib is torch else np.sin(emb) * att
    return [split_channels(p, c), split_channels(p, s)]


def rope_cfg(query, pos):
    c = gen_rope.Cfg(query, "rope/mrope")
    if "seq_len" not in params(query):
        c.seq_len = int(pos.max()) + 1
    return c


def table_f64(query, pos):
    p, c = params(query), rope_cfg(query, pos)
    freqs = pos.numpy().astype(np.float64)[:, :, None] * gen_rope.inv_freq_f64(c)[None, None, :]
    kat.check_libm(freqs)
    return np.stack(cos_sin(p, freqs, gen_rope.attention_scaling(c), np))


def table_torch(query, pos):
    p, c = params(query), rope_cfg(query, pos)
    inv_freq = gen_rope.hf_inv_freq(c)
    position_ids = pos[:, None, :]  # [3, batch 1, seq]
    inv_freq_expanded = inv_freq[None, None, :, None].float().expand(3, 1, -1, 1)
    freqs = (inv_freq_expanded @ position_ids[:, :, None, :].float()).transpose(2, 3)[:, 0]
    out = torch.stack(cos_sin(p, freqs, gen_rope.attention_scaling(c), torch))
    assert out.dtype == torch.float32
    return out.numpy()


def versions():
    return {"numpy": np.__version__, "torch": torch.__version__}


def main():
    torch.set_num_threads(1)
    m = kat.Manifest("mrope", GEN)
    for name, query in POSITION_CASES:
        pos, delta = get_rope_index(params(query))
        m.add(name, "rope/mrope/positions", query, tuple(pos.shape), {"ref_i32": pos.numpy()},
              mrope_position_delta=delta)
    for name, query in GLM4V_CASES:
        p = params(query)
        pos, delta = glm4v_rope_index(*glm4v_prompt(p), int(p["spatial_merge_size"]))
        m.add(name, "rope/mrope/positions", query, tuple(pos.shape), {"ref_i32": pos.numpy()},
              mrope_position_delta=delta)
    for name, query in TABLE_CASES:
        pos, delta = get_rope_index(params(query))
        c = rope_cfg(query, pos)
        dim = int(params(query)["dim"])
        m.add(name, "rope/mrope", query, (2, pos.shape[1], dim),
              {"ref_f64": table_f64(query, pos), "torch_f32": table_torch(query, pos)},
              hf_query=query + "&compat=hf", attention_scaling=gen_rope.attention_scaling(c),
              mrope_position_delta=delta)
    total = m.save(versions())
    print(f"{len(m.cases)} cases, {total} bytes in {m.dir}", file=sys.stderr)
    assert total <= 2 << 20, "keep the committed data small"


if __name__ == "__main__":
    main()
