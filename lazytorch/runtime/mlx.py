"""The metal and cuda backends: one MLX backend, parametrised by its kernel factory.

Both launch generated kernels through MLX's custom-kernel API (`mx.fast.metal_kernel` on Apple
silicon, `mx.fast.cuda_kernel` with MLX's CUDA build on an NVIDIA GPU) and hold their buffers as
MLX arrays.  The kernels come from codegen/gpu.py::launch_call (the same MlxCall metal-emu runs);
a `KernelFactory` row says what differs: the target, how to check MLX can run it, the factory
function's extra arguments, and whether library launches (matmul) run as MLX calls (`mx.matmul`,
`mx.addmm` with a linear layer's bias: `library_launch`; metal-emu runs the same calls on MLX's CPU).
Float64 is refused on both (no doubles on the GPU); 0-d float64 Python scalars are read as float32.
"""
from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..codegen.gpu import ERROR_FLAG, check_dtypes, launch_call, scalar_dtype
from ..codegen.mlx_call import MlxCall
from ..ir import dtypes as D
from ..ir import views as V
from ..ir.dtypes import DType
from .backend import Backend, Buffer, LaunchFn, negative_zero, scalar_key, to_float32
from .caches import LRU
from .reference import run_node
from .executor import DeferredCheck, PlanExecutor, kernel_error
from . import nvrtc


@functools.lru_cache(maxsize=1)
def _mx():
    # MLX multiplies float32 with TF32 on CUDA unless told not to (relative error ~1e-3 where torch
    # computes full float32); it reads MLX_ENABLE_TF32 once, at its first matmul, so the default is
    # set before lazytorch first hands MLX anything (metal-emu's library launches included; a
    # user's own setting wins)
    os.environ.setdefault("MLX_ENABLE_TF32", "0")
    import mlx.core as mx
    return mx


def mx_dtype(dt: DType):
    return getattr(_mx(), {"bool": "bool_"}.get(dt.name, dt.name))


class KernelFactory(NamedTuple):
    target: str                                  # codegen target ("metal", "cuda")
    available: Callable[[Any], bool]             # mx -> can this host run it
    unavailable: str                             # the error when it cannot
    make: Callable[[Any], Callable]              # mx -> mx.fast.<kind>_kernel
    extra: Callable[[MlxCall], dict]             # further keyword arguments of make(...)
    matmul_on_device: bool                       # library launches as MLX calls (library_launch)
    # kernels compiled ahead, a plan's at once, cached on disk (runtime/nvrtc.py), when it can run
    ahead: Callable[[], bool] = lambda: False


def kernel_arguments(call: MlxCall, factory: "KernelFactory | None" = None) -> dict[str, Any]:
    """Keyword arguments of mx.fast.metal_kernel / cuda_kernel for `call`."""
    args = dict(name=call.name, input_names=list(call.input_names), output_names=list(call.output_names),
                source=call.source, header=call.header, ensure_row_contiguous=call.ensure_row_contiguous)
    return {**args, **(factory.extra(call) if factory else {})}


def call_arguments(call: MlxCall, inputs: Sequence[Any]) -> dict[str, Any]:
    """Keyword arguments of the kernel call (inputs are MLX arrays of the declared shapes)."""
    return dict(inputs=list(inputs), output_shapes=[tuple(s) for s in call.output_shapes],
                output_dtypes=[mx_dtype(d) for d in call.output_dtypes], grid=tuple(call.grid),
                threadgroup=tuple(call.threadgroup), init_value=call.init_value,
                template=[(n, mx_dtype(v) if isinstance(v, DType) else v) for n, v in call.template] or None)


METAL = KernelFactory(
    "metal", lambda mx: bool(mx.metal.is_available()),
    "the metal backend needs Apple silicon with Metal; on other hosts use 'metal-emu' (the same kernels "
    "on the CPU)", lambda mx: mx.fast.metal_kernel, lambda call: {}, matmul_on_device=True)
CUDA = KernelFactory(
    "cuda", lambda mx: hasattr(mx, "cuda") and bool(mx.cuda.is_available()),
    "the cuda backend needs an NVIDIA GPU with its driver, and NVRTC and cuBLAS (the nvidia pip packages "
    "of CUDA 13, e.g. through mlx[cuda13]) or MLX's CUDA build; on other hosts use 'cpu' (or "
    "lt.show_kernels(..., backend='cuda') to see the kernels)",
    lambda mx: mx.fast.cuda_kernel, lambda call: {"shared_memory": call.shared_memory}, matmul_on_device=True,
    ahead=lambda: os.environ.get("LAZYTORCH_CUDA_JIT", "ahead") == "ahead" and nvrtc.available())

# The arrays of the last run started on the GPU: MLX runs one GPU stream in order, so waiting for
# them waits for everything started before (lt.cuda.synchronize).
_LAST_SUBMITTED: list = []


def synchronize() -> None:
    """Waits until all work started on the GPU (`submit`) has finished."""
    arrays = list(_LAST_SUBMITTED)
    _LAST_SUBMITTED.clear()
    _mx().eval(arrays)


def submit(buffers: Sequence[Buffer]) -> None:
    """Starts the GPU on a run's outputs without waiting, as torch launches its kernels: MLX
    evaluates lazily, so otherwise nothing would run before a host read asks for it.  Outputs no
    launch wrote (a lazy buffer never made) stay unmade."""
    arrays = [b.array for b in buffers
              if isinstance(b, MlxBuffer) and not (isinstance(b, LazyBuffer) and b._array is None)]
    if arrays:
        _mx().async_eval(arrays)
        _LAST_SUBMITTED[:] = arrays


# mx.matmul on the GPU computes these in the precision torch does (half types accumulate in f32)
MATMUL_DTYPES = (D.float16, D.bfloat16, D.float32)


class MlxBuffer:
    """A buffer: an MLX array that a launch may replace (MLX kernels return new arrays)."""

    def __init__(self, array, dtype: DType):
        self.array = array
        self.dtype = dtype

    def __array__(self, dtype=None, copy=None):
        arr = self.array.view(_mx().uint16) if self.dtype is D.bfloat16 else self.array
        host = np.array(arr)
        return host if dtype is None else host.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def copy_from_host(self, value: np.ndarray) -> None:
        self.array = to_mx(value, self.dtype)


class LazyBuffer(MlxBuffer):
    """A buffer whose MLX array is made on first read (`_make`) unless a launch sets it first."""
    _array = None

    @property
    def array(self):
        if self._array is None:
            self._array = self._make()
        return self._array

    @array.setter
    def array(self, value) -> None:
        self._array = value


class EmptyBuffer(LazyBuffer):
    """An output before its launch writes it.  MLX launches return new arrays, so building zeros
    for every output of every run (an MLX op each, never evaluated) is wasted host time; zeros are
    made only if something reads the buffer unwritten (a zero-size output no kernel launches for)."""

    def __init__(self, shape: tuple[int, ...], dtype: DType):
        self._shape, self.dtype = shape, dtype

    def _make(self):
        return _mx().zeros(self._shape, dtype=mx_dtype(self.dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape


def to_mx(arr: np.ndarray, dtype: DType):
    mx = _mx()
    a = mx.array(np.ascontiguousarray(arr).reshape(np.shape(arr)))   # (ascontiguousarray makes 0-d 1-d)
    return a.view(mx.bfloat16) if dtype is D.bfloat16 else a


class MlxBackend(Backend):
    library_bias = True          # fusion hands a linear layer's bias to the GEMM (mx.addmm)
    guarded_reads = True         # (passes/guard.py)
    device_memory = True         # leaves keep their uploaded MLX arrays (realize.keep_uploads)
    library_ops = frozenset({"scaled_dot_product_attention"})    # mx.fast's fused attention

    def __init__(self, name: str, factory: KernelFactory) -> None:
        mx = _mx()
        if not factory.available(mx):
            raise RuntimeError(factory.unavailable)
        self.name, self.factory = name, factory
        self._make = factory.make(mx)
        self._ahead = factory.ahead()
        self._kernels = LRU(f"{name} kernels", 1024)

    def from_host(self, arr: np.ndarray) -> Buffer:
        dtype = D.bfloat16 if arr.dtype == np.uint16 else D.from_numpy(arr.dtype)
        return MlxBuffer(to_mx(arr, dtype), dtype)

    def adopt(self, buf: Buffer) -> Buffer:
        return buf if isinstance(buf, MlxBuffer) else self.from_host(np.asarray(buf))

    def any_flag_set(self, flags: Sequence[Any]) -> bool:
        mx = _mx()     # one device-to-host read for all of a run's flags
        return bool((flags[0] if len(flags) == 1 else mx.any(mx.stack(flags))).item())

    def synchronize(self) -> None:
        synchronize()

    def empty(self, shape: tuple[int, ...], dtype: DType) -> Buffer:
        return EmptyBuffer(shape, dtype)

    def scalar(self, value: Any, dtype: DType) -> Buffer:
        return MlxBuffer(_scalar_array(value, scalar_dtype(dtype)), scalar_dtype(dtype))

    def fast_scalar(self, dtype: DType) -> Callable[[Any, DType], Buffer] | None:
        """Where kernels are compiled ahead, a Python number the launches read stays on the host
        and goes to kernels by value (ScalarBuffer); None: an MLX array (Backend.scalar)."""
        dtype = scalar_dtype(dtype)
        if not self._ahead or dtype not in BY_VALUE:
            return None
        return lambda value, _dtype: ScalarBuffer(value, dtype)

    def prepare(self, plan) -> PlanExecutor:
        """The plan's executor.  Where kernels are compiled ahead (cuda with NVRTC), every kernel of
        the plan not compiled yet is compiled first, all at once, each taking the plan's Python
        scalars by value (the params fast_scalar keeps on the host)."""
        if not self._ahead:
            return _replayed(PlanExecutor(self, plan))
        ahead = nvrtc.plan_calls(plan, BY_VALUE)
        todo = {(c.name, pos): (c, pos) for c, pos in ahead.values() if min(c.grid) > 0 and (c.name, pos) not in self._kernels}
        made = dict(zip(todo, _compile_ahead(list(todo.values()))))

        def compile_launch(launch, plan) -> LaunchFn | None:
            if id(launch) not in ahead:
                return self.compile_launch(launch, plan)
            call, by_value = ahead[id(launch)]
            kernel = self._kernels.get_or_make(
                (call.name, by_value), lambda: made.get((call.name, by_value)) or _compile_ahead([(call, by_value)])[0])
            return self._launch(launch, call, kernel, by_value)
        return _replayed(PlanExecutor(self, plan, compile_launch))

    def compile_launch(self, launch, plan) -> LaunchFn | None:
        if launch.kind == "library":
            check_dtypes(launch, self.factory.target)
            return _device_library_launch(launch) if self.factory.matmul_on_device else None
        if launch.kind == "reference":
            check_dtypes(launch, self.factory.target)
            return device_reference_launch(launch)
        call = launch_call(launch, self.factory.target)
        if call is None:
            return None
        return self._launch(launch, call, self._kernels.get_or_make(
            call.name, lambda: self._make(**kernel_arguments(call, self.factory))))

    def _launch(self, launch, call: MlxCall, kernel: Callable | None, by_value: tuple[int, ...] = ()) -> LaunchFn:
        """Runs `kernel` (`call` as MLX compiled it, or compiled ahead): reads at the `by_value`
        positions go to it as scalars (compiled ahead with them by value), the others as arrays."""
        if min(call.grid) == 0:
            return lambda reads, writes: None
        flag = call.output_names[-1] == ERROR_FLAG
        arrays = [i for i in range(len(call.input_names)) if i not in by_value]
        kinds = [BY_VALUE[call.input_dtypes[i]] for i in by_value]
        fixed = call_arguments(call, [])            # all but the inputs: the same on every run
        # The kernels index flat buffers, so MLX gets the arrays as they are and makes the outputs
        # in the shapes of the launch's writes: no reshape of every input and output (an MLX
        # operation each, evaluated on every run).
        fixed["output_shapes"] = [tuple(b.shape) for _, b in launch.writes] + fixed["output_shapes"][len(launch.writes):]

        def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]):
            arguments = dict(fixed, inputs=[reads[i].array for i in arrays])
            if by_value:
                arguments["scalars"] = [kind(_host_value(reads[i])) for kind, i in zip(kinds, by_value)]
            outs = kernel(**arguments)
            for w, o in zip(writes, outs):
                w.array = o
            if flag:                            # read after the run's last launch (DeferredCheck)
                return DeferredCheck(_mx().any(outs[-1]), lambda: kernel_error(launch))
        return fn


class MxCompiledPlan:
    """A plan replayed through `mx.compile`: the first run traces the launches into an MLX graph,
    later runs hand MLX the input arrays and skip the Python of every launch (the host cost of
    building a GPU call, ~10 us per custom kernel on cuda, is paid once).  A trace freezes the
    plan's Python scalars (kernels compiled ahead take them by value), so a trace is kept per tuple
    of scalar values -- a model's constants repeat call after call -- up to MAX_TRACES; values
    beyond those run uncompiled.  The first run of a plan runs uncompiled (a first call should not
    pay for a trace it may never reuse).  Deferred error flags come out as extra outputs; when one is set
    the plan runs again uncompiled, which raises that launch's own error.  A trace that fails (a
    launch reading a value on the host) turns the replay off for good."""

    MAX_TRACES = 8

    def __init__(self, executor: PlanExecutor, replay: bool = True):
        self.executor, self.plan = executor, executor.plan
        scalar = [p.slot in self.plan.scalar_slots for p in self.plan.params]
        self.scalars = [k for k, s in enumerate(scalar) if s]
        self.arrays = [k for k, s in enumerate(scalar) if not s]
        self._traces: dict[tuple, Callable] | None = {} if replay else None   # scalar values -> the compiled run
        self.traced = 0                                     # traces made (a statistic for tests)
        self._first = True

    def _trace(self, values: tuple) -> Callable:
        ex, n = self.executor, len(self.plan.params)
        dtypes = [ex.params[k][2] for k in self.arrays]

        def pure(*arrays):
            self.traced += 1
            args: list = [None] * n
            for k, a, dtype in zip(self.arrays, arrays, dtypes):
                args[k] = MlxBuffer(a, dtype)
            for k, v in zip(self.scalars, values):
                args[k] = v
            checks: list = []
            outs = ex.run(args, checks)
            return [o.array for o in outs] + [c.flag for c, _ in checks]
        return _mx().compile(pure)

    def run(self, args: Sequence[Any]) -> list[Buffer]:
        outs = self._run(args)
        submit(outs)
        return outs

    def _run(self, args: Sequence[Any]) -> list[Buffer]:
        ex, traces = self.executor, self._traces
        if traces is None or self._first:
            self._first = False
            return ex.run(args)
        values = tuple([args[k] for k in self.scalars])
        key = tuple([scalar_key(v) for v in values])
        try:
            fn = traces.get(key)
        except TypeError:               # (an unhashable scalar value)
            return ex.run(args)
        if fn is None and any(negative_zero(v) for v in values):
            return ex.run(args)         # (mx.compile folds a constant -0.0 into 0.0: 1 / (x * s))
        if fn is None:
            if len(traces) >= self.MAX_TRACES:
                return ex.run(args)
            fn = traces[key] = self._trace(values)
        params = ex.params
        try:
            arrays = fn(*[params[k][1](args[k], params[k][2]).array for k in self.arrays])
        except Exception:               # (e.g. MLX refuses evaluation inside a trace); a real
            self._traces = None         # error is raised again by the plain run
            return ex.run(args)
        n = len(self.plan.outputs)
        if len(arrays) > n and ex.backend.any_flag_set(arrays[n:]):
            ex.run(args)                # raises the launch's own error
            raise AssertionError("a compiled run set an error flag that the uncompiled run did not")
        return [MlxBuffer(a, o.dtype) for a, o in zip(arrays, self.plan.outputs)]


def _replayed(executor: PlanExecutor) -> MxCompiledPlan:
    """The executor in a replay that starts the GPU at the end of each run (`submit`), replayed
    through mx.compile where a run is a function of its arrays and scalars (no host launches, no
    zero-size buffers, no launch tracing)."""
    plan = executor.plan
    # (MLX's compile crashed the process on zero-size arrays on cuda: such plans run plainly)
    empty = any(0 in b.shape for launch in plan.launches for _, b in (*launch.reads, *launch.writes))
    plain = not plan.launches or executor.host_launches or executor.traced or empty
    return MxCompiledPlan(executor, replay=not plain)


# Scalar dtypes a kernel compiled ahead takes by value, and how a Python number becomes the value MLX
# passes (precompiled_cuda_kernel's scalars: bool, or float as float32 -- which MLX accepts only
# when the float is exactly a float32, so it is rounded here as Backend.scalar rounds it).
BY_VALUE: dict[DType, Callable[[Any], Any]] = {D.float32: to_float32, D.bool_: bool}


class ScalarBuffer(LazyBuffer):
    """A Python number a plan reads as a scalar param, kept on the host: kernels compiled ahead
    take it by value; anything else that reads it gets an MLX array, made on first use."""

    def __init__(self, value: Any, dtype: DType):
        self.value, self.dtype = value, dtype

    def _make(self):
        return _scalar_array(self.value, self.dtype)


def _scalar_array(value: Any, dtype: DType):
    return to_mx(D.from_compute(np.asarray(value), dtype).reshape(()), dtype)


def _host_value(buf: Buffer) -> Any:
    return buf.value if isinstance(buf, ScalarBuffer) else buf.array.item()


def _compile_ahead(calls: list[tuple[MlxCall, tuple[int, ...]]]) -> list[Callable]:
    """Kernel callables of (call, by-value input positions) pairs, compiled together by NVRTC."""
    return [_precompiled(c, cubin) for (c, _), cubin in zip(calls, nvrtc.compile_calls(calls))]


def _precompiled(call: MlxCall, cubin: bytes) -> Callable:
    """A kernel callable as mx.fast.cuda_kernel's are, launching `cubin` (the call's standalone
    source compiled by NVRTC) through mx.fast.precompiled_cuda_kernel."""
    fixed = dict(name=call.name, compiled_source=cubin, shared_memory=call.shared_memory,
                 ensure_row_contiguous=call.ensure_row_contiguous)
    launch = _mx().fast.precompiled_cuda_kernel

    def kernel(*, template=None, scalars=(), **arguments):     # (template values: constants in the source)
        return launch(**fixed, scalars=list(scalars), **arguments)
    return kernel


def library_launch(launch) -> Callable[[Sequence[Any]], list[Any]] | None:
    """A library launch as MLX calls on MLX arrays (reads -> writes), or None for the host path.

    The launch is views, one float matmul and, where fusion attached it (library_bias), a row-bias
    add: a linear layer's (..., M, K) @ (K, N) [+ bias] runs as one 2-D GEMM over its folded rows,
    through `mx.addmm` when it carries the bias (the GEMM's C operand: no separate pass over the
    output), else `mx.matmul`; a batched (attention) product is one batched mx.matmul.  Views (a
    transposed key, heads split out of a fused qkv buffer) are mx.as_strided views of the buffers.
    1-d and size-0 operands run on the host (an early GPU run crashed there, not yet isolated)."""
    if launch.nodes[-1].op == "scaled_dot_product_attention":
        return _attention_launch(launch)
    views = [n for n in launch.nodes if n.op == "view"]
    computed = [n for n in launch.nodes if n.op != "view"]
    if [n.op for n in computed] not in (["matmul"], ["matmul", "add"]):
        return None
    mm, *add = computed
    bias = next((i for i in add[0].inputs if i is not mm), None) if add else None
    if any(n.dtype not in MATMUL_DTYPES or len(n.shape) < 2 or 0 in n.shape
           for n in (mm, *mm.inputs, *views) if n is not bias):
        return None
    mx = _mx()
    x, w = mm.inputs
    flat = x.ndim > 2 and math.prod(w.shape[:-2]) == 1
    out_shape = tuple(mm.shape)

    def product(a, b, c):
        if flat:
            a, b = a.reshape(-1, a.shape[-1]), b.reshape(b.shape[-2:])
        out = mx.matmul(a, b) if c is None else mx.addmm(c.reshape(-1) if flat else c, a, b)
        return out.reshape(out_shape) if flat else out      # (a fresh, row-contiguous array)

    def fn(reads: Sequence[Any]) -> list[Any]:
        env = _views(launch, views, reads)
        return [product(env[id(x)], env[id(w)], None if bias is None else env[id(bias)])]
    return fn


def _views(launch, views, reads: Sequence[Any]) -> dict[int, Any]:
    """id(node) -> MLX array of every value the launch reads, its view nodes included."""
    env = {id(node): arr for (node, _), arr in zip(launch.reads, reads)}
    for node in views:
        env[id(node)] = _view(node, env[id(node.inputs[0])])
    return env


def _view(node, base):
    """A view node over its (contiguous) buffer as an MLX strided view (a clamped view, whose reader
    masks what it reads outside the buffer: a gather of the clipped indices; ir/build.py)."""
    spec, flat = node.attrs["view"], base.reshape(-1)
    if "clamp" in node.attrs:
        index = np.clip(V.storage_index(spec), 0, max(flat.size - 1, 0)).astype(np.int32)
        return _mx().take(flat, _mx().array(index)).reshape(spec.shape)
    return _mx().as_strided(flat, spec.shape, spec.strides, spec.offset)


def _attention_launch(launch) -> Callable[[Sequence[Any]], list[Any]] | None:
    """scaled_dot_product_attention kept whole (only in the form fused_attention_form accepts: no
    mask but a causal one with L == S, no dropout) as one mx.fast.scaled_dot_product_attention."""
    *views, node = launch.nodes
    if any(v.op != "view" for v in views) or any(i.dtype not in MATMUL_DTYPES for i in node.inputs):
        return None
    mx = _mx()
    q, k, v = node.inputs
    scale = node.attrs["scale"]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    mask = "causal" if node.attrs["is_causal"] else None

    def fn(reads: Sequence[Any]) -> list[Any]:
        env = _views(launch, views, reads)
        out = mx.fast.scaled_dot_product_attention(env[id(q)], env[id(k)], env[id(v)], scale=scale, mask=mask)
        return [mx.contiguous(out)]
    return fn


def _embedding(node, indices, weight):
    """Rows of `weight` (an index outside 0..rows-1 is torch's IndexError, as on the host)."""
    return _mx().take(weight, indices.reshape(-1), axis=0)


def _gather(node, x, index):
    """x along dim at index, over the part of x the index covers (negative indices are out of range)."""
    mx, dim = _mx(), node.attrs["dim"]
    x1, idx = mx.atleast_1d(x), mx.atleast_1d(index)
    window = tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(idx.shape))
    return mx.take_along_axis(x1[window], idx, axis=dim)


# Index checks of the device reference ops: op -> the elements out of range (node, *inputs).  The
# flag stays on the device and is read once after the run (DeferredCheck); when it is set the host
# implementation runs on the inputs and raises torch's error for them.
INDEX_CHECKS: dict[str, Callable] = {
    "embedding": lambda node, indices, weight: (indices < 0) | (indices >= weight.shape[0]),
    "gather": lambda node, x, index: (index < 0) | (index >= (x.shape[node.attrs["dim"]] if x.ndim else 1)),
}


def _host_error(node, inputs) -> BaseException:
    """Runs `node` on the host, which raises torch's error for its out-of-range index."""
    run_node(node, [np.asarray(MlxBuffer(a, i.dtype)) for a, i in zip(inputs, node.inputs)])
    return AssertionError(f"{node.op}: the device found an index out of range, the host none")


def _cat(node, *arrays):
    # the builder cast every input to the result dtype, so storage forms concatenate as they are
    return _mx().concatenate(arrays, axis=node.attrs["dim"])


def _iota(node):
    """The int64 index along dim, broadcast (an iota inlined into a reference launch: a traced
    step's positions read by the position embedding)."""
    mx, size, dim = _mx(), node.attrs["size"], node.attrs["dim"]
    ramp = mx.arange(size[dim], dtype=mx.int64).reshape([n if k == dim else 1 for k, n in enumerate(size)])
    return mx.broadcast_to(ramp, size)


def _scalar(node):
    return _mx().array(node.value, dtype=mx_dtype(node.dtype))


def _full(node, value):
    """value (a 0-d array: a constant or a runtime scalar) over the node's shape (a fill joined by cat)."""
    return _mx().broadcast_to(value.astype(mx_dtype(node.dtype)), node.shape)


# Reference launches the MLX backends run as MLX calls on the device instead of on the host (a host
# launch copies every buffer it reads to host memory and its results back: a model's embedding
# table, 47 MB for MiniLM, on every call).  op -> implementation(node, *input arrays).
DEVICE_REFERENCE: dict[str, Callable] = {"embedding": _embedding, "gather": _gather, "cat": _cat, "view": _view,
                                         "iota": _iota, "scalar": _scalar, "full": _full}


def device_reference_launch(launch) -> LaunchFn | None:
    """A reference launch as MLX calls over MlxBuffers, when every node has a DEVICE_REFERENCE
    entry and reads only the launch's buffers and earlier nodes; else None (the host runs it)."""
    known = {id(n) for n, _ in launch.reads}
    for node in launch.nodes:
        if node.op not in DEVICE_REFERENCE or any(id(i) not in known for i in node.inputs):
            return None
        known.add(id(node))

    checked = [n for n in launch.nodes if n.op in INDEX_CHECKS]

    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> DeferredCheck | None:
        mx = _mx()
        env = {id(node): r.array for (node, _), r in zip(launch.reads, reads)}
        for node in launch.nodes:
            env[id(node)] = DEVICE_REFERENCE[node.op](node, *(env[id(i)] for i in node.inputs))
        for (node, _), w in zip(launch.writes, writes):
            w.array = _shaped(env[id(node)], w.shape)
        if not checked:
            return None
        inputs = {id(n): [env[id(i)] for i in n.inputs] for n in checked}
        flags = [mx.any(INDEX_CHECKS[n.op](n, *inputs[id(n)])) for n in checked]

        def error() -> BaseException:
            for n, f in zip(checked, flags):
                if f.item():
                    return _host_error(n, inputs[id(n)])
            return AssertionError(f"{launch.name}: an index flag was set, but none of its checks")
        return DeferredCheck(flags[0] if len(flags) == 1 else mx.any(mx.stack(flags)), error)
    return fn


def _shaped(array, shape: tuple[int, ...]):
    """`array` in `shape`; a reshape (an MLX operation, evaluated on every run) only if it differs."""
    return array if tuple(array.shape) == shape else array.reshape(shape)


def _device_library_launch(launch) -> LaunchFn | None:
    """library_launch over MlxBuffers (the metal and cuda backends)."""
    run = library_launch(launch)
    if run is None:
        return None

    def fn(reads: Sequence[Buffer], writes: Sequence[Buffer]) -> None:
        (out,) = run([r.array for r in reads])
        writes[0].array = _shaped(out, writes[0].shape)
    return fn


def host_library_launch(launch) -> LaunchFn | None:
    """library_launch over numpy buffers, on MLX's default device: metal-emu runs the metal
    backend's library launches through the same MLX calls (on the CPU with mlx[cpu])."""
    run = library_launch(launch)
    if run is None:
        return None
    dtypes = [b.dtype for _, b in launch.reads]
    out_dtype = launch.writes[0][1].dtype

    def fn(reads: Sequence[np.ndarray], writes: Sequence[np.ndarray]) -> None:
        (out,) = run([to_mx(np.asarray(r), d) for r, d in zip(reads, dtypes)])
        np.copyto(writes[0], np.asarray(MlxBuffer(out, out_dtype)).reshape(writes[0].shape), casting="no")
    return fn


def MetalBackend() -> MlxBackend:       # noqa: N802  (a backend factory, named as the class was)
    return MlxBackend("metal", METAL)


def CudaBackend() -> MlxBackend:        # noqa: N802
    return MlxBackend("cuda", CUDA)
