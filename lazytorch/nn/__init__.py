"""lazytorch.nn: modules, layers, losses, init and functional, with torch.nn's names and behaviour.
docs/nn.md describes the package."""
from __future__ import annotations

from . import functional, init
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d,
                   MaxPool2d, Upsample)
from .layers import (ELU, GELU, Bilinear, Dropout, Embedding, Flatten, GroupNorm, Hardsigmoid, Hardswish, Hardtanh,
                     Identity, LayerNorm, LeakyReLU, Linear, LogSoftmax, Mish, MultiheadAttention, ReLU, ReLU6,
                     RMSNorm, Sigmoid, SiLU, Softmax, Softplus, Tanh, Unflatten)
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .module import Module
from .parameter import Parameter
