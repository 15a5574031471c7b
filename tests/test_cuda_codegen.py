"""CUDA code generation checked without a GPU: every canonical kernel of the op suite is compiled with
`nvcc -arch=sm_90 -c` as the source the cuda backend compiles ahead with NVRTC
(codegen/targets/cuda.py::standalone), and a few as MLX's JIT assembles them (`assemble`); golden
sources for a few kernels are checked in under tests/golden/*.cu (`UPDATE_GOLDEN=1` regenerates).
The kernels' results are checked on a GPU by the op suite (`LAZYTORCH_TEST_BACKENDS=cuda`)."""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import lazytorch as lt
from lazytorch.codegen.gpu import launch_call
from lazytorch.codegen.targets.cuda import DIALECT as CUDA
from lazytorch.codegen.targets.cuda import CudaCall, assemble, function_name, standalone
from lazytorch.ir import dtypes as D
from lazytorch.realize import kernel_plan

GOLDEN = Path(__file__).parent / "golden"
NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)

# Stands in for MLX's device utilities header (what our kernels may use of it: the fp16/bf16 types
# and the Shape/Strides types of its signatures).
MLX_UTILS = """#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/array>
namespace mlx::core::cu {
using Shape = cuda::std::array<int32_t, 10>;
using Strides = cuda::std::array<int64_t, 10>;
}
"""


def t(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return lt.tensor(rng.standard_normal(shape).astype(dtype))


def bf16(shape):
    return lt.tensor(np.random.default_rng(1).standard_normal(shape).astype(np.float32), dtype=lt.bfloat16)


def ints(shape, dtype=np.int32):
    return lt.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 5)


PROGRAMS = {
    "pointwise_chain": lambda: ((t((6, 40)) * 2.0).exp() + 1.0).sigmoid(),
    "row_sum": lambda: (t((6, 40)) * t((6, 40), seed=1)).sum(dim=1),
    "softmax": lambda: lt.softmax(t((6, 40)), dim=-1),
    "layer_norm": lambda: lt.nn.functional.layer_norm(t((4, 3, 64)), (64,)),
    "argmax": lambda: t((5, 33)).argmax(dim=1),
    "amax_nan": lambda: t((3, 7, 9)).amax(dim=(0, 2)),
    "any_all": lambda: ((t((4, 50)) > 0).any(dim=1), (t((4, 50)) > -5).all(dim=0)),
    "int_division": lambda: (ints((4, 5)) // lt.tensor([1, 2, -3, 4, 5], dtype=lt.int32),
                             ints((3, 3), np.int8) % 3, ints((6,), np.int64).pow(2)),
    "int_sum": lambda: ints((7, 9), np.int16).sum(dim=0),
    "float16": lambda: (t((8, 16), np.float16) * 3.0).tanh().sum(dim=-1),
    "bfloat16": lambda: (bf16((8, 16)).erf() - bf16((8, 16)).expm1()).max(dim=-1).values,
    "f64_scalar": lambda: lt.log_softmax(t((5, 20)), dim=-1) + t((5, 20)).remainder(0.7) * 1e-3,
    "strided": lambda: t((16, 12)).t()[:, ::2].exp() + t((8,)),
    "broadcast_where": lambda: lt.where(t((4, 1, 5)) > 0, t((3, 5)), -t((4, 3, 1))).round(),
    # long rows: one block per row (register-cached with a block-wide combine, or striding)
    "long_rows": lambda: (lt.softmax(t((3, 5000)), dim=-1), t((2, 3000)).argmax(dim=1)),
    # vector steps over rows (half: 8-byte words), the broadcast weight and bias moved by steps too
    "vector_rows_f16": lambda: lt.nn.functional.layer_norm(t((4, 256), np.float16), (256,), t((256,), np.float16),
                                                           t((256,), np.float16, seed=2)),
    # long rows split over blocks: each block's partials, the last block folds them (grid combine)
    "grid_reduce": lambda: (lambda x: (x.sum(dim=1), x.argmax(dim=1)))(t((3, 70000))),
    # tiny rows, a thread each (lanes=1): a max-pool's windows and its gradient's, argmax with NaN
    "tiny_rows": lambda: (*_max_pool_grad((2, 3, 24, 24)), t((300, 7)).argmax(dim=1)),
    # BatchNorm's backward: channel sums broadcast back over (N, H, W) in a rows kernel of 1024 threads
    "channel_rows": lambda: _batch_norm_grads((16, 8, 32, 32)),
    "mixed": lambda: (t((9,)).floor_divide(0.5) + t((9,)).clamp(-1, 1).atan2(t((9,), seed=3))
                      + lt.maximum(t((9,)), t((9,), seed=4)) * 2).to(lt.float16),
}


def _batch_norm_grads(shape):
    x, w = lt.tensor(t(shape).numpy(), requires_grad=True), lt.tensor(t(shape[1:2]).numpy(), requires_grad=True)
    (lt.nn.functional.batch_norm(x, None, None, w, None, True) * t(shape, seed=2)).sum().backward()
    return x.grad, w.grad


def _max_pool_grad(shape):
    x = lt.tensor(t(shape).numpy(), requires_grad=True)
    y = lt.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
    (y * t(tuple(y.shape), seed=2)).sum().backward()
    return y, x.grad


def calls(program) -> list[CudaCall]:
    out = program()
    plan = kernel_plan(list(out) if isinstance(out, tuple) else [out])
    found = [c for c in (launch_call(launch, "cuda") for launch in plan.launches) if c is not None]
    assert found, "the program compiled to no CUDA kernel"
    return found


@pytest.fixture(scope="module")
def include_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlx_include")
    stub = root / "mlx" / "backend" / "cuda" / "device" / "utils.cuh"
    stub.parent.mkdir(parents=True)
    stub.write_text(MLX_UTILS)
    return root


def nvcc_compile(sources: list[str], include_dir: Path, work: Path) -> None:
    """Compile the kernels as one translation unit each, all at once (nvcc -arch=sm_90 -c)."""
    procs = []
    for i, src in enumerate(sources):
        path = work / f"k{i}.cu"
        path.write_text(src)
        procs.append((path, subprocess.Popen(
            [NVCC, "-arch=sm_90", "-std=c++17", "-c", "-Werror", "all-warnings", "-diag-suppress", "177,186",
             f"-I{include_dir}", str(path),
             "-o", str(path.with_suffix(".o"))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    errors = [f"{p}:\n{proc.communicate()[0]}" for p, proc in procs if proc.wait() != 0]
    assert not errors, "\n".join(errors)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_every_canonical_kernel_compiles_with_nvcc(include_dir, tmp_path):
    every = [c for p in PROGRAMS.values() for c in calls(p)]
    # standalone: what runtime/nvrtc.py compiles (no MLX header); assemble: MLX's JIT path (the
    # fallback without NVRTC), checked on kernels of each template and the integer helpers
    jit = [c for p in ("softmax", "int_division") for c in calls(PROGRAMS[p])]
    nvcc_compile([together(every)] + [assemble(c) for c in jit], include_dir, tmp_path)


def together(every: list[CudaCall]) -> str:
    """The standalone sources as one translation unit (one nvcc run instead of one per kernel):
    each in a namespace of its own, so the helpers each header defines do not collide; the
    headers' includes are guarded, so including them first at file scope is what NVRTC sees."""
    first = "\n".join(line for line in standalone(every[0]).splitlines() if line.startswith("#include"))
    # (renamed: the by-value variant of a kernel is a module of its own at run time, not here)
    scalars = [dataclasses.replace(c, name=c.name + "_v") for c in calls(PROGRAMS["f64_scalar"]) if by_value(c)]
    return first + "\n" + "\n".join(f"namespace k{i} {{\n{standalone(c, by_value(c) if i >= len(every) else frozenset())}}}\n"
                                     for i, c in enumerate(every + scalars))


def by_value(call: CudaCall) -> frozenset[str]:
    """The 1-element float32 inputs (Python scalars) of `call`, as the cuda backend passes them."""
    return frozenset(n for n, s, d in zip(call.input_names, call.input_shapes, call.input_dtypes)
                     if s == (1,) and d is D.float32)


def test_standalone_source_is_named_for_the_precompiled_launch():
    (call,) = calls(PROGRAMS["softmax"])
    text = standalone(call)
    assert f'extern "C" __global__ void __launch_bounds__({call.threadgroup[0]}) {call.name}(' in text and "mlx/backend" not in text
    assert text.endswith(call.source + "\n}\n") and call.header in text
    (call, *_) = [c for c in calls(PROGRAMS["f64_scalar"]) if by_value(c)]
    names = [n for n in call.input_names if n in by_value(call)]
    text = standalone(call, frozenset(names))
    start = text.index(f" {call.name}(")
    signature = text[start:text.index(") {", start)]
    # pointers first (inputs, outputs), then the scalars by value, each read through a local array
    assert signature.endswith(", ".join(f"float {n}_value" for n in names).replace(", ", ",\n    "))
    assert all(f"const float {n}[1] = {{{n}_value}};" in text and f"float* {n}" not in signature for n in names)


def test_standalone_kernel_is_bounded_by_its_group():
    """Each kernel compiled ahead declares the group it is launched with (__launch_bounds__), so
    NVRTC keeps its registers within what that group may hold: without it the 1024-thread rows kernel
    of BatchNorm's backward failed cuLaunchKernel ("too many resources requested") on an H200."""
    every = calls(PROGRAMS["channel_rows"])
    assert max(c.threadgroup[0] for c in every) == 1024
    for c in every:
        threads = c.threadgroup[0] * c.threadgroup[1] * c.threadgroup[2]
        assert f"__global__ void __launch_bounds__({threads}) {c.name}(" in standalone(c)


@pytest.mark.parametrize("name", ["pointwise_chain", "row_sum", "softmax"])
def test_golden_source(name):
    (call,) = calls(PROGRAMS[name])
    text = assemble(call)
    path = GOLDEN / f"{name}.cu"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"CUDA source of {name} changed; review, then UPDATE_GOLDEN=1"


def test_launch_shape_and_buffers():
    (call,) = calls(PROGRAMS["softmax"])
    # rows of 40: one warp per row, the 6 rows in one block; the grid counts threads
    assert call.threadgroup == (6 * 32, 1, 1) and call.grid == (6 * 32, 1, 1)
    assert call.input_dtypes == (D.float32,) and call.output_shapes == ((240,),)
    (call,) = calls(PROGRAMS["pointwise_chain"])
    assert call.grid == (256, 1, 1) and call.threadgroup == (256, 1, 1)    # 4 elements per thread
    assert "geometry threads=256 groups=1 rows=1 per_thread=4" in call.source
    long_softmax = calls(PROGRAMS["long_rows"])[0]
    assert long_softmax.threadgroup == (1024, 1, 1) and long_softmax.grid == (3 * 1024, 1, 1)
    assert function_name(call) == "custom_kernel_" + call.name


def test_float64_is_refused_naming_the_op():
    """MLX's CUDA build runs no float64 on the GPU; Python scalars (0-d float64) are read as float32."""
    with pytest.raises(TypeError, match="exp: dtype float64 is not supported on the cuda backend"):
        calls(lambda: t((4,), np.float64).exp())
    assert all(D.float64 not in c.input_dtypes for c in calls(PROGRAMS["f64_scalar"]))


def test_dialect_spells_cuda():
    src = "\n".join(assemble(c) for c in calls(PROGRAMS["argmax"]) + calls(PROGRAMS["bfloat16"])
                    + calls(PROGRAMS["long_rows"]) + calls(PROGRAMS["pointwise_chain"]))
    for token in ("__shfl_down_sync", "__shfl_xor_sync", "__syncthreads();", "__shared__", "blockIdx.x",
                  "__nv_bfloat16", "__bfloat162float", "erff(", "#pragma unroll", "reinterpret_cast<const uint4*>"):
        assert token in src, token
    assert "simd_" not in src and "threadgroup_barrier" not in src and "metal::" not in src
    assert CUDA.expr("maximum", D.float64, ["a", "b"]) == "lt_max(a, b)"
    assert CUDA.expr("exp", D.float32, ["a"]) == "expf(a)" and CUDA.expr("exp", D.float64, ["a"]) == "exp(a)"


def test_integer_division_gets_an_error_flag_output():
    call = calls(PROGRAMS["int_division"])[0]
    assert call.output_names[-1] == "lt_err" and call.output_dtypes[-1] is D.int32 and call.init_value == 0
    assert "int32_t* lt_err) {" in assemble(call)


def test_assemble_matches_the_runtime_signature_rules():
    body = "y[0] = x[0] + N + x_shape[0];"
    call = CudaCall("k", ("x", "s"), ("y",), body, "// h\n", ((4,), ()), (D.float16, D.int64),
                    ((4,),), (D.bfloat16,), (4, 1, 1), (4, 1, 1), template=(("N", 3), ("B", True)))
    src = assemble(call)
    assert "__global__ void custom_kernel_k_3_t(\n    const __half* x,\n    const __grid_constant__ Shape x_shape,\n" \
           "    const int64_t* s,\n    __nv_bfloat16* y) {\n  constexpr int N = 3;\n  constexpr bool B = true;\n" in src
    assert src.endswith(body + "\n}\n\n} // namespace mlx::core::cu\n") and "// h\nnamespace mlx::core::cu {" in src
    with pytest.raises(ValueError, match="at least one output"):
        CudaCall("k", (), (), body, "", (), (), (), (), (1, 1, 1), (1, 1, 1))
