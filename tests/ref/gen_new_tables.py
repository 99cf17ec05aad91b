#!/usr/bin/python3
"""Known answers for /v1/relative/deberta, /v1/rope/query-scale and /v1/rope?scaling=proportional,
from references written here independently of the C core (formulas read in transformers'
modeling_deberta_v2.py, modeling_llama4.py, modeling_ministral3.py and modeling_rope_utils.py).

Regenerate (from the repository root, with Debian's Python, which has numpy, mpmath and torch):

    /usr/bin/python3 tests/ref/gen_new_tables.py

It rewrites tests/data/{relative_deberta,query_scale,rope_proportional}/ (layout: tests/ref/kat.py);
tests/core/test_new_tables.c and tests/e2e/test_new_tables_http.c read them. Files per case:

  relative_deberta
    torch_i32  build_relative_position + make_log_bucket_position in PyTorch float32, as the model
               runs it (eager; the TorchScript-compiled function is checked to agree).
    mp_i32     (boundary cases) the same formula in real numbers (mpmath, 50 digits): where it
               differs from torch_i32, float32 arithmetic moved a bucket, and the core must follow
               torch, not the real numbers.
  query_scale
    mp_f64     1 + scale * ln(m) in mpmath, m the integer floor term, rounded once (compat=exact).
    torch_f32  the model's float32 tensor expression over torch.arange(len) (compat=hf).
    mpwin_f64, torchwin_f32   the same for rows [row0, row0 + shape) of a table too long to store,
               past 2^24 where float(p) rounds (compat=hf differs from exact there).
  rope_proportional
    ref_f64    cos/sin of p * w_i in float64 NumPy (glibc), w_i = 1/base**(2i/dim)/factor for the
               first floor(partial_rotary_factor*dim/2) pairs and 0 after, cat(f, f) (compat=exact).
    torch_f32  transformers' proportional inv_freq and the rotary forward in float32 (compat=hf).
"""
import math

import kat  # noqa: F401  (before numpy: see kat.py)
import mpmath
import numpy as np
import torch

GEN = "tests/ref/gen_new_tables.py"


def versions():
    return {"numpy": np.__version__, "mpmath": mpmath.__version__, "torch": torch.__version__}


# ---- /v1/relative/deberta ---------------------------------------------------------------------

def log_bucket_torch(rel, bucket_size, max_position):
    """make_log_bucket_position, rewritten from its published formula, on an int64 tensor."""
    sign = torch.sign(rel)
    mid = bucket_size // 2
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1).type_as(rel), torch.abs(rel))
    ratio = torch.tensor((max_position - 1) / mid)  # a Python double made a float32 tensor
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(ratio) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, rel.type_as(log_pos), log_pos * sign)


@torch.jit.script
def log_bucket_scripted(rel, bucket_size: int, max_position: int):
    sign = torch.sign(rel)
    mid = bucket_size // 2
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1).type_as(rel), torch.abs(rel))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, rel.type_as(log_pos), log_pos * sign)


def deberta_torch(q_len, k_len, buckets, max_pos):
    rel = torch.arange(q_len, dtype=torch.long)[:, None] - torch.arange(k_len, dtype=torch.long)[None, :]
    if buckets > 0 and max_pos > 0:
        eager = log_bucket_torch(rel, buckets, max_pos)
        assert torch.equal(eager, log_bucket_scripted(rel, buckets, max_pos)), "TorchScript differs"
        rel = eager
    return rel.to(torch.long).numpy().astype(np.int32)


def deberta_mp(q_len, k_len, buckets, max_pos):
    """The same formula in real numbers (what float32 approximates)."""
    mpmath.mp.dps = 50
    mid = buckets // 2
    out = np.empty((q_len, k_len), dtype=np.int64)
    memo = {}
    for q in range(q_len):
        for k in range(k_len):
            r = q - k
            a = abs(r)
            if a <= mid:
                out[q, k] = r
                continue
            if a not in memo:
                x = mpmath.log(mpmath.mpf(a) / mid) / mpmath.log(mpmath.mpf(max_pos - 1) / mid) * (mid - 1)
                n = mpmath.nint(x)  # an exact integer (a power of the ratio) comes out a hair off
                memo[a] = int(n if abs(x - n) < mpmath.mpf(10) ** -40 else mpmath.ceil(x)) + mid
            out[q, k] = memo[a] if r > 0 else -memo[a]
    return out.astype(np.int32)


def boundary_distances(buckets, max_pos, up_to):
    """Distances |q - k| <= up_to whose float32 bucket differs from the real-number bucket."""
    rel = torch.arange(0, up_to + 1, dtype=torch.long)
    t = log_bucket_torch(rel, buckets, max_pos).to(torch.long).numpy()
    m = deberta_mp(up_to + 1, 1, buckets, max_pos)[:, 0]
    return [int(d) for d in np.nonzero(t != m)[0]]


DEBERTA_DEFAULTS = {"position_buckets": "256", "max_relative_positions": "512"}
DEBERTA_CASES = [
    # name, query, also the real-number file
    ("v3_q40_k70", "q_len=40&k_len=70", False),
    ("v3_q1_k6000", "q_len=1&k_len=6000", True),
    ("v3_q6000_k1", "q_len=6000&k_len=1", True),
    ("b64_m256_q300_k20", "q_len=300&k_len=20&position_buckets=64&max_relative_positions=256", True),
    ("b8_m20_q50", "q_len=50&position_buckets=8&max_relative_positions=20", True),
    ("b7_m9_q30_k45", "q_len=30&k_len=45&position_buckets=7&max_relative_positions=9", True),
    ("b4_m7_q1_k1500", "q_len=1&k_len=1500&position_buckets=4&max_relative_positions=7", True),
    ("b2_m3_q6", "q_len=6&position_buckets=2&max_relative_positions=3", True),
    ("b512_m4096_q1_k9000", "q_len=1&k_len=9000&position_buckets=512&max_relative_positions=4096", True),
    ("plain_q5_k9", "q_len=5&k_len=9&position_buckets=0", False),
    ("plain_none_q7_k3", "q_len=7&k_len=3&position_buckets=-1&max_relative_positions=16", False),
]

# (position_buckets, max_relative_positions) searched for distances where float32 and the real
# numbers disagree; the first few found become cases of their own (q_len=1, k_len=d+1).
BOUNDARY_SEARCH = [(256, 512), (64, 256), (128, 1024), (32, 64), (8, 20), (6, 7), (16, 100), (4, 5), (4, 9), (8, 13),
                   (10, 26), (6, 10), (4, 7), (4, 11), (8, 22), (4, 19)]


def gen_deberta():
    m = kat.Manifest("relative_deberta", GEN)
    for name, query, want_mp in DEBERTA_CASES:
        p = kat.parse_query(query, DEBERTA_DEFAULTS)
        q = int(p["q_len"])
        k = int(p.get("k_len", q))
        b, mp = int(p["position_buckets"]), int(p["max_relative_positions"])
        t = deberta_torch(q, k, b, mp)
        files = {"torch_i32": t}
        if want_mp and b > 0:
            files["mp_i32"] = deberta_mp(q, k, b, mp)
        m.add(name, "relative/deberta", query, t.shape, files)
    found = []
    for b, mp in BOUNDARY_SEARCH:
        for d in boundary_distances(b, mp, 20000)[:2]:
            found.append((b, mp, d))
    for b, mp, d in found:
        query = f"q_len=1&k_len={d + 1}&position_buckets={b}&max_relative_positions={mp}"
        t = deberta_torch(1, d + 1, b, mp)
        mpf = deberta_mp(1, d + 1, b, mp)
        assert t[0, d] != mpf[0, d]
        m.add(f"boundary_b{b}_m{mp}_d{d}", "relative/deberta", query, t.shape, {"torch_i32": t, "mp_i32": mpf},
              boundary=d)
    print(f"relative/deberta: {len(found)} boundary distances where float32 moves the bucket: {found}")
    return m


# ---- /v1/rope/query-scale ---------------------------------------------------------------------

QS_CASES = [
    # name, query
    ("llama4_len20000", "len=20000&variant=llama4"),
    ("llama4_fs3_len3000", "len=3000&variant=llama4&floor_scale=3&attn_scale=0.25"),
    ("llama4_fs1_len2000_neg", "len=2000&variant=llama4&floor_scale=1&attn_scale=-0.03"),
    ("ministral3_len20000", "len=20000&variant=ministral3&beta=0.1&original_max_position_embeddings=16384"),
    ("ministral3_o1_len5000", "len=5000&variant=ministral3&beta=0.1&original_max_position_embeddings=1"),
    ("ministral3_beta0_len100", "len=100&variant=ministral3&beta=0&original_max_position_embeddings=7"),
    # a double log times beta, then + 1, was 1.28 ulp from the real value in f64 (position 10912)
    ("ministral3_b0.8_o2_len10913",
     "len=10913&variant=ministral3&beta=0.7997497243597889&original_max_position_embeddings=2"),
    ("llama4_fs2_as0.9_len12000", "len=12000&variant=llama4&floor_scale=2&attn_scale=0.9"),
]
QS_DEFAULTS = {"attn_scale": "0.1", "floor_scale": "8192"}


def qs_terms(p, n, start=0):
    """(scale, the integer m of each position start .. n-1) as the real-number formula has them."""
    pos = np.arange(start, n, dtype=np.int64)
    if p["variant"] == "llama4":
        return float(p["attn_scale"]), (pos + 1) // int(p["floor_scale"]) + 1
    return float(p["beta"]), pos // int(p["original_max_position_embeddings"]) + 1


def qs_mp(p, n, start=0):
    mpmath.mp.dps = 50
    scale, ms = qs_terms(p, n, start)
    memo = {}
    for mv in set(ms.tolist()):
        memo[mv] = float(1 + mpmath.mpf(scale) * mpmath.log(mv))
    return np.array([memo[mv] for mv in ms.tolist()], dtype=np.float64)


def qs_torch(p, n):
    """The model's expressions on its position tensor (int64 arange), float32 throughout."""
    pos = torch.arange(n, dtype=torch.long)
    if p["variant"] == "llama4":
        floor_scale, attn_scale = int(p["floor_scale"]), float(p["attn_scale"])
        v = torch.log(torch.floor((pos.float() + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
    else:
        beta, orig = float(p["beta"]), int(p["original_max_position_embeddings"])
        v = 1 + beta * torch.log(1 + torch.floor(pos / orig))
    assert v.dtype == torch.float32
    return v.numpy()


# Windows of long tables, rows [row0, row0 + rows) only (files *win_*): past 2^24 float(p) rounds,
# so hf and exact part ways there. Elementwise ops: a window of positions is the table's window.
QS_WINDOWS = [
    ("ministral3_o1_past2p24", "len=16777300&variant=ministral3&beta=0.1&original_max_position_embeddings=1", 16777200, 100),
    ("llama4_fs1_past2p24", "len=16777300&variant=llama4&floor_scale=1&attn_scale=0.1", 16777200, 100),
]


def gen_query_scale():
    m = kat.Manifest("query_scale", GEN)
    for name, query in QS_CASES:
        p = kat.parse_query(query, QS_DEFAULTS)
        n = int(p["len"])
        m.add(name, "rope/query-scale", query, (n,), {"mp_f64": qs_mp(p, n), "torch_f32": qs_torch(p, n)},
              hf_query=query + "&compat=hf")
    for name, query, row0, rows in QS_WINDOWS:
        p = kat.parse_query(query, QS_DEFAULTS)
        mp = qs_mp(p, row0 + rows, row0)
        t = qs_torch(p, row0 + rows)[row0:]
        assert not np.array_equal(mp.astype(np.float32), t), "the window shows no float32 rounding"
        m.add(name, "rope/query-scale", query, (rows,), {"mpwin_f64": mp, "torchwin_f32": t},
              hf_query=query + "&compat=hf", row0=row0)
    return m


# ---- /v1/rope?scaling=proportional ------------------------------------------------------------

PROP_CASES = [
    # name, query (Gemma 4's global layers: head_dim 512, partial_rotary_factor 0.25, theta 1e6)
    ("gemma4_global_len16", "len=16&dim=512&base=1000000&scaling=proportional&partial_rotary_factor=0.25"),
    ("gemma4_global_offset", "len=4&offset=120000&dim=512&base=1000000&scaling=proportional&partial_rotary_factor=0.25"),
    ("d64_p05_factor8", "len=32&dim=64&scaling=proportional&partial_rotary_factor=0.5&factor=8"),
    ("d40_p03_interleaved", "len=24&dim=40&scaling=proportional&partial_rotary_factor=0.3&layout=interleaved"),
    ("d34_p1", "len=20&dim=34&scaling=proportional"),
    ("d96_p0125_base500000", "len=10&offset=7&dim=96&base=500000&scaling=proportional&partial_rotary_factor=0.125"),
]
PROP_DEFAULTS = {"base": "10000", "factor": "1", "partial_rotary_factor": "1", "offset": "0", "layout": "half"}


def prop_rot(p):
    return int(float(p["partial_rotary_factor"]) * int(p["dim"]) // 2)  # Python's int(prf * head_dim // 2)


def layout(f, interleaved):
    """[len, dim/2] angles to [len, dim]: cat(f, f) (half) or repeat_interleave (interleaved)."""
    return np.repeat(f, 2, axis=-1) if interleaved else np.concatenate([f, f], axis=-1)


def prop_f64(p):
    dim, base, factor, rot = int(p["dim"]), float(p["base"]), float(p["factor"]), prop_rot(p)
    w = np.zeros(dim // 2)
    for i in range(rot):
        w[i] = 1.0 / math.pow(base, (2 * i) / dim) / factor
    pos = np.arange(int(p["offset"]), int(p["offset"]) + int(p["len"]), dtype=np.float64)
    ang = layout(pos[:, None] * w[None, :], p["layout"] == "interleaved")
    kat.check_libm(ang)
    return np.stack([np.cos(ang), np.sin(ang)])


def prop_inv_freq_torch(dim, base, factor, prf):
    """_compute_proportional_rope_parameters, rewritten from its published formula."""
    rope_angles = int(prf * dim // 2)
    rotated = 1.0 / (base ** (torch.arange(0, 2 * rope_angles, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
    nope = dim // 2 - rope_angles
    inv = torch.cat((rotated, torch.zeros(nope, dtype=torch.float32))) if nope > 0 else rotated
    inv /= factor
    return inv


def prop_torch(p):
    dim = int(p["dim"])
    inv = prop_inv_freq_torch(dim, float(p["base"]), float(p["factor"]), float(p["partial_rotary_factor"]))
    off, n = int(p["offset"]), int(p["len"])
    pos = torch.arange(off, off + n, dtype=torch.long)[None, :]
    freqs = (inv[None, :, None].float() @ pos[:, None, :].float()).transpose(1, 2)[0]
    if p["layout"] == "interleaved":
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return np.stack([emb.cos().numpy(), emb.sin().numpy()])


def gen_proportional():
    m = kat.Manifest("rope_proportional", GEN)
    for name, query in PROP_CASES:
        p = kat.parse_query(query, PROP_DEFAULTS)
        ref = prop_f64(p)
        m.add(name, "rope", query, ref.shape, {"ref_f64": ref, "torch_f32": prop_torch(p)},
              hf_query=query + "&compat=hf", rotated=prop_rot(p))
    return m


def main():
    torch.set_num_threads(1)
    total = 0
    for gen in (gen_deberta, gen_query_scale, gen_proportional):
        total += gen().save(versions())
    print(f"wrote {total} bytes")


if __name__ == "__main__":
    main()
