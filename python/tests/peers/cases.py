"""The all-reduce cases of test_collectives: their ids, inputs and NumPy-computed results.

Inputs are deterministic per (case, rank) and chosen so every result is exact: sums of
quarter-integers below 2**7 (exact even in bfloat16), products of small integers, max/min of
anything. AVG follows the library's definition: integer types divide the sum toward zero,
float16/bfloat16 divide in float32 and round once.
"""
import numpy as np

NUMPY_DTYPES = ["uint8", "int8", "int16", "uint16", "uint32", "int32", "uint64", "int64",
                "float16", "float32", "float64"]
TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
OPS = ["SUM", "AVG", "PROD", "MAX", "MIN"]
MODES = ["inplace", "outofplace", "async", "multi"]
COUNT = 1031  # not a multiple of the world size: uneven ring chunks
WORLD = 3
# Quantized sums: (kind, dtype, algorithm, wire dtype); the mode is 'quant_ALGORITHM_WIRE'.
QUANT = [("numpy", "float32", "MIN_MAX", "UINT8"), ("numpy", "float64", "ZERO_POINT_SCALE", "INT8"),
         ("torch", "float16", "MIN_MAX", "UINT16"), ("torch", "bfloat16", "ZERO_POINT_SCALE", "UINT8"),
         ("numpy", "float32", "MIN_MAX", "UINT4"), ("torch", "float32", "ZERO_POINT_SCALE", "UINT2")]


def case_ids():
    """Every case as 'kind-dtype-op-mode'."""
    exact = [f"{kind}-{dt}-{op}-{mode}" for kind, dts in (("numpy", NUMPY_DTYPES), ("torch", TORCH_DTYPES))
             for dt in dts for op in OPS for mode in MODES]
    return exact + [f"{kind}-{dt}-SUM-quant_{algo}_{wire}" for kind, dt, algo, wire in QUANT]


def quant_tolerance(dt, wire, world=WORLD, n=COUNT):
    """The bound on a quantized sum's error per element (docs/quantization.md, as tests/e2e/quant_peer.c
    applies it): (N + 1) A max(1 / (L - 4), ulp of dt) with A = max_i sum_p |x_p,i| and L codes; each
    hop's partial result is also rounded to dt."""
    xs = np.stack([cast_values(inputs(dt, "MAX", r, n), dt) for r in range(world)])
    codes = 1 << (16 if wire == "UINT16" else 8)
    ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}.get(dt, 2.0 ** -52)
    # 4 bits: step / 2 <= A / 10 (zero-point with specials); 2 bits: <= A (one code left with specials)
    step = {"UINT4": 0.1, "UINT2": 1.0}.get(wire, 1 / (codes - 4))
    return (world + 1) * np.abs(xs).sum(0).max() * max(step, ulp)


def _is_float(dt):
    return dt.startswith(("float", "bfloat"))


def inputs(dt, op, rank, n=COUNT):
    """Rank's input as float64 (floats) or int64/uint64 (integers) values; all exact in dt."""
    rng = np.random.default_rng([OPS.index(op), (NUMPY_DTYPES + TORCH_DTYPES).index(dt), rank])
    signed = not dt.startswith("uint")
    if op in ("SUM", "AVG"):
        v = rng.integers(-40 if signed else 0, 40, n)
        return v * 0.25 if _is_float(dt) else v
    if op == "PROD":
        if _is_float(dt):
            return rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], n)
        return rng.choice([-3, -2, -1, 1, 2, 3] if signed else [1, 2, 3], n)
    if _is_float(dt):
        return rng.standard_normal(n) * 100
    bits = int(dt.lstrip("uint"))
    lo, hi = (-(1 << bits - 1), 1 << bits - 1) if signed else (0, 1 << bits)
    return rng.integers(lo, hi, n, dtype=np.uint64 if dt == "uint64" else np.int64, endpoint=False)


def expected(dt, op, world=WORLD, n=COUNT):
    """The reduced values, before the final cast to dt (float64 / int64 / uint64; float32 for
    float16/bfloat16 AVG, which the caller rounds once to dt)."""
    xs = np.stack([cast_values(inputs(dt, op, r, n), dt) for r in range(world)])
    if op == "MAX":
        return xs.max(0)
    if op == "MIN":
        return xs.min(0)
    if op == "PROD":
        return xs.prod(0)
    s = xs.sum(0)
    if op == "SUM":
        return s
    if not _is_float(dt):
        return np.sign(s) * (np.abs(s) // world)
    if dt in ("float16", "bfloat16", "float32"):
        return s.astype(np.float32) / np.float32(world)
    return s / world


def cast_values(v, dt):
    """Values as they are stored in dt, as float64/int64/uint64 (float16 and bfloat16 rounded)."""
    if dt == "bfloat16":
        import torch
        return torch.from_numpy(np.asarray(v, np.float32)).to(torch.bfloat16).double().numpy()
    if _is_float(dt):
        return np.asarray(v).astype(dt).astype(np.float64)
    return np.asarray(v)


def make(kind, dt, values):
    """A NumPy array ('numpy') or torch tensor ('torch' on the CPU, 'cuda' on the GPU) of dt holding values."""
    if kind == "numpy":
        return np.asarray(values).astype(dt)
    import torch
    if dt == "bfloat16":
        t = torch.from_numpy(np.asarray(values, np.float32)).to(torch.bfloat16)
    else:
        t = torch.from_numpy(np.asarray(values).astype(dt))
    return t.cuda() if kind == "cuda" else t
