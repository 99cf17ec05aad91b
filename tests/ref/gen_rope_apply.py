#!/usr/bin/python3
"""Known answers for POST /v1/rope/apply: Hugging Face's apply_rotary_pos_emb in PyTorch float32.

Run with Debian's interpreter (numpy + torch): /usr/bin/python3 tests/ref/gen_rope_apply.py
Writes tests/data/rope_apply/<case>.in.npy (the body), <case>.out.npy (PyTorch's answer) and
cases.json (the query string of each case). The rotation is written from HF's definitions:
inv_freq = 1 / base ** (arange(0, rd, 2) / rd) in float32, freqs = outer(positions, inv_freq),
emb = cat(freqs, freqs), q*cos + rotate_half(q)*sin over the first rd channels (interleaved: the
GPT-J pairing, cos/sin repeated per pair and rotate_every_two)."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_rope  # noqa: E402  (HF's scaled inv_freq and attention_scaling in torch float32)

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "rope_apply")


def rotate_half(v):
    h = v.shape[-1] // 2
    return torch.cat((-v[..., h:], v[..., :h]), dim=-1)


def rotate_every_two(v):
    a, b = v[..., 0::2], v[..., 1::2]
    return torch.stack((-b, a), dim=-1).flatten(-2)


def apply(x, positions, rd, base=10000.0, layout="half", seq_axis=-2, inverse=False):
    inv = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.int64).float() / rd))
    freqs = torch.outer(torch.tensor(positions, dtype=torch.float32), inv)
    if layout == "half":
        emb, rot = torch.cat((freqs, freqs), dim=-1), rotate_half
    else:
        emb, rot = torch.repeat_interleave(freqs, 2, dim=-1), rotate_every_two
    cos, sin = emb.cos(), emb.sin()
    if inverse:
        sin = -sin
    if seq_axis == -3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    xt = torch.from_numpy(x)
    xr, xp = xt[..., :rd], xt[..., rd:]
    return torch.cat((xr * cos + rot(xr) * sin, xp), dim=-1).numpy()


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261121)
    cases = []

    def case(name, shape, query, **kw):
        x = rng.standard_normal(shape).astype(np.float32)
        seq = shape[kw.get("seq_axis", -2)]
        pos = kw.pop("positions", None) or list(range(seq))
        y = apply(x, pos, **kw)
        np.save(os.path.join(OUT, name + ".in.npy"), x)
        np.save(os.path.join(OUT, name + ".out.npy"), y)
        cases.append({"name": name, "query": query})

    case("half_b2h4s16d64", (2, 4, 16, 64), "compat=hf", rd=64)
    case("half_offset", (1, 2, 16, 64), "compat=hf&offset=1000", rd=64, positions=list(range(1000, 1016)))
    case("partial32", (1, 2, 8, 64), "compat=hf&rotary_dim=32", rd=32)
    case("positions", (1, 2, 6, 32), "compat=hf&positions=5,3,100,7,0,2", rd=32, positions=[5, 3, 100, 7, 0, 2])
    case("seq_axis3", (2, 8, 3, 32), "compat=hf&seq_axis=-3", rd=32, seq_axis=-3)
    case("interleaved", (1, 2, 8, 32), "compat=hf&layout=interleaved", rd=32, layout="interleaved")
    case("base500k", (1, 1, 8, 128), "compat=hf&base=500000", rd=128, base=500000.0)
    case("inverse", (1, 2, 8, 32), "compat=hf&inverse=1", rd=32, inverse=True)
    # scaled variants: cos/sin (attention_scaling included) from gen_rope's HF-order torch code
    def scaled(name, shape, query):
        x = rng.standard_normal(shape).astype(np.float32)
        seq, rd = shape[-2], shape[-1]
        c = gen_rope.Cfg("len=%d&dim=%d&%s" % (seq, rd, query), "rope")
        cs = torch.from_numpy(gen_rope.rope_torch(c))
        xt = torch.from_numpy(x)
        y = (xt * cs[0] + rotate_half(xt) * cs[1]).numpy()
        np.save(os.path.join(OUT, name + ".in.npy"), x)
        np.save(os.path.join(OUT, name + ".out.npy"), y)
        cases.append({"name": name, "query": "compat=hf&" + query})

    scaled("linear", (1, 2, 8, 64), "scaling=linear&factor=4")
    scaled("yarn", (1, 2, 8, 64), "scaling=yarn&factor=8&original_max_position_embeddings=4096&base=1000000")
    scaled("llama3", (1, 2, 8, 128), "scaling=llama3&factor=8&original_max_position_embeddings=8192&base=500000&offset=9000")
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
