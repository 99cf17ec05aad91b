#!/usr/bin/python3
"""Known answers for /v1/rope/mrope/positions?variant=qwen3vl (Qwen3-VL's position ids), NumPy only,
written independently of the C core from the published algorithm (layout and conventions:
tests/ref/kat.py).

Regenerate (from the repository root):

    /usr/bin/python3 tests/ref/gen_mrope_qwen3vl.py

It rewrites tests/data/mrope_qwen3vl/; tests/core/test_mrope_qwen3vl.c reads it.

Unlike the C core, which works on segments arithmetically, this reference goes through token ids,
as the model does:

 1. The prompt as Qwen3-VL's processor writes it. A `text:N` segment is N ordinary tokens (the
    chat template's <|vision_start|> / <|vision_end|> around an image or a video are among them: the
    last token of the text before a vision segment is <|vision_start|>). An image of grid T x H x W
    is T*H*W / m^2 <|image_pad|> tokens. A video of grid T x H x W becomes, per frame f,
    `<t_f seconds>` (timestamp_tokens[f] ordinary tokens), <|vision_start|>, H*W / m^2
    <|video_pad|>, <|vision_end|> (the processor's replace_video_token).
 2. get_rope_index over those ids: video_grid_thw repeated T times with T set to 1 (one grid per
    frame); vision items counted as the tokens after each <|vision_start|>; then the scan: the text
    before the next image or video pad is arange from one past the largest position so far, the
    vision block is (t, h, w) of its merged grid plus text_len + st_idx, trailing text arange;
    mrope_position_delta = max + 1 - seq.

The timestamps t_f come from the processor's rule (frame index / fps, averaged over each pair of
frames merged by temporal_patch_size 2) and their token counts from a stand-in count (one token per
digit, '<', '.', ' seconds', '>'), only to give the cases realistic, varying counts: the position ids
see the counts alone, and the counts are the query's timestamp_tokens, whatever tokenizer made them.
"""
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np

GEN = "tests/ref/gen_mrope_qwen3vl.py"
DEFAULTS = {"variant": "qwen2vl", "spatial_merge_size": "2"}

TEXT, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 1, 2, 3, 4, 5


def stamp_counts(frames, fps, first_index=0, step=1):
    """Token counts of `<t seconds>` for a video of `frames` merged frames sampled every `step`
    source frames at `fps` (two source frames per merged frame, as temporal_patch_size 2)."""
    idx = [first_index + step * i for i in range(2 * frames)]
    ts = [(idx[i] / fps + idx[i + 1] / fps) / 2 for i in range(0, len(idx), 2)]
    return [len(str(int(t))) + 5 for t in (float(f"{t:.1f}") for t in ts)]


def csv(xs):
    return ",".join(str(x) for x in xs)


STAMPS_A = stamp_counts(6, fps=2.0, step=3)                      # 6 frames, 0.7 s .. 15.7 s: 1 and 2 digits
STAMPS_B = stamp_counts(4, fps=1.0, first_index=90, step=4) + stamp_counts(3, fps=24.0, step=2)

CASES = [
    ("q3_image_only", "variant=qwen3vl&segments=text:1,image:1x28x28,text:1"),
    ("q3_video_frames", "variant=qwen3vl&segments=text:3,video:6x8x12,text:2&timestamp_tokens=" + csv(STAMPS_A)),
    ("q3_text_image_video_text", "variant=qwen3vl&segments=text:5,image:1x28x28,text:3,video:8x28x28,text:4"
     "&timestamp_tokens=6"),
    ("q3_two_videos_merge1", "variant=qwen3vl&spatial_merge_size=1&segments=text:2,video:4x3x5,text:1,image:2x2x3,"
     "text:2,video:3x4x2,text:3&timestamp_tokens=" + csv(STAMPS_B)),
    ("q3_merge4_tall", "variant=qwen3vl&spatial_merge_size=4&segments=text:4,video:2x32x8,text:1,image:1x8x24,text:1"
     "&timestamp_tokens=0"),
    ("q3_text_only", "variant=qwen3vl&segments=text:9"),
    ("q3_long_videos_one_count", "variant=qwen3vl&segments=text:2,video:60x2x4,text:1,video:7x2x2&timestamp_tokens=3"),
]


def segments(p):
    out = []
    for s in p["segments"].split(","):
        kind, spec = s.split(":")
        out.append((kind, [int(x) for x in spec.split("x")]))
    return out


def prompt(p):
    """Token ids, image_grid_thw and video_grid_thw of the query's sequence, as the processor lays
    them out (step 1 above)."""
    m = int(p["spatial_merge_size"])
    stamps = [int(x) for x in p["timestamp_tokens"].split(",")] if "timestamp_tokens" in p else []
    ids, images, videos, frame = [], [], [], 0
    for kind, dims in segments(p):
        if kind == "text":
            ids += [TEXT] * dims[0]
            continue
        assert ids and ids[-1] == TEXT, "a vision segment follows text (its <|vision_start|>)"
        ids[-1] = VISION_START
        t, h, w = dims
        if kind == "image":
            images.append(dims)
            ids += [IMAGE_PAD] * (t * h * w // (m * m))
            continue
        videos.append(dims)
        for _ in range(t):
            n = stamps[0] if len(stamps) == 1 else stamps[frame]
            ids += [TEXT] * n + [VISION_START] + [VIDEO_PAD] * (h * w // (m * m)) + [VISION_END]
            frame += 1
    return np.array(ids, dtype=np.int64), np.array(images, dtype=np.int64).reshape(-1, 3), \
        np.array(videos, dtype=np.int64).reshape(-1, 3)


def get_rope_index(ids, image_grid_thw, video_grid_thw, m):
    """Qwen3-VL's get_rope_index for one unpadded sequence (step 2 above), in int64."""
    video_grid_thw = np.repeat(video_grid_thw, video_grid_thw[:, 0], axis=0)
    video_grid_thw[:, 0] = 1
    after_start = ids[np.flatnonzero(ids == VISION_START) + 1]
    image_nums, video_nums = int((after_start == IMAGE_PAD).sum()), int((after_start == VIDEO_PAD).sum())
    tokens = ids.tolist()
    blocks, st, image_index, video_index = [], 0, 0, 0
    remain_images, remain_videos = image_nums, video_nums

    def start():
        return int(blocks[-1].max()) + 1 if blocks else 0

    def find(tok, remain):
        if remain > 0 and tok in tokens[st:]:
            return tokens.index(tok, st)
        return len(tokens) + 1

    for _ in range(image_nums + video_nums):
        ed_image, ed_video = find(IMAGE_PAD, remain_images), find(VIDEO_PAD, remain_videos)
        if ed_image < ed_video:
            t, h, w = image_grid_thw[image_index]
            image_index, remain_images, ed = image_index + 1, remain_images - 1, ed_image
        else:
            t, h, w = video_grid_thw[video_index]
            video_index, remain_videos, ed = video_index + 1, remain_videos - 1, ed_video
        gt, gh, gw = int(t), int(h) // m, int(w) // m
        text_len, st_idx = ed - st, start()
        blocks.append(np.broadcast_to(np.arange(text_len), (3, text_len)) + st_idx)
        t_index = np.repeat(np.arange(gt), gh * gw)
        h_index = np.tile(np.repeat(np.arange(gh), gw), gt)
        w_index = np.tile(np.arange(gw), gt * gh)
        blocks.append(np.stack([t_index, h_index, w_index]) + text_len + st_idx)
        st = ed + gt * gh * gw
    if st < len(tokens):
        text_len, st_idx = len(tokens) - st, start()
        blocks.append(np.broadcast_to(np.arange(text_len), (3, text_len)) + st_idx)
    pos = np.concatenate(blocks, axis=1)
    assert pos.shape == (3, len(tokens)) and int(pos.max()) < 2**31
    return pos, int(pos.max()) + 1 - len(tokens)


def main():
    man = kat.Manifest("mrope_qwen3vl", GEN)
    for name, query in CASES:
        p = kat.parse_query(query, DEFAULTS)
        ids, images, videos = prompt(p)
        pos, delta = get_rope_index(ids, images, videos, int(p["spatial_merge_size"]))
        man.add(name, "rope/mrope/positions", query, pos.shape, {"ref_i32": pos}, mrope_position_delta=delta)
    total = man.save({"numpy": np.__version__})
    print(f"{len(man.cases)} cases, {total} bytes in {man.dir}", file=sys.stderr)
    assert total <= 1 << 20, "keep the committed data small"


if __name__ == "__main__":
    main()
