"""Shared helpers of the known-answer generators under tests/ref/ (gen_tables.py; gen_sinusoidal.py
predates this module and keeps its own copies of the same conventions).

The conventions, which tests/support/pe_kat.h reads on the C side:

  tests/data/<dir>/cases.json   {"generator", "versions", "cases": [{"name", "table", "query",
                                "shape", <file fields>..., <extra fields>...}]}
  <case>.<kind>.<dtype>.bin     raw little-endian, C order, the case's shape; its field in the case
                                is "<kind>_<dtype>" (ref_f64, torch_f32, mp_f64, torch_i32, ...)

"query" is exactly what a client puts after "?" (defaults left out), so the C test drives the core
through the same pe_params_set calls as the HTTP layer.

Import this module before numpy. On CPUs with AVX512_SKX, NumPy 1.24 computes float64 sin/cos/pow
with SVML, measured up to 2.8 ulp off, which would make a float64 reference depend on the machine
that ran the generator; the variable below makes NumPy use libm (glibc) everywhere, and
check_libm() verifies it on the angles actually used.
"""
import json
import math
import os

os.environ["NPY_DISABLE_CPU_FEATURES"] = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"
import numpy as np  # noqa: E402

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))

DTYPES = {"f64": np.float64, "f32": np.float32, "i32": np.int32}


def parse_query(query, defaults):
    """The query's key=value pairs over the table's defaults, all as strings."""
    p = dict(defaults)
    for kv in query.split("&"):
        k, v = kv.split("=", 1)
        p[k] = v
    return p


def check_libm(ang):
    """np.sin / np.cos of these float64 angles are glibc's (see the top of this module)."""
    flat = np.asarray(ang, dtype=np.float64).ravel()
    assert all(np.sin(a) == math.sin(a) and np.cos(a) == math.cos(a) for a in flat), "np.sin is not libm's"


def mp_round(f, values, dps=50):
    """f (an mpmath function) of each float64 value, at dps digits, rounded once to float64."""
    import mpmath

    mpmath.mp.dps = dps
    return np.array([float(f(mpmath.mpf(float(v)))) for v in np.asarray(values).ravel()],
                    dtype=np.float64).reshape(np.shape(values))


def max_ulps_f64(a, b):
    """Largest distance in float64 ulps between two arrays of finite float64 values."""
    def ordered(x):
        return [i if i >= 0 else -(2**63) - i for i in np.asarray(x, dtype=np.float64).ravel().view(np.int64).tolist()]
    return max((abs(x - y) for x, y in zip(ordered(a), ordered(b))), default=0)


class Manifest:
    """One tests/data/<dir>: rewrites it from scratch, one add() per case, then save()."""

    def __init__(self, subdir, generator):
        self.dir = os.path.join(DATA, subdir)
        self.generator = generator
        self.cases = []
        self.bytes = 0
        os.makedirs(self.dir, exist_ok=True)
        for f in os.listdir(self.dir):
            if f.endswith(".bin") or f == "cases.json":
                os.remove(os.path.join(self.dir, f))

    def add(self, name, table, query, shape, files, **extra):
        """files: {"<kind>_<dtype>": array}; each array is written as <name>.<kind>.<dtype>.bin."""
        case = {"name": name, "table": table, "query": query, "shape": list(shape)}
        for field, arr in files.items():
            kind, dt = field.rsplit("_", 1)
            a = np.ascontiguousarray(arr, dtype=np.dtype(DTYPES[dt]).newbyteorder("<"))
            assert a.shape == tuple(shape), (name, field, a.shape, shape)
            fname = f"{name}.{kind}.{dt}.bin"
            with open(os.path.join(self.dir, fname), "wb") as f:
                f.write(a.tobytes())
            case[field] = fname
            self.bytes += a.nbytes
        case.update(extra)
        self.cases.append(case)

    def save(self, versions):
        manifest = {"generator": self.generator, "versions": versions, "cases": self.cases}
        with open(os.path.join(self.dir, "cases.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        return self.bytes
