"""Thin modules as data: each row of THIN names a torch.nn class, its constructor parameters in
torch's order with torch's defaults, and the nn.functional call its forward makes.  `make` turns a
row into a Module class with torch's constructor signature, attributes and repr; the maths stays in
the functional ops (one home per concept).  Modules with parameters or state of their own (PReLU,
InstanceNorm, the RNNs, the transformer layers) are written out in their own files."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..tensor import Tensor
from . import functional as F
from .functional import _legacy_reduction
from .layers import _ntuple
from .module import Module

REQUIRED = object()          # a constructor parameter without a default


@dataclass(frozen=True)
class Thin:
    name: str
    forward: Callable                                   # (module, *inputs) -> output
    params: tuple[tuple[str, object], ...] = ()         # positional-or-keyword, in torch's order
    kwonly: tuple[tuple[str, object], ...] = ()         # keyword-only (after torch's `*`)
    repr: str | None = None                             # extra_repr format over the attributes; None: k=v each
    convert: dict = field(default_factory=dict)         # attribute -> fn(value, values) run at construction
    buffers: tuple[str, ...] = ()                       # tensor options registered as buffers (loss weights)


def _init(spec: Thin):
    names = [k for k, _ in spec.params]
    defaults = dict(spec.params) | dict(spec.kwonly)

    def __init__(self, *args, **kwargs) -> None:
        Module.__init__(self)
        if len(args) > len(names):
            raise TypeError(f"{spec.name}.__init__() takes at most {len(names)} positional arguments "
                            f"but {len(args)} were given")
        values = dict(defaults)
        values.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in defaults:
                raise TypeError(f"{spec.name}.__init__() got an unexpected keyword argument '{k}'")
            if k in names[:len(args)]:
                raise TypeError(f"{spec.name}.__init__() got multiple values for argument '{k}'")
            values[k] = v
        missing = [k for k, v in values.items() if v is REQUIRED]
        if missing:
            raise TypeError(f"{spec.name}.__init__() missing required argument(s): {', '.join(missing)}")
        if "size_average" in values:                  # losses: torch keeps only `reduction`
            values["reduction"] = _legacy_reduction(values.pop("size_average"), values.pop("reduce"),
                                                    values["reduction"])
        for k, fn in spec.convert.items():
            values[k] = fn(values[k], values)
        for k, v in values.items():
            if k in spec.buffers:
                self.register_buffer(k, v)
            elif isinstance(v, Module):
                setattr(self, k, v)                   # a child module, as torch registers it
            else:
                object.__setattr__(self, k, v)
    return __init__


def _extra_repr(spec: Thin):
    names = [k for k, _ in spec.params + spec.kwonly if k not in ("size_average", "reduce")]
    shown = [k for k in names if k != "inplace"]
    # torch's activations show inplace only when it is set; rows whose format names it show it always
    add_inplace = "inplace" in names and "{inplace}" not in (spec.repr or "")

    def extra_repr(self) -> str:
        if spec.repr is not None:
            text = spec.repr.format(**{k: getattr(self, k) for k in names})
        else:
            text = ", ".join(f"{k}={getattr(self, k)}" for k in shown)
        if add_inplace and self.inplace:
            text = f"{text}, inplace=True" if text else "inplace=True"
        return text
    return extra_repr


def make(spec: Thin, base: type = Module, module: str = __name__) -> type:
    forward = spec.forward

    def fwd(self, *inputs, **kwargs):
        return forward(self, *inputs, **kwargs)
    return type(spec.name, (base,), {"__init__": _init(spec), "forward": fwd, "extra_repr": _extra_repr(spec),
                                     "__doc__": f"torch.nn.{spec.name}, forward through nn.functional.",
                                     "__module__": module})


# ---------------------------------------------------------------- the table
_INPLACE = ("inplace", False)
_LOSS = (("size_average", None), ("reduce", None), ("reduction", "mean"))


def _rrelu(m, x):
    return F.rrelu(x, m.lower, m.upper, m.training)


def _pad_rows(dims: int) -> list[Thin]:
    pairs = {"padding": lambda v, _: _ntuple(v, 2 * dims)}        # (left, right) per padded dim
    rows = [Thin(f"{kind}Pad{dims}d", lambda m, x, mode=mode: F.pad(x, m.padding, mode), (("padding", REQUIRED),),
                 repr="{padding}", convert=pairs)
            for kind, mode in (("Reflection", "reflect"), ("Replication", "replicate"), ("Circular", "circular"))]
    rows.append(Thin(f"ZeroPad{dims}d", lambda m, x: F.pad(x, m.padding, "constant", 0.0),
                     (("padding", REQUIRED),), repr="{padding}", convert=pairs))
    rows.append(Thin(f"ConstantPad{dims}d", lambda m, x: F.pad(x, m.padding, "constant", m.value),
                     (("padding", REQUIRED), ("value", REQUIRED)), repr="padding={padding}, value={value}",
                     convert=pairs))
    return rows


def _stride_default(v, values):
    return v if v is not None else values["kernel_size"]


def _max_pool(dims: int) -> Thin:
    name = f"max_pool{dims}d"
    return Thin(f"MaxPool{dims}d",
                lambda m, x: getattr(F, name)(x, m.kernel_size, m.stride, m.padding, m.dilation, ceil_mode=m.ceil_mode,
                                return_indices=m.return_indices),
                (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("dilation", 1),
                 ("return_indices", False), ("ceil_mode", False)),
                repr="kernel_size={kernel_size}, stride={stride}, padding={padding}, dilation={dilation}, "
                     "ceil_mode={ceil_mode}",
                convert={"stride": _stride_default})


THIN: list[Thin] = [
    # activations (inplace=True is accepted and shown; the result is computed out of place)
    Thin("ReLU", lambda m, x: F.relu(x), (_INPLACE,), repr=""),
    Thin("ReLU6", lambda m, x: F.hardtanh(x, 0.0, 6.0), (_INPLACE,), repr=""),
    Thin("GELU", lambda m, x: F.gelu(x, approximate=m.approximate), (("approximate", "none"),),
         repr="approximate={approximate!r}"),
    Thin("SiLU", lambda m, x: F.silu(x), (_INPLACE,), repr=""),
    Thin("Mish", lambda m, x: F.mish(x), (_INPLACE,), repr=""),
    Thin("Tanh", lambda m, x: F.tanh(x), repr=""),
    Thin("Sigmoid", lambda m, x: F.sigmoid(x), repr=""),
    Thin("Softmax", lambda m, x: F.softmax(x, m.dim), (("dim", None),)),
    Thin("LogSoftmax", lambda m, x: F.log_softmax(x, m.dim), (("dim", None),)),
    Thin("ELU", lambda m, x: F.elu(x, m.alpha), (("alpha", 1.0), _INPLACE)),
    Thin("LeakyReLU", lambda m, x: F.leaky_relu(x, m.negative_slope), (("negative_slope", 0.01), _INPLACE)),
    Thin("Hardswish", lambda m, x: F.hardswish(x), (_INPLACE,), repr=""),
    Thin("Hardsigmoid", lambda m, x: F.hardsigmoid(x), (_INPLACE,), repr=""),
    Thin("Hardtanh", lambda m, x: F.hardtanh(x, m.min_val, m.max_val),
         (("min_val", -1.0), ("max_val", 1.0), _INPLACE)),
    Thin("Softplus", lambda m, x: F.softplus(x, m.beta, m.threshold), (("beta", 1.0), ("threshold", 20.0))),
    Thin("SELU", lambda m, x: F.selu(x), (_INPLACE,), repr=""),
    Thin("CELU", lambda m, x: F.celu(x, m.alpha), (("alpha", 1.0), _INPLACE), repr="alpha={alpha}"),
    Thin("GLU", lambda m, x: F.glu(x, m.dim), (("dim", -1),)),
    Thin("LogSigmoid", lambda m, x: F.logsigmoid(x), repr=""),
    Thin("Softmin", lambda m, x: F.softmin(x, m.dim), (("dim", None),)),
    Thin("Softsign", lambda m, x: F.softsign(x), repr=""),
    Thin("Softshrink", lambda m, x: F.softshrink(x, m.lambd), (("lambd", 0.5),), repr="{lambd}"),
    Thin("Hardshrink", lambda m, x: F.hardshrink(x, m.lambd), (("lambd", 0.5),), repr="{lambd}"),
    Thin("Tanhshrink", lambda m, x: F.tanhshrink(x), repr=""),
    Thin("Threshold", lambda m, x: F.threshold(x, m.threshold, m.value), (("threshold", REQUIRED),
         ("value", REQUIRED), _INPLACE), repr="threshold={threshold}, value={value}"),
    Thin("Softmax2d", lambda m, x: _softmax2d(x), repr=""),
    Thin("RReLU", _rrelu, (("lower", 1.0 / 8), ("upper", 1.0 / 3), _INPLACE),
         repr="lower={lower}, upper={upper}"),
    # padding
    *_pad_rows(1), *_pad_rows(2), *_pad_rows(3),
    # shuffles, fold
    Thin("PixelShuffle", lambda m, x: F.pixel_shuffle(x, m.upscale_factor), (("upscale_factor", REQUIRED),)),
    Thin("PixelUnshuffle", lambda m, x: F.pixel_unshuffle(x, m.downscale_factor),
         (("downscale_factor", REQUIRED),)),
    Thin("ChannelShuffle", lambda m, x: F.channel_shuffle(x, m.groups), (("groups", REQUIRED),)),
    Thin("Fold", lambda m, x: F.fold(x, m.output_size, m.kernel_size, m.dilation, m.padding, m.stride),
         (("output_size", REQUIRED), ("kernel_size", REQUIRED), ("dilation", 1), ("padding", 0), ("stride", 1))),
    Thin("Unfold", lambda m, x: F.unfold(x, m.kernel_size, m.dilation, m.padding, m.stride),
         (("kernel_size", REQUIRED), ("dilation", 1), ("padding", 0), ("stride", 1))),
    # pooling
    *[_max_pool(d) for d in (1, 2, 3)],
    Thin("AvgPool1d", lambda m, x: F.avg_pool1d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                                                m.count_include_pad),
         (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
          ("count_include_pad", True)), repr="kernel_size={kernel_size}, stride={stride}, padding={padding}",
         convert={"kernel_size": lambda v, _: _ntuple(v, 1), "stride": lambda v, vs: _ntuple(_stride_default(v, vs), 1),
                  "padding": lambda v, _: _ntuple(v, 1)}),
    *[Thin(f"AvgPool{d}d", lambda m, x, fn=f"avg_pool{d}d": getattr(F, fn)(x, m.kernel_size, m.stride, m.padding,
                                                                            m.ceil_mode, m.count_include_pad,
                                                                            m.divisor_override),
           (("kernel_size", REQUIRED), ("stride", None), ("padding", 0), ("ceil_mode", False),
            ("count_include_pad", True), ("divisor_override", None)),
           repr="kernel_size={kernel_size}, stride={stride}, padding={padding}", convert={"stride": _stride_default})
      for d in (2, 3)],
    *[Thin(f"AdaptiveAvgPool{d}d", lambda m, x, fn=f"adaptive_avg_pool{d}d": getattr(F, fn)(x, m.output_size),
           (("output_size", REQUIRED),))
      for d in (1, 2, 3)],
    *[Thin(f"AdaptiveMaxPool{d}d",
           lambda m, x, fn=f"adaptive_max_pool{d}d": getattr(F, fn)(x, m.output_size, m.return_indices),
           (("output_size", REQUIRED), ("return_indices", False)), repr="output_size={output_size}")
      for d in (1, 2, 3)],
    *[Thin(f"LPPool{d}d", lambda m, x, fn=f"lp_pool{d}d": getattr(F, fn)(x, m.norm_type, m.kernel_size, m.stride,
                                                                           m.ceil_mode),
           (("norm_type", REQUIRED), ("kernel_size", REQUIRED), ("stride", None), ("ceil_mode", False)))
      for d in (1, 2)],
    *[Thin(f"MaxUnpool{d}d", lambda m, x, indices, output_size=None, fn=f"max_unpool{d}d":
           getattr(F, fn)(x, indices, m.kernel_size, m.stride, m.padding, output_size),
           (("kernel_size", REQUIRED), ("stride", None), ("padding", 0)),
           convert={"kernel_size": lambda v, _, n=d: _ntuple(v, n),
                    "stride": lambda v, vs, n=d: _ntuple(_stride_default(v, vs), n),
                    "padding": lambda v, _, n=d: _ntuple(v, n)})
      for d in (1, 2, 3)],
    Thin("LPPool3d", lambda m, x: F.lp_pool3d(x, m.norm_type, m.kernel_size, m.stride, m.ceil_mode),
         (("norm_type", REQUIRED), ("kernel_size", REQUIRED), ("stride", None), ("ceil_mode", False))),
    Thin("LocalResponseNorm", lambda m, x: F.local_response_norm(x, m.size, m.alpha, m.beta, m.k),
         (("size", REQUIRED), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0)),
         repr="{size}, alpha={alpha}, beta={beta}, k={k}"),
    # dropout, reshaping
    Thin("Dropout", lambda m, x: F.dropout(x, m.p, m.training, m.inplace), (("p", 0.5), _INPLACE),
         repr="p={p}, inplace={inplace}", convert={"p": lambda v, _: _check_p(v)}),
    *[Thin(name, lambda m, x, fn=fn: getattr(F, fn)(x, m.p, m.training), (("p", 0.5), _INPLACE),
           repr="p={p}, inplace={inplace}", convert={"p": lambda v, _: _check_p(v)})
      for name, fn in (("Dropout1d", "dropout1d"), ("Dropout2d", "dropout2d"), ("Dropout3d", "dropout3d"),
                       ("AlphaDropout", "alpha_dropout"), ("FeatureAlphaDropout", "feature_alpha_dropout"))],
    Thin("Flatten", lambda m, x: x.flatten(m.start_dim, m.end_dim), (("start_dim", 1), ("end_dim", -1))),
    Thin("Unflatten", lambda m, x: x.unflatten(m.dim, m.unflattened_size),
         (("dim", REQUIRED), ("unflattened_size", REQUIRED)), convert={"unflattened_size": lambda v, _: tuple(v)}),
    # distances
    Thin("CosineSimilarity", lambda m, a, b: F.cosine_similarity(a, b, m.dim, m.eps),
         (("dim", 1), ("eps", 1e-8)), repr=""),
    Thin("PairwiseDistance", lambda m, a, b: F.pairwise_distance(a, b, m.p, m.eps, m.keepdim),
         (("p", 2.0), ("eps", 1e-6), ("keepdim", False)), repr=""),
    # losses (torch's legacy size_average / reduce fold into `reduction`)
    Thin("MSELoss", lambda m, x, t: F.mse_loss(x, t, reduction=m.reduction), _LOSS, repr=""),
    Thin("L1Loss", lambda m, x, t: F.l1_loss(x, t, reduction=m.reduction), _LOSS, repr=""),
    Thin("SmoothL1Loss", lambda m, x, t: F.smooth_l1_loss(x, t, reduction=m.reduction, beta=m.beta),
         (*_LOSS, ("beta", 1.0)), repr=""),
    Thin("NLLLoss", lambda m, x, t: F.nll_loss(x, t, weight=m.weight, ignore_index=m.ignore_index,
                                               reduction=m.reduction),
         (("weight", None), ("size_average", None), ("ignore_index", -100), ("reduce", None), ("reduction", "mean")),
         repr="", buffers=("weight",)),
    Thin("CrossEntropyLoss", lambda m, x, t: F.cross_entropy(x, t, weight=m.weight, ignore_index=m.ignore_index,
                                                             reduction=m.reduction, label_smoothing=m.label_smoothing),
         (("weight", None), ("size_average", None), ("ignore_index", -100), ("reduce", None), ("reduction", "mean"),
          ("label_smoothing", 0.0)), repr="", buffers=("weight",)),
    Thin("BCEWithLogitsLoss", lambda m, x, t: F.binary_cross_entropy_with_logits(x, t, m.weight, reduction=m.reduction,
                                                                                 pos_weight=m.pos_weight),
         (("weight", None), *_LOSS, ("pos_weight", None)), repr="", buffers=("weight", "pos_weight")),
    Thin("BCELoss", lambda m, x, t: F.binary_cross_entropy(x, t, m.weight, reduction=m.reduction),
         (("weight", None), *_LOSS), repr="", buffers=("weight",)),
    Thin("KLDivLoss", lambda m, x, t: F.kl_div(x, t, reduction=m.reduction, log_target=m.log_target),
         (*_LOSS, ("log_target", False)), repr=""),
    Thin("HuberLoss", lambda m, x, t: F.huber_loss(x, t, reduction=m.reduction, delta=m.delta),
         (("reduction", "mean"), ("delta", 1.0)), repr=""),
    Thin("SoftMarginLoss", lambda m, x, t: F.soft_margin_loss(x, t, reduction=m.reduction), _LOSS, repr=""),
    Thin("MultiLabelSoftMarginLoss",
         lambda m, x, t: F.multilabel_soft_margin_loss(x, t, m.weight, reduction=m.reduction),
         (("weight", None), *_LOSS), repr="", buffers=("weight",)),
    Thin("MultiLabelMarginLoss", lambda m, x, t: F.multilabel_margin_loss(x, t, reduction=m.reduction), _LOSS,
         repr=""),
    Thin("MultiMarginLoss", lambda m, x, t: F.multi_margin_loss(x, t, m.p, m.margin, m.weight,
                                                                reduction=m.reduction),
         (("p", 1), ("margin", 1.0), ("weight", None), *_LOSS), repr="", buffers=("weight",)),
    Thin("HingeEmbeddingLoss", lambda m, x, t: F.hinge_embedding_loss(x, t, m.margin, reduction=m.reduction),
         (("margin", 1.0), *_LOSS), repr=""),
    Thin("MarginRankingLoss", lambda m, a, b, t: F.margin_ranking_loss(a, b, t, m.margin, reduction=m.reduction),
         (("margin", 0.0), *_LOSS), repr=""),
    Thin("CosineEmbeddingLoss",
         lambda m, a, b, t: F.cosine_embedding_loss(a, b, t, m.margin, reduction=m.reduction),
         (("margin", 0.0), *_LOSS), repr=""),
    Thin("TripletMarginLoss", lambda m, a, p, n: F.triplet_margin_loss(a, p, n, m.margin, m.p, m.eps, m.swap,
                                                                        reduction=m.reduction),
         (("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False), *_LOSS), repr=""),
    Thin("TripletMarginWithDistanceLoss",
         lambda m, a, p, n: _triplet_with_distance(a, p, n, m.distance_function, m.margin, m.swap, m.reduction),
         kwonly=(("distance_function", None), ("margin", 1.0), ("swap", False), ("reduction", "mean")), repr="",
         convert={"distance_function": lambda v, _: v if v is not None else CLASSES["PairwiseDistance"]()}),
    Thin("PoissonNLLLoss", lambda m, x, t: F.poisson_nll_loss(x, t, m.log_input, m.full, eps=m.eps,
                                                               reduction=m.reduction),
         (("log_input", True), ("full", False), ("size_average", None), ("eps", 1e-8), ("reduce", None),
          ("reduction", "mean")), repr=""),
    Thin("GaussianNLLLoss", lambda m, x, t, var: F.gaussian_nll_loss(x, t, var, m.full, m.eps, m.reduction),
         kwonly=(("full", False), ("eps", 1e-6), ("reduction", "mean")), repr=""),
]


def _check_p(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def _softmax2d(x: Tensor) -> Tensor:
    if x.ndim not in (3, 4):
        raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")
    return F.softmax(x, -3)


def _triplet_with_distance(anchor, positive, negative, distance, margin: float, swap: bool, reduction: str):
    """torch's triplet_margin_with_distance_loss: max(d(a, p) - d(a, n) + margin, 0), with the
    pairwise distance by default and `swap` taking the smaller of d(a, n) and d(p, n)."""
    from .. import clamp_min, minimum
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    loss = clamp_min(margin + d_pos - d_neg, 0.0)
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()


CLASSES: dict[str, type] = {spec.name: make(spec) for spec in THIN}
# torch's deprecated name for NLLLoss on (N, C, H, W) inputs, a subclass of it
CLASSES["NLLLoss2d"] = type("NLLLoss2d", (CLASSES["NLLLoss"],), {"__module__": __name__})
