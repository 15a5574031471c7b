"""Recurrent layers with torch's constructors, parameter names (weight_ih_l0, weight_hh_l0, bias_ih_l0,
bias_hh_l0, ..., `_reverse` for the backward direction), initialisation U(-1/sqrt(hidden), 1/sqrt(hidden))
and gate layouts (LSTM: i, f, g, o; GRU: r, z, n), so torch's state_dict loads as it is.

The time loop is unrolled into the lazy graph: each layer projects the whole input sequence with one
matmul, then each step adds h @ W_hh^T and applies the cell's gates.  A sequence length is part of
the compiled program, so each new length compiles once."""
from __future__ import annotations

import math

from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import _empty, _factory, _nondefault, _register
from .module import Module
from .parameter import Parameter

# ---------------------------------------------------------------- one step of each cell
# A step maps (input projection gi, h, c, W_hh, b_hh, W_hr) to the new (h, c); c is None but for LSTM.
def _lstm_step(gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None):
    g = gi + F.linear(h, w_hh, b_hh)
    i, f, n, o = g.chunk(4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(n)
    h = F.sigmoid(o) * F.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi: Tensor, h: Tensor, c: None, w_hh: Tensor, b_hh: Tensor | None, w_hr: None):
    gh = F.linear(h, w_hh, b_hh)
    ir, iz, i_n = gi.chunk(3, -1)
    hr, hz, h_n = gh.chunk(3, -1)
    r, z = F.sigmoid(ir + hr), F.sigmoid(iz + hz)
    n = F.tanh(i_n + r * h_n)
    return n + z * (h - n), None                 # (1 - z) * n + z * h


def _rnn_step(activation: str):
    # (F's ops are installed after this module is imported: looked up at the call)
    return lambda gi, h, c, w_hh, b_hh, w_hr: (getattr(F, activation)(gi + F.linear(h, w_hh, b_hh)), None)


# each mode's gates (chunks of the projections) and step
_CELLS = {"LSTM": (4, _lstm_step), "GRU": (3, _gru_step), "RNN_TANH": (1, _rnn_step("tanh")),
          "RNN_RELU": (1, _rnn_step("relu"))}


class RNNBase(Module):
    """RNN, LSTM and GRU: `mode` picks the cell.  Inputs (L, N, H_in), (N, L, H_in) with batch_first,
    or unbatched (L, H_in); returns (output, h_n) and, for LSTM, (output, (h_n, c_n))."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        _factory(device)
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be a positive integer" if isinstance(hidden_size, int)
                             else f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than or equal to 1")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        directions = 2 if bidirectional else 1
        gate_size = _CELLS[mode][0] * hidden_size
        real_hidden = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(_empty(*shape, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self) -> list[Tensor]:
        return [getattr(self, n) for n in self._flat_weights_names]

    def flatten_parameters(self) -> None:
        """torch packs the weights for cuDNN here; lazytorch has nothing to pack."""

    def _weights(self, layer: int, direction: int):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda n: getattr(self, n + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_input(self, input: Tensor) -> bool:
        if hasattr(input, "batch_sizes"):
            raise NotImplementedError(f"lazytorch: {type(self).__name__} does not take a PackedSequence; "
                                      "pass the padded tensor")
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        return input.ndim == 3

    def _initial(self, hx: Tensor | None, batch: int, size: int, like: Tensor, what: str) -> Tensor:
        layers = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            from .. import zeros
            return zeros(layers, batch, size, dtype=like.dtype)
        if tuple(hx.shape) != (layers, batch, size):
            raise RuntimeError(f"Expected {what} size {(layers, batch, size)}, got {tuple(hx.shape)}")
        return hx

    def forward(self, input: Tensor, hx=None):
        from .. import cat, stack
        batched = self._check_input(input)
        lstm = self.mode == "LSTM"
        if not batched:
            input = input.unsqueeze(1)
            if hx is not None:
                hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        batch = input.shape[1]
        out_size = self.proj_size or self.hidden_size
        h0 = self._initial(hx[0] if lstm and hx is not None else hx, batch, out_size, input, "hidden")
        c0 = self._initial(hx[1] if hx is not None else None, batch, self.hidden_size, input, "cell") if lstm else None
        h_n, c_n = [], []
        x = input
        directions = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                seq, h, c = self._run_direction(x, layer, direction, h0[k], c0[k] if lstm else None)
                outs.append(seq)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output, h_n = x, stack(h_n)
        state = (h_n, stack(c_n)) if lstm else h_n
        if not batched:
            output = output.squeeze(1)
            state = tuple(s.squeeze(1) for s in state) if lstm else state.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, state

    def _run_direction(self, x: Tensor, layer: int, direction: int, h: Tensor, c: Tensor | None):
        """One layer in one direction over the whole sequence: (L, N, H_in) -> (L, N, H_out), h_T, c_T."""
        from .. import stack
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
        gates = F.linear(x, w_ih, b_ih)                           # every step's input projection at once
        steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
        step = _CELLS[self.mode][1]
        outs: list[Tensor] = [None] * x.shape[0]
        for t in steps:
            h, c = step(gates[t], h, c, w_hh, b_hh, w_hr)
            outs[t] = h
        return stack(outs) if outs else x[:, :, :0], h, c

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + _nondefault(
            self, proj_size=0, num_layers=1, bias=True, batch_first=False, dropout=0, bidirectional=False)


class RNN(RNNBase):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity          # torch's RNN repr does not show it


class LSTM(RNNBase):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         0, device, dtype)


# ---------------------------------------------------------------- cells
class RNNCellBase(Module):
    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        _factory(device)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(_empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(_empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        _register(self, bias, dtype, bias_ih=(num_chunks * hidden_size,), bias_hh=(num_chunks * hidden_size,))
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _prepare(self, input: Tensor, hx):
        """Unbatched inputs gain a batch dim; a missing state starts at zero."""
        from .. import zeros
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            if hx is not None:
                hx = tuple(h.unsqueeze(0) for h in hx) if isinstance(hx, tuple) else hx.unsqueeze(0)
        if hx is None:
            h = zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
            hx = (h, h) if self._mode == "LSTM" else h
        return input, hx, batched

    def forward(self, input: Tensor, hx=None):
        input, hx, batched = self._prepare(input, hx)
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        lstm = self._mode == "LSTM"
        h, c = _CELLS[self._mode][1](gi, *(hx if lstm else (hx, None)), self.weight_hh, self.bias_hh, None)
        if lstm:
            return (h, c) if batched else (h.squeeze(0), c.squeeze(0))
        return h if batched else h.squeeze(0)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}" + _nondefault(self, bias=True)
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return s + (f", nonlinearity={nonlinearity}" if nonlinearity != "tanh" else "")


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class LSTMCell(RNNCellBase):
    _mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)


class GRUCell(RNNCellBase):
    _mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)
