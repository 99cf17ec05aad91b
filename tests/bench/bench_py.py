"""Python anchors for `make bench`: the seeds' NumPy and PyTorch code and Hugging Face's RoPE
cos/sin construction, each on one thread, timed the way tests/bench/bench_kernels.c times posenc.

Run with Debian's /usr/bin/python3 (it has numpy and torch). Output lines, as bench_kernels:
    sample <name> <seconds>  |  info <name> <text>  |  skip <name> <reason>
Usage: bench_py.py [reps] [apply|cli|checks|sim LEN DIM OFFSET [FILE]|yarn-diff FILE]
(reps default 5; one warm-up run is not reported; "apply": only the RoPE apply row, for bench.sh to
alternate it with HTTP round trips; "cli": only the tables of the CLI rows, torch_cli_rope (HF
cos/sin 65536x128, base 500000), torch_cli_sin (the seeds' PositionalEncoding(1024, 16384)),
torch_cli_hf_rope (HF cos/sin 65536x128, base 10000) and torch_cli_yarn (HF's YaRN cos/sin
65536x128, base 10000, factor 4, original context 4096), 64 MiB each as posenc's; "yarn-diff": no
timing, FILE (posenc's f32 bin of that YaRN table) against torch_cli_yarn's table, its largest
difference; "checks": np_inv_freq, the dim/2 inverse frequencies of RoPE at dim 65536 in float64,
the anchor of the request-validation rows; "sim": np_sim, RoPE's similarity table
(analysis/similarity, encoding=rope, the default base 10000 and exact arithmetic) of LEN positions
from OFFSET at width DIM in float64, its warm-up at 64 positions; with FILE (posenc's f64 bin
output of the same table), also its largest difference from NumPy's)
"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ONLY_APPLY = len(sys.argv) > 2 and sys.argv[2] == "apply"
ONLY_CLI = len(sys.argv) > 2 and sys.argv[2] == "cli"
MODE = sys.argv[2] if len(sys.argv) > 2 else ""


def timed(name, fn):
    fn()  # warm-up: allocator, lazy imports, kernel dispatch
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        print(f"sample {name} {time.perf_counter() - t0:.9f}")


try:
    import numpy as np
except ImportError:
    np = None
    print("skip np_seed_sin numpy is not installed for this python")

if MODE in ("checks", "sim") and np is None:
    print(f"skip np_{'inv_freq' if MODE == 'checks' else 'sim'} numpy is not installed for this python")
    sys.exit(0)

if MODE == "checks":
    # What rope validation at dim 65536 did before the O(1) bound: the dim/2 frequencies base^(-2k/dim).
    print(f"info np_inv_freq numpy {np.__version__}, 10000 ** (-arange(0, 65536, 2) / 65536), float64")
    timed("np_inv_freq", lambda: 10000.0 ** (-np.arange(0, 65536, 2) / 65536))
    sys.exit(0)

if MODE == "sim":
    # src/core/analysis.c: X's rows are RoPE's rotated all-ones vectors, x*cos + rotate_half(x)*sin
    # for x = 1 in the half layout, i.e. [cos - sin | cos + sin] of the angles p*theta_k
    # (theta_k = base^(-2k/dim), p = OFFSET + i), and the table is the Gram matrix G = X X^T
    # (G_ij = 2 sum_k cos((i - j) theta_k)), all in float64.
    def rope_similarity(n, dim, offset, base=10000.0):
        pos = offset + np.arange(n, dtype=np.float64)
        ang = np.outer(pos, base ** (-np.arange(0, dim, 2) / dim))
        c, s = np.cos(ang), np.sin(ang)
        x = np.concatenate((c - s, c + s), axis=1)
        return x @ x.T

    n, dim, offset = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    rope_similarity(64, dim, offset)
    for _ in range(REPS):
        t0 = time.perf_counter()
        g = rope_similarity(n, dim, offset)
        print(f"sample np_sim {time.perf_counter() - t0:.9f}")
    if len(sys.argv) > 6:
        ours = np.fromfile(sys.argv[6], dtype="<f8")
        if ours.size != n * n:
            print(f"info np_sim_diff {sys.argv[6]} holds {ours.size} values, not {n * n}")
        else:
            print(f"info np_sim_diff largest difference from posenc {np.abs(g - ours.reshape(n, n)).max():.3g} (G_ii = {dim})")
    sys.exit(0)

if np is not None and not ONLY_APPLY and not ONLY_CLI and MODE != "yarn-diff":
    # ../shared/seeds/000*.txt, get_position_encoding, verbatim.
    def get_position_encoding(seq_length, model_dim):
        pos = np.arange(seq_length)[:, np.newaxis]
        i = np.arange(model_dim)[np.newaxis, :]
        angle_rates = 1 / np.power(10000, (2 * (i // 2)) / np.float32(model_dim))
        encoding = pos * angle_rates
        encoding[:, 0::2] = np.sin(encoding[:, 0::2])
        encoding[:, 1::2] = np.cos(encoding[:, 1::2])
        return encoding

    out = get_position_encoding(512, 768)
    print(f"info np_seed_sin numpy {np.__version__}, result dtype {out.dtype}, {out.nbytes} bytes")
    timed("np_seed_sin", lambda: get_position_encoding(512, 768))

try:
    import torch
    import torch.nn as nn
    import math
except ImportError:
    torch = None
    print("skip torch_seed_sin torch is not installed for this python")
    print("skip torch_hf_rope torch is not installed for this python")
    print("skip torch_cli_rope torch is not installed for this python")
    print("skip torch_cli_sin torch is not installed for this python")
    print("skip torch_cli_hf_rope torch is not installed for this python")
    print("skip torch_cli_yarn torch is not installed for this python")

if torch is not None:
    torch.set_num_threads(1)

    # ../shared/seeds/003*.txt, PositionalEncoding.__init__, verbatim (comments dropped).
    class PositionalEncoding(nn.Module):
        def __init__(self, embed_dim, max_length=5000):
            super().__init__()
            pe = torch.zeros(max_length, embed_dim)
            position = torch.arange(0, max_length).unsqueeze(1)
            dim_indices = torch.arange(0, embed_dim, 2).float()
            div_term = torch.exp(dim_indices * (-math.log(10000.0) / embed_dim))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0)
            self.register_buffer('pe', pe)

    if not ONLY_APPLY and MODE != "yarn-diff":
        print(f"info torch_seed_sin torch {torch.__version__}, threads {torch.get_num_threads()}")
        timed("torch_seed_sin", lambda: PositionalEncoding(768, max_length=512))

    # Hugging Face transformers' default RoPE (compute_default_rope_parameters + LlamaRotaryEmbedding
    # forward): inv_freq, outer product with positions, cat(freqs, freqs), cos and sin, float32.
    def hf_rope(seq_len=65536, dim=128, base=10000.0):
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        t = torch.arange(seq_len, dtype=torch.int64).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    # Hugging Face's YaRN table (rope_type "yarn", transformers' _compute_yarn_parameters and the
    # rotary embedding's forward), from its formula: the dims whose wavelength fits beta_fast
    # rotations into the original context keep base^(-2i/dim) (extrapolation), those under
    # beta_slow rotations take it divided by factor (interpolation), a linear ramp between the
    # two correction dims (floored and ceiled: truncate) blends them; cos and sin of the
    # positions' outer product with those frequencies, both halves, times the attention factor
    # 0.1 ln(factor) + 1. All float32 tensors, as transformers builds them.
    def yarn_inv_freq(dim, base, factor, orig_max, beta_fast=32.0, beta_slow=1.0):
        def correction_dim(rotations):
            return dim * math.log(orig_max / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(correction_dim(beta_fast)), 0)
        high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        keep = 1 - ramp  # the share of extrapolation per frequency
        powers = base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
        return (1.0 / (factor * powers)) * (1 - keep) + (1.0 / powers) * keep

    def hf_yarn_rope(seq_len=65536, dim=128, base=10000.0, factor=4.0, orig_max=4096):
        scale = 0.1 * math.log(factor) + 1.0
        t = torch.arange(seq_len, dtype=torch.int64).float()
        freqs = torch.outer(t, yarn_inv_freq(dim, base, factor, orig_max))
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * scale, emb.sin() * scale

    if ONLY_CLI:
        print(f"info torch_cli_rope torch {torch.__version__}, threads {torch.get_num_threads()}")
        timed("torch_cli_rope", lambda: hf_rope(65536, 128, 500000.0))
        timed("torch_cli_sin", lambda: PositionalEncoding(1024, max_length=16384))
        timed("torch_cli_hf_rope", lambda: hf_rope(65536, 128))
        timed("torch_cli_yarn", lambda: hf_yarn_rope(65536, 128, 10000.0, 4.0, 4096))
        sys.exit(0)

    if MODE == "yarn-diff":
        # posenc's f32 bin of the same YaRN table (cos block, then sin) against this one
        ours = np.fromfile(sys.argv[3], dtype="<f4")
        c, s = hf_yarn_rope(65536, 128, 10000.0, 4.0, 4096)
        ref = torch.stack((c, s)).numpy().reshape(-1)
        if ours.size != ref.size:
            print(f"info torch_cli_yarn_diff {sys.argv[3]} holds {ours.size} values, not {ref.size}")
        else:
            d = np.abs(ours - ref)
            print(f"info torch_cli_yarn_diff PyTorch's table against posenc's: largest difference {d.max():.3g}, {int((d > 0).sum())} of {d.size} values differ")
        sys.exit(0)

    # HF apply_rotary_pos_emb for one tensor: q * cos + rotate_half(q) * sin, cos/sin precomputed
    # (as a model computes them once per forward), q of shape [1, 32, 2048, 128].
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    q = torch.rand(1, 32, 2048, 128) * 2 - 1
    qc, qs = hf_rope(2048, 128)
    print("info torch_rope_apply q [1, 32, 2048, 128] f32, cos/sin precomputed")
    timed("torch_rope_apply", lambda: q * qc + rotate_half(q) * qs)

    if ONLY_APPLY:
        sys.exit(0)
    c, s = hf_rope()
    print(f"info torch_hf_rope {tuple(c.shape)} cos + sin, {(c.nelement() + s.nelement()) * c.element_size()} bytes")
    timed("torch_hf_rope", hf_rope)
