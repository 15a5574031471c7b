"""One launch of a generated GPU kernel through MLX (`mx.fast.metal_kernel` / `mx.fast.cuda_kernel`).

`MlxCall` is everything the runtime passes to MLX: name, buffer names, the kernel body, its header,
shapes and dtypes, grid (in threads) and threadgroup.  Each GPU target subclasses it only to name
its types (targets/metal.py: MetalCall, targets/cuda.py: CudaCall) and writes the full source MLX
compiles around the body (`assemble` in the target module).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from ..ir.dtypes import DType
from ..ir.errors import op_error

TemplateValue = Union[bool, int, DType]



def gpu_type_name(names: dict[DType, str], dtype: DType, op: str, target: str, why: str) -> str:
    """`names[dtype]`, the GPU target's spelling of a buffer dtype; a dtype it lacks (float64) is a
    TypeError naming `op`, why the target lacks it and the dtypes it has."""
    try:
        return names[dtype]
    except KeyError:
        raise op_error(TypeError, op, f"dtype {dtype.name} is not supported on {why}",
                       valid="cast to float32 first, or use the cpu backend "
                       f"({target} dtypes: {', '.join(d.name for d in names)})") from None


# MLX passes the grid as C ints.
MAX_GRID = 2**31 - 1


@dataclass(frozen=True)
class MlxCall:
    """Everything one launch passes to MLX's custom-kernel API and then to the kernel call."""
    name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    source: str                                 # the kernel body
    header: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[DType, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[DType, ...]
    grid: tuple[int, int, int]                  # in threads
    threadgroup: tuple[int, int, int]
    template: tuple[tuple[str, TemplateValue], ...] = ()
    ensure_row_contiguous: bool = True
    init_value: float | None = None             # fill every output with this before the launch
    shared_memory: int = 0                      # dynamic shared memory in bytes (CUDA only)

    target: ClassVar[str] = "gpu"

    @staticmethod
    def type_name(dtype: DType, op: str) -> str:    # the target's spelling of a buffer dtype
        raise NotImplementedError

    def __post_init__(self) -> None:
        for dt in self.input_dtypes + self.output_dtypes:
            self.type_name(dt, self.name)
        if not self.output_names:
            raise op_error(ValueError, self.name, f"a {self.target} kernel needs at least one output")
        if len(self.input_names) != len(self.input_shapes) or len(self.output_names) != len(self.output_shapes):
            raise op_error(ValueError, self.name, "names and shapes of the buffers differ in number")
        if any(g > MAX_GRID for g in self.grid):
            raise op_error(ValueError, self.name, f"grid {self.grid} exceeds the launch limit of "
                           f"{MAX_GRID} threads per dimension", valid="smaller tensors")
