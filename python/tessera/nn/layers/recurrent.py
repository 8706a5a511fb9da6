"""Recurrent layers: ``RNN`` (Elman), ``GRU`` and ``LSTM``.

Inputs are ``(N, L, D)`` or ``(L, D)`` (batch, sequence length, features); every layer returns
its hidden state after each step, ``(N, L, H)`` or ``(L, H)``. All weights start uniform in
``[-k, k]`` with ``k = 1 / sqrt(hidden_size)``. A missing initial state means zeros.
"""

import math
from typing import Callable, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module


def _uniform(scale: float, shape) -> mx.array:
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


def _project(x: mx.array, weight: mx.array, bias: Optional[mx.array]) -> mx.array:
    """``x @ weight.T (+ bias)``: the input's contribution to every step at once."""
    if bias is not None:
        return mx.addmm(bias, x, weight.T)
    return x @ weight.T


class RNN(Module):
    r"""An Elman recurrent layer.

    For each step :math:`t` of the sequence it computes

    .. math::

        h_{t + 1} = \sigma(W_{xh} x_t + W_{hh} h_t + b)

    with :math:`\sigma` the ``nonlinearity`` (``tanh`` by default). ``Wxh`` is
    ``(hidden_size, input_size)``, ``Whh`` is ``(hidden_size, hidden_size)`` and ``bias`` is
    ``(hidden_size,)``.

    Args:
        input_size (int): The input's features, ``D``.
        hidden_size (int): The hidden state's features, ``H``.
        bias (bool, optional): Whether to add a bias. Default: ``True``.
        nonlinearity (callable, optional): The non-linearity. Default: ``None``, which means
            ``tanh``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: Optional[Callable] = None,
    ):
        super().__init__()
        self.nonlinearity = nonlinearity or mx.tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"RNN: nonlinearity={nonlinearity!r} is not callable")
        scale = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(scale, (hidden_size, input_size))
        self.Whh = _uniform(scale, (hidden_size, hidden_size))
        self.bias = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
            f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}"
        )

    def __call__(self, x: mx.array, hidden: Optional[mx.array] = None) -> mx.array:
        """Runs the layer over ``x`` from the initial state ``hidden`` (``(N, H)`` or ``(H,)``).

        Returns:
            array: The hidden state after every step, ``(N, L, H)`` or ``(L, H)``.
        """
        xs = _project(x, self.Wxh, self.bias)
        states = []
        for t in range(xs.shape[-2]):
            pre = xs[..., t, :]
            if hidden is not None:
                pre = mx.addmm(pre, hidden, self.Whh.T)
            hidden = self.nonlinearity(pre)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class GRU(Module):
    r"""A gated recurrent unit layer.

    For each step :math:`t` it computes

    .. math::

        \begin{aligned}
        r_t &= \sigma(W_{xr} x_t + W_{hr} h_t + b_r) \\
        z_t &= \sigma(W_{xz} x_t + W_{hz} h_t + b_z) \\
        n_t &= \tanh(W_{xn} x_t + b_n + r_t \odot (W_{hn} h_t + b_{hn})) \\
        h_{t + 1} &= (1 - z_t) \odot n_t + z_t \odot h_t
        \end{aligned}

    ``Wx`` (``(3 H, D)``) stacks :math:`W_{xr}, W_{xz}, W_{xn}`; ``Wh`` (``(3 H, H)``) stacks
    :math:`W_{hr}, W_{hz}, W_{hn}`; ``b`` (``(3 H,)``) stacks :math:`b_r, b_z, b_n`; and ``bhn``
    (``(H,)``) is :math:`b_{hn}`, inside the reset gate.

    Args:
        input_size (int): The input's features, ``D``.
        hidden_size (int): The hidden state's features, ``H``.
        bias (bool, optional): Whether to add the biases ``b`` and ``bhn``. Default: ``True``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (3 * hidden_size, input_size))
        self.Wh = _uniform(scale, (3 * hidden_size, hidden_size))
        self.b = _uniform(scale, (3 * hidden_size,)) if bias else None
        self.bhn = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.b is not None}"
        )

    def __call__(self, x: mx.array, hidden: Optional[mx.array] = None) -> mx.array:
        """Runs the layer over ``x`` from the initial state ``hidden`` (``(N, H)`` or ``(H,)``).

        Returns:
            array: The hidden state after every step, ``(N, L, H)`` or ``(L, H)``.
        """
        H = self.hidden_size
        xs = _project(x, self.Wx, self.b)
        xs_rz, xs_n = xs[..., :-H], xs[..., -H:]
        states = []
        for t in range(xs.shape[-2]):
            rz = xs_rz[..., t, :]
            n = xs_n[..., t, :]
            if hidden is not None:
                hs = hidden @ self.Wh.T
                hs_rz, hs_n = hs[..., :-H], hs[..., -H:]
                if self.bhn is not None:
                    hs_n = hs_n + self.bhn
                rz = rz + hs_rz
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            if hidden is not None:
                n = n + r * hs_n
            elif self.bhn is not None:
                # h = 0: only the bias is left inside the reset gate.
                n = n + r * self.bhn
            n = mx.tanh(n)
            hidden = (1 - z) * n if hidden is None else (1 - z) * n + z * hidden
            states.append(hidden)
        return mx.stack(states, axis=-2)


class LSTM(Module):
    r"""A long short-term memory layer.

    For each step :math:`t` it computes

    .. math::

        \begin{aligned}
        i_t &= \sigma(W_{xi} x_t + W_{hi} h_t + b_i) \\
        f_t &= \sigma(W_{xf} x_t + W_{hf} h_t + b_f) \\
        g_t &= \tanh(W_{xg} x_t + W_{hg} h_t + b_g) \\
        o_t &= \sigma(W_{xo} x_t + W_{ho} h_t + b_o) \\
        c_{t + 1} &= f_t \odot c_t + i_t \odot g_t \\
        h_{t + 1} &= o_t \odot \tanh(c_{t + 1})
        \end{aligned}

    ``Wx`` (``(4 H, D)``), ``Wh`` (``(4 H, H)``) and ``bias`` (``(4 H,)``) stack the input,
    forget, cell and output gates in that order.

    Args:
        input_size (int): The input's features, ``D``.
        hidden_size (int): The hidden and cell states' features, ``H``.
        bias (bool, optional): Whether to add ``bias``. Default: ``True``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (4 * hidden_size, input_size))
        self.Wh = _uniform(scale, (4 * hidden_size, hidden_size))
        self.bias = _uniform(scale, (4 * hidden_size,)) if bias else None

    def _extra_repr(self) -> str:
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.bias is not None}"
        )

    def __call__(self, x: mx.array, hidden: Optional[mx.array] = None, cell: Optional[mx.array] = None):
        """Runs the layer over ``x`` from the initial states ``hidden`` and ``cell``.

        Args:
            x (array): The input, ``(N, L, D)`` or ``(L, D)``.
            hidden (array, optional): The initial hidden state, ``(N, H)`` or ``(H,)``.
            cell (array, optional): The initial cell state, ``(N, H)`` or ``(H,)``.

        Returns:
            tuple(array, array): The hidden and the cell states after every step, each
            ``(N, L, H)`` or ``(L, H)``.
        """
        xs = _project(x, self.Wx, self.bias)
        hiddens, cells = [], []
        for t in range(xs.shape[-2]):
            gates = xs[..., t, :]
            if hidden is not None:
                gates = mx.addmm(gates, hidden, self.Wh.T)
            i, f, g, o = mx.split(gates, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = i * g if cell is None else f * cell + i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
