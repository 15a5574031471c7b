"""Packaging beyond what pyproject.toml can say: the kernel templates ship inside the package,
and the Tensor API's hottest build has a C version.

The repository keeps its templates in the top-level shaders/ (the documented place to edit them);
the wheel maps that folder to the package `lazytorch.shaders` (package-dir), so an installed
lazytorch finds them beside its code (codegen/render.py::shader_dir).

lazytorch.ir._fastpath (ir/_fastpath.c) builds `tensor <op> number` without a Python frame.  It
is optional: where it does not compile (no C compiler or Python headers) the install goes on and
ir/build.py uses its Python version, which computes the same.

lazytorch.runtime._rows (runtime/_rows.c) is the cpu backend's float32 product for linear layers
on few rows (AVX-512, chosen at run time).  Optional too: without it products call the BLAS.

lazytorch.runtime._launch (runtime/_launch.c) makes the cpu executor's calls of kernels and its
packing of scalars without ctypes.  Optional: without it runtime/cpu.py uses ctypes and struct.
"""
from setuptools import Extension, find_namespace_packages, setup

setup(
    packages=find_namespace_packages(include=["lazytorch", "lazytorch.*"], exclude=["*.__pycache__"])
    + ["lazytorch.shaders"],
    package_dir={"lazytorch.shaders": "shaders"},
    package_data={"lazytorch": ["ir/registry/*.yaml"], "lazytorch.shaders": ["*.j2", "*.h"]},
    ext_modules=[Extension("lazytorch.ir._fastpath", ["lazytorch/ir/_fastpath.c"], optional=True),
                 Extension("lazytorch.runtime._rows", ["lazytorch/runtime/_rows.c"], optional=True),
                 Extension("lazytorch.runtime._launch", ["lazytorch/runtime/_launch.c"], optional=True)],
)
