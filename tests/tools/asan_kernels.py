"""Run many generated cpu kernels under AddressSanitizer and compare them with the reference backend.

torch cannot run under ASan's preloaded runtime, so this check uses the reference executor (numpy)
as its oracle.  Every kernel is compiled with -fsanitize=address, so any out-of-bounds read or write
in generated code aborts the run with a report.  Command (from the repository root):

    LAZYTORCH_EXTRA_CFLAGS="-fsanitize=address -fno-omit-frame-pointer" \
    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
    LAZYTORCH_CACHE_DIR=$(mktemp -d) python tests/tools/asan_kernels.py
"""
from __future__ import annotations

import itertools

import numpy as np

import lazytorch as lt

SHAPES = [(), (0,), (1,), (7,), (3, 1), (0, 5), (5, 33), (4, 1, 6), (2, 3, 65)]
DTYPES = [lt.float32, lt.float16, lt.bfloat16, lt.int32, lt.int64, lt.uint8, lt.bool]


def views(x: lt.Tensor):
    """x itself and non-contiguous views of it (transposed, strided, flipped, expanded)."""
    yield x
    if x.ndim >= 2:
        yield x.transpose(0, -1)
    if x.ndim >= 1 and x.shape[-1] > 1:
        yield x[..., ::2]
        yield x.flip(-1)
    yield x.unsqueeze(0).expand(2, *x.shape)


PROGRAMS = {
    "chain": lambda x: ((x * 2 + 1).abs() - x).clamp(-3, 3) if x.dtype is not lt.bool else x & ~x,
    "sum_last": lambda x: x.sum(-1) if x.ndim else x.sum(),
    "sum_first": lambda x: x.sum(0) if x.ndim else x.sum(),
    "amax_all": lambda x: x.amax() if x.numel() else x.sum(),
    "argmax": lambda x: x.argmax(-1) if x.ndim and x.shape[-1] else x.sum(),
    "softmax": lambda x: lt.softmax(x.float(), -1) if x.ndim else x.float(),
    "layer_norm": lambda x: lt.nn.functional.layer_norm(x.float(), x.shape[-1:]) if x.ndim else x.float(),
    "broadcast": lambda x: x + x.sum(-1, keepdim=True) if x.ndim else x + 1,
}


def main() -> None:
    rng = np.random.default_rng(0)
    checked = 0
    for shape, dtype in itertools.product(SHAPES, DTYPES):
        base = lt.tensor(rng.uniform(-4, 4, shape)).to(dtype)
        for x, (name, fn) in itertools.product(list(views(base)), PROGRAMS.items()):
            try:
                lt.set_backend("reference")
                want = fn(x).numpy()
            except Exception:                      # noqa: BLE001  (invalid for this dtype: skip)
                continue
            lt.set_backend("cpu")
            got = fn(x).numpy()
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2, atol=1e-2,
                                       err_msg=f"{name} {shape} {dtype}")
            checked += 1
    print(f"asan_kernels: {checked} programs compiled with ASan and checked against the reference: ok")


if __name__ == "__main__":
    main()
