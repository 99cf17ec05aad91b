#!/usr/bin/python3
"""Reference .npy files for tests/tensor/test_npy.c, written by NumPy itself.

Run once with Debian's NumPy (the pyenv `python3` on PATH has none):
    /usr/bin/python3 tests/ref/make_npy_fixtures.py
and commit tests/data/npy/. Element i of every array (C order) is i*0.25 - 2 for float dtypes and
i*1000003 - 7 for int32, so the C test can recompute the values without reading this script.
"""
import os
import numpy as np
import numpy.lib.format as fmt

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "npy")
SHAPES = {"r0": (), "r1": (5,), "r2": (3, 4), "r3": (2, 3, 4), "r4": (2, 1, 3, 2),
          "empty": (0, 3), "wide": (123456, 0)}
DTYPES = {"f4": "<f4", "f8": "<f8", "f2": "<f2", "i4": "<i4"}


def values(shape, descr):
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.float64)
    v = i * 1000003 - 7 if descr == "<i4" else i * 0.25 - 2
    return v.astype(descr).reshape(shape)


def save(name, a, version=None):
    with open(os.path.join(OUT, name), "wb") as f:
        fmt.write_array(f, a, version=version, allow_pickle=False)


def aligned_header():
    """An empty array whose header dict fills the header to a multiple of 64 exactly, so NumPy
    pads 64 more. The growth spaces make the length independent of shape[0]; the later dims
    decide it. np.zeros refuses such dims even beside a 0, so only the header is written."""
    for k1 in range(1, 19):
        for k2 in range(1, 19):
            shape = (2, 0, 10**k1, 10**k2)
            d = "{'descr': '<f4', 'fortran_order': False, 'shape': %r, }" % (shape,)
            d += " " * (21 - len(repr(shape[0])))
            if (10 + len(d) + 1) % 64 == 0:
                with open(os.path.join(OUT, "aligned_f4.npy"), "wb") as f:
                    fmt.write_array_header_1_0(
                        f, {"descr": "<f4", "fortran_order": False, "shape": shape})
                return
    raise SystemExit("no aligned shape found")


def main():
    os.makedirs(OUT, exist_ok=True)
    for dn, descr in DTYPES.items():
        for sn, shape in SHAPES.items():
            save("%s_%s.npy" % (dn, sn), values(shape, descr))
    save("v2_f4_r2.npy", values((3, 4), "<f4"), version=(2, 0))
    save("v3_f8_r3.npy", values((2, 3, 4), "<f8"), version=(3, 0))
    save("fortran_f4_r2.npy", np.asfortranarray(values((3, 4), "<f4")))
    save("bigendian_f4_r2.npy", values((3, 4), ">f4"))
    save("i8_r1.npy", np.arange(4, dtype="<i8"))
    aligned_header()


if __name__ == "__main__":
    main()
