#!/usr/bin/python3
"""Known answers for POST /v1/rope/apply with per-token positions (multipart/form-data: a part x
and a part positions), in float64 NumPy.

Run with Debian's interpreter (numpy): /usr/bin/python3 tests/ref/gen_apply_positions.py
Writes tests/data/apply_positions/<case>.x.npy (the x part), <case>.pos.npy (the positions part,
int32 or int64 as a client would send it), <case>.ref.npy (float64 answer) and cases.json
({"cases": [{"name", "query"}]}). tests/e2e/test_apply_positions_kat.c posts each case and checks
the answer against the reference within the float32 rounding of the server's arithmetic.

The formulas, written here from their definitions (compat=exact, no scaling):
  inv_freq[k] = 1 / base ** (2k / rd), k < rd/2, angle = position * inv_freq (float64, rounded as
  Hugging Face's float64 arithmetic and posencd's compat=exact round it);
  half layout (rotate_half): cos = cat(cos(angle), cos(angle)), out = x*cos + rotate_half(x)*sin;
  layout=interleaved (GPT-J): cos/sin repeated per channel pair, rotate_every_two;
  inverse=1: sin negated; rotary_dim < last axis: the rest passes through.
Positions [seq] are shared by every vector, [batch, seq] give one row per entry of x's first axis,
[num_tokens] with seq_axis=-3 is vLLM's flattened [num_tokens, heads, head_dim].

M-RoPE is Qwen2-VL's apply_multimodal_rotary_pos_emb as its modeling code writes it: cos/sin of
shape [3, batch, seq, rd] from the three position rows (t, h, w) with emb = cat(freqs, freqs),
then split along the last axis into chunks of mrope_section * 2 and chunk i taken from row i % 3.
Qwen3-VL's interleaved sections (apply_interleaved_mrope) start from the t row's frequencies and
take frequency k from the h row when k % 3 == 1 and k < 3*s_h, from the w row when k % 3 == 2 and
k < 3*s_w, before emb = cat(freqs, freqs)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kat  # noqa: E402  (libm's sin/cos in NumPy: import before numpy)
import numpy as np  # noqa: E402

OUT = os.path.join(kat.DATA, "apply_positions")


def inv_freq(rd, base):
    return 1.0 / base ** (np.arange(0, rd, 2, dtype=np.float64) / rd)


def rotate_half(v):
    h = v.shape[-1] // 2
    return np.concatenate((-v[..., h:], v[..., :h]), axis=-1)


def rotate_every_two(v):
    a, b = v[..., 0::2], v[..., 1::2]
    return np.stack((-b, a), axis=-1).reshape(v.shape)


def emb_of(freqs, layout):
    """[..., rd/2] angles to [..., rd] as the layout lays them out."""
    if layout == "half":
        return np.concatenate((freqs, freqs), axis=-1)
    return np.repeat(freqs, 2, axis=-1)


def rotate(x, cos, sin, rd, layout, inverse):
    """x [..., last] with cos/sin broadcastable to x[..., :rd]."""
    if inverse:
        sin = -sin
    rot = rotate_half if layout == "half" else rotate_every_two
    xr, xp = x[..., :rd], x[..., rd:]
    return np.concatenate((xr * cos + rot(xr) * sin, xp), axis=-1)


def cos_sin_tokens(pos, x_shape, seq_axis, rd, base, layout):
    """cos/sin shaped to broadcast over x, from positions [seq] or [batch, seq]."""
    ang = emb_of(np.asarray(pos, dtype=np.float64)[..., None] * inv_freq(rd, base), layout)
    cos, sin = np.cos(ang), np.sin(ang)
    kat.check_libm(ang)
    rank, a = len(x_shape), len(x_shape) + seq_axis
    # [seq, rd] or [batch, seq, rd] -> axes of x: batch at 0, seq at a, rd last, ones elsewhere
    shape = [1] * rank
    shape[a] = x_shape[a]
    shape[-1] = rd
    if np.ndim(pos) == 2:
        shape[0] = np.shape(pos)[0]
    return cos.reshape(shape), sin.reshape(shape)


def mrope_cos_sin(pos3, rd, base, section, interleaved):
    """Qwen2-VL / Qwen3-VL: pos3 [3, batch, seq] -> cos, sin [batch, seq, rd] (half layout)."""
    freqs = np.asarray(pos3, dtype=np.float64)[..., None] * inv_freq(rd, base)  # [3, b, s, rd/2]
    if interleaved:  # apply_interleaved_mrope
        f = freqs[0].copy()
        for row, off in ((1, 1), (2, 2)):
            f[..., off:section[row] * 3:3] = freqs[row][..., off:section[row] * 3:3]
        emb = np.concatenate((f, f), axis=-1)
        cos, sin = np.cos(emb), np.sin(emb)
    else:  # apply_multimodal_rotary_pos_emb: chunks of mrope_section * 2, chunk i from row i % 3
        emb = np.concatenate((freqs, freqs), axis=-1)  # [3, b, s, rd]
        cos3, sin3 = np.cos(emb), np.sin(emb)
        bounds = np.cumsum(section * 2)[:-1]
        cos = np.concatenate([m[i % 3] for i, m in enumerate(np.split(cos3, bounds, axis=-1))], axis=-1)
        sin = np.concatenate([m[i % 3] for i, m in enumerate(np.split(sin3, bounds, axis=-1))], axis=-1)
    kat.check_libm(emb)
    return cos, sin


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rng = np.random.default_rng(20261126)
    cases = []

    def save(name, query, x, pos, ref):
        np.save(os.path.join(OUT, name + ".x.npy"), x)
        np.save(os.path.join(OUT, name + ".pos.npy"), pos)
        np.save(os.path.join(OUT, name + ".ref.npy"), ref.astype(np.float64))
        cases.append({"name": name, "query": query})

    def case(name, shape, pos, query="", seq_axis=-2, rd=None, base=10000.0, layout="half", inverse=False,
             dtype=np.float32):
        x = rng.standard_normal(shape).astype(dtype)
        rd = rd or shape[-1]
        cos, sin = cos_sin_tokens(pos, shape, seq_axis, rd, base, layout)
        save(name, query, x, pos, rotate(x.astype(np.float64), cos, sin, rd, layout, inverse))

    def mrope(name, shape, pos3, section, interleaved, query=""):
        """x [batch, heads, seq, rd]; pos3 [3, seq] or [3, batch, seq]."""
        x = rng.standard_normal(shape).astype(np.float32)
        p = np.asarray(pos3)
        p3 = p[:, None, :] if p.ndim == 2 else p
        cos, sin = mrope_cos_sin(p3, shape[-1], 10000.0, section, interleaved)
        cos, sin = cos[:, None], sin[:, None]  # unsqueeze_dim=1: over the heads
        q = "mrope_section=%s%s" % (",".join(map(str, section)), "&interleaved=1" if interleaved else "")
        save(name, q + ("&" + query if query else ""), x, p,
             rotate(x.astype(np.float64), cos, sin, shape[-1], "half", False))

    # per-token positions, past the 4096 of positions= and scattered (no one table covers them)
    case("seq_i32", (2, 4, 16, 64), rng.integers(0, 50000, 16).astype(np.int32))
    case("batch_seq_i64", (3, 2, 10, 32), rng.integers(0, 10**6, (3, 10)).astype(np.int64))
    case("batch1_broadcast", (2, 3, 8, 32), np.arange(100, 108, dtype=np.int64)[None, :])
    case("vllm_flat", (12, 4, 64), rng.integers(0, 8192, 12).astype(np.int64), "seq_axis=-3", seq_axis=-3)
    case("bshd_batch", (2, 6, 3, 32), rng.integers(0, 5000, (2, 6)).astype(np.int64), "seq_axis=-3", seq_axis=-3)
    case("partial_inverse", (1, 2, 5, 48), np.array([9, 0, 4097, 3, 3], dtype=np.int32), "rotary_dim=32&inverse=1",
         rd=32, inverse=True)
    case("interleaved", (1, 2, 7, 32), rng.integers(0, 3000, 7).astype(np.int64), "layout=interleaved",
         layout="interleaved")
    case("base500k", (2, 1, 6, 128), rng.integers(0, 131072, (2, 6)).astype(np.int64), "base=500000", base=500000.0)
    case("f64", (1, 2, 9, 32), rng.integers(0, 20000, 9).astype(np.int64), dtype=np.float64)
    # M-RoPE: a text+image sequence's [3, seq] ids (text runs t=h=w; an image's grid shares t)
    text_img = np.array([[0, 1, 2, 3, 3, 3, 3, 5, 6], [0, 1, 2, 3, 3, 4, 4, 5, 6], [0, 1, 2, 3, 4, 3, 4, 5, 6]])
    mrope("mrope_qwen2vl", (1, 2, 9, 16), text_img, [2, 3, 3], False)
    mrope("mrope_batch", (2, 2, 6, 32), rng.integers(0, 300, (3, 2, 6)).astype(np.int64), [4, 6, 6], False)
    mrope("mrope_qwen3vl", (2, 2, 6, 128), rng.integers(0, 2000, (3, 2, 6)).astype(np.int32), [24, 20, 20], True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"generator": "tests/ref/gen_apply_positions.py", "numpy": np.__version__, "cases": cases}, f,
                  indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
