"""lazytorch.nn.functional: the registry's nn ops (those marked `nn: true` in
lazytorch/ir/registry/*.yaml), installed here by lazytorch/__init__.py.  A name missing here raises
"module 'lazytorch.nn.functional' has no attribute ..."."""


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """torch's mapping of the deprecated size_average / reduce arguments onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"
