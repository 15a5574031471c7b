"""Packaging beyond what pyproject.toml can say: the kernel templates ship inside the package.

The repository keeps its templates in the top-level shaders/ (the documented place to edit them);
the wheel maps that folder to the package `lazytorch.shaders` (package-dir), so an installed
lazytorch finds them beside its code (codegen/render.py::shader_dir).
"""
from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages(include=["lazytorch", "lazytorch.*"], exclude=["*.__pycache__"])
    + ["lazytorch.shaders"],
    package_dir={"lazytorch.shaders": "shaders"},
    package_data={"lazytorch": ["ir/registry/*.yaml"], "lazytorch.shaders": ["*.j2", "*.h"]},
)
