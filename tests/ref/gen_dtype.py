#!/usr/bin/python3
"""Known answers for the dtype conversions of src/core/dtype.c (pe_f64_to_f16 and friends).

Regenerate (from the repository root, with Debian's Python, which has numpy):

    /usr/bin/python3 tests/ref/gen_dtype.py

It rewrites tests/data/dtype/; tests/core/test_dtype.c reads it. Raw little-endian files:

  f64_in.bin      N float64 inputs: tricky ones (ties, just above / below ties, f16 and bf16
                  subnormals, the overflow thresholds, values that double-round through float32,
                  +-0, +-inf, NaN, float64 subnormals) then random ones spread over both formats'
                  ranges and random bit patterns.
  f64_f16.bin     N uint16: each input rounded once to binary16, to nearest, ties to even.
  f64_bf16.bin    N uint16: the same for bfloat16.
  f32_in.bin      M float32 inputs (tricky float32 values, then random ones).
  f32_f16.bin     M uint16, f32_bf16.bin M uint16: rounded once from the float32 value.
  f16_f32.bin     65536 float32: every binary16 bit pattern widened to float32 by numpy.

How the answers are made, independently of the C code: every finite binary16 / bfloat16 value and
every midpoint between neighbours is exactly a float64, so rounding is a binary search over the
sorted table of all finite values of the format, with +inf as the value after the largest (its
pattern is even, so a tie at the overflow threshold goes to inf, as IEEE 754 says). binary16
answers are also checked against numpy's float64 -> float16 cast, which rounds once. There is no
such reference for bfloat16: torch's float64 -> bfloat16 cast goes through float32 and rounds
twice, so it is not used.
"""
import bisect
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "dtype")


def bits_f64(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits_f64(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def f16_value(h):
    return float(np.array([h], dtype=np.uint16).view(np.float16)[0])


def bf16_value(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


class Format:
    """Round-to-nearest-even into a 16-bit format by search over all its finite values."""

    def __init__(self, name, value_of, inf_bits):
        self.name = name
        self.inf_bits = inf_bits
        pats = [h for h in range(0, inf_bits)]  # non-negative finite patterns, in increasing order
        self.vals = [value_of(h) for h in pats]
        assert all(a < b for a, b in zip(self.vals, self.vals[1:]))
        self.pats = pats + [inf_bits]
        # the value after the largest finite one, at the same spacing: 2^(emax+1)
        top = self.vals[-1] + (self.vals[-1] - self.vals[-2])
        self.vals = self.vals + [top]

    def round(self, x):
        sign = 0x8000 if (bits_f64(x) >> 63) else 0
        if x != x:  # a quiet NaN of the same sign
            return sign | self.inf_bits | (0x0200 if self.name == "f16" else 0x0040)
        a = abs(x)
        if a >= self.vals[-1]:
            return sign | self.inf_bits
        i = bisect.bisect_right(self.vals, a) - 1  # vals[i] <= a < vals[i+1]
        lo, hi = self.vals[i], self.vals[i + 1]
        mid = lo + (hi - lo) / 2  # exact in float64
        if a < mid:
            p = self.pats[i]
        elif a > mid:
            p = self.pats[i + 1]
        else:
            p = self.pats[i] if self.pats[i] % 2 == 0 else self.pats[i + 1]
        return sign | p


F16 = Format("f16", f16_value, 0x7C00)
BF16 = Format("bf16", bf16_value, 0x7F80)


def around(v):
    """v and its float64 neighbours."""
    return [np.nextafter(v, -np.inf), v, np.nextafter(v, np.inf)]


def tricky_f64():
    xs = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300,
          1e300, 1.7976931348623157e308, 1.0, -1.0, 0.5, 2.0, 3.0, 0.1, 1 / 3, np.pi, -np.e]
    for fmt in (F16, BF16):
        v = fmt.vals
        tiny, top = v[1], v[-1]
        # ties and their neighbours: between consecutive values in several binades, incl. subnormals
        for i in [0, 1, 2, 3, 0x3ff, 0x400, 0x401, 0x3c00 if fmt is F16 else 0x3f80, 0x3c01 if fmt is F16 else 0x3f81,
                  len(v) - 3, len(v) - 2]:
            if i + 1 < len(v):
                mid = v[i] + (v[i + 1] - v[i]) / 2
                xs += around(mid) + around(v[i])
        xs += around(tiny) + around(tiny / 2) + around(tiny * 1.5) + around(tiny / 4)
        xs += around(top) + around(fmt.vals[-2]) + [top * 2, top * 1e10]  # overflow threshold and past it
        # double rounding: a tie moved by less than float32 can hold (2^-30 relative), so a trip
        # through float32 lands on the tie and then goes to even, the wrong way half the time
        for i in (1, 2, 0x3ff, 0x401, 0x1234, 0x2001, 0x2002, len(v) - 4, len(v) - 3):
            mid = v[i] + (v[i + 1] - v[i]) / 2
            xs += [mid + mid * 2.0 ** -30, mid - mid * 2.0 ** -30]
    xs += [-x for x in xs]
    return xs


def tricky_f32():
    xs = tricky_f64()
    out = []
    for x in xs:
        f = np.float32(x)  # float32 inputs: whatever float32 value is nearest (ties and neighbours)
        out += [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    # float32 subnormals (bfloat16 keeps their exponent range)
    out += [np.float32(v) for v in (1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 9.2e-41, 4.6e-41)]
    for b in (0x00008000, 0x00018000, 0x00010000, 0x0000ffff, 0x00017fff, 0x7f7f8000, 0x7f7fffff, 0x7f7f7fff,
              0x3f808000, 0x3f818000, 0x3f80c000, 0x477fe000, 0x477fefff, 0x477ff000, 0x33000000, 0x33000001,
              0x387fc000, 0x387fe000):
        out.append(np.array([b], dtype=np.uint32).view(np.float32)[0])
    return [np.float32(v) for v in out]


def random_f64(rng, n):
    xs = []
    # log-uniform over each format's range and a bit beyond, random sign
    for lo, hi in ((-27, 17), (-136, 130)):
        e = rng.uniform(lo, hi, n)
        m = rng.uniform(1, 2, n)
        s = rng.choice([-1.0, 1.0], n)
        xs += list(s * m * np.exp2(np.floor(e)))
    # random bit patterns with exponents near the interesting ranges
    for lo, hi in ((1023 - 27, 1023 + 17), (1023 - 136, 1023 + 130)):
        exp = rng.integers(lo, hi, n, dtype=np.uint64)
        man = rng.integers(0, 1 << 52, n, dtype=np.uint64)
        sgn = rng.integers(0, 2, n, dtype=np.uint64)
        xs += [from_bits_f64((int(sg) << 63) | (int(ex) << 52) | int(mn)) for sg, ex, mn in zip(sgn, exp, man)]
    # exact ties with random mantissas: kept bits random, dropped bits exactly 100...0
    for drop in (42, 45):  # 52 - 10 (f16), 52 - 7 (bf16)
        exp = rng.integers(1023 - 20 if drop == 42 else 1023 - 130, 1023 + 15 if drop == 42 else 1023 + 127, n // 4,
                           dtype=np.uint64)
        kept = rng.integers(0, 1 << (52 - drop), n // 4, dtype=np.uint64)
        xs += [from_bits_f64((int(ex) << 52) | (int(k) << drop) | (1 << (drop - 1))) for ex, k in zip(exp, kept)]
    return xs


def write(name, arr):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(arr).tobytes())


def main():
    np.seterr(over="ignore")  # float32 / float16 casts of huge inputs overflow to inf on purpose
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240613)
    x64 = np.array(tricky_f64() + random_f64(rng, 1500), dtype="<f8")
    h64 = np.array([F16.round(float(x)) for x in x64], dtype="<u2")
    b64 = np.array([BF16.round(float(x)) for x in x64], dtype="<u2")
    # cross-check binary16 against numpy's single rounding (NaN payloads aside)
    npy = x64.astype(np.float16).view(np.uint16)
    ok = (npy == h64) | (np.isnan(x64))
    assert ok.all(), [(float(x), hex(a), hex(b)) for x, a, b in zip(x64[~ok], npy[~ok], h64[~ok])][:5]

    x32 = np.array(tricky_f32() + [np.float32(v) for v in random_f64(rng, 1000)], dtype="<f4")
    h32 = np.array([F16.round(float(x)) for x in x32], dtype="<u2")
    b32 = np.array([BF16.round(float(x)) for x in x32], dtype="<u2")
    npy = x32.astype(np.float16).view(np.uint16)
    ok = (npy == h32) | np.isnan(x32)
    assert ok.all(), [(float(x), hex(a), hex(b)) for x, a, b in zip(x32[~ok], npy[~ok], h32[~ok])][:5]

    all16 = np.arange(65536, dtype=np.uint32).astype("<u2").view(np.float16).astype("<f4")

    write("f64_in.bin", x64)
    write("f64_f16.bin", h64)
    write("f64_bf16.bin", b64)
    write("f32_in.bin", x32)
    write("f32_f16.bin", h32)
    write("f32_bf16.bin", b32)
    write("f16_f32.bin", all16)
    # how often a trip through float32 would have given another answer (the double-rounding trap)
    fin = ~np.isnan(x64)
    wrong = [np.count_nonzero(np.array([f.round(float(np.float32(x))) for x in x64[fin]], dtype="<u2") != r[fin])
             for f, r in ((F16, h64), (BF16, b64))]
    print(f"{len(x64)} float64 inputs (through float32 {wrong[0]} would round wrong to f16, {wrong[1]} to bf16), "
          f"{len(x32)} float32 inputs, 65536 binary16 patterns")

if __name__ == "__main__":
    main()
