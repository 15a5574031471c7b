"""Code generation: kernel IR (kernel_ir.py), lowering from plan launches (lower.py), dialect
tables (dialects.py) and rendering through the jinja2 templates in shaders/ (render.py)."""

# The dialect tables first: dialects.py registers the Metal and CUDA tables (which build on its C
# table) at its end, so importing any dialect module starts from a complete base table.
from . import dialects  # noqa: E402,F401
