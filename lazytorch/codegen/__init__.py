"""Code generation: kernel IR (kernel_ir.py), lowering from plan launches (lower.py), dialect
tables (dialects.py) and rendering through the jinja2 templates in shaders/ (render.py)."""
