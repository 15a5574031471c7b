"""lazytorch.nn: modules, layers, losses, init and functional, with torch.nn's names and behaviour.
docs/nn.md describes the package, the supported modules and the ones left out."""
from __future__ import annotations

from . import functional, init, parallel
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import (BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
                   ConvTranspose3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, Upsample, UpsamplingBilinear2d,
                   UpsamplingNearest2d)
from .layers import (Bilinear, Embedding, EmbeddingBag, GroupNorm, Identity, LayerNorm, LazyLinear, Linear,
                     MultiheadAttention, PReLU, RMSNorm)
from .module import Module
from .parallel import DataParallel
from .parameter import Parameter
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .thin import CLASSES as _THIN
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)

globals().update(_THIN)           # the table-made modules of thin.py (activations, padding, pools, losses, ...)

# torch.nn classes lazytorch leaves out, and why; reading one raises AttributeError saying so.
UNSUPPORTED: dict[str, str] = {
    "SyncBatchNorm": "there is no multi-process training; use BatchNorm*d",
    "CTCLoss": "its dynamic-programming alignment is not implemented",
    "AdaptiveLogSoftmaxWithLoss": "it is not implemented; use Linear + CrossEntropyLoss",
    "CrossMapLRN2d": "it is a legacy Lua-torch layer; use LocalResponseNorm",
    "FractionalMaxPool2d": "its random pooling regions are not implemented",
    "FractionalMaxPool3d": "its random pooling regions are not implemented",
    "LinearCrossEntropyLoss": "it is not implemented; use Linear + CrossEntropyLoss",
    "Container": "it is deprecated in torch; use Sequential or Module",
    **{f"Lazy{name}": f"lazily-shaped modules are not implemented; give {name} its input size"
       for name in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
                    "InstanceNorm3d")},
}


def __getattr__(name: str):
    if name in UNSUPPORTED:
        raise AttributeError(f"lazytorch.nn.{name} is not supported: {UNSUPPORTED[name]}")
    raise AttributeError(f"module 'lazytorch.nn' has no attribute '{name}'")
