"""Code generation: kernel IR (kernel_ir.py), lowering from plan launches (lower.py), one module
per target under targets/ (registered in targets/__init__.py), what the GPU targets share
(gpu.py, mlx_call.py), reductions (reductions.py) and rendering through the jinja2 templates in
shaders/ (render.py), with each kernel's header cut to the helpers it calls (helpers.py)."""
