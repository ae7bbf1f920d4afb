"""Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (tanh or relu), several layers, either
direction, batch first or not.

Kept whole rather than unrolled into one product and a few gates per time step: the template
(`drtriton.policy.emit.recurrent`) projects the inputs of all steps at once, then walks the
sequence inside one kernel per layer and direction, so the converted module takes any sequence
length and launches a handful of kernels, not several per step. Forms it does not take (dropout
between layers while training, projections) are not matched and lower step by step as before.

FLOPs per step, direction and layer: the input and hidden products of G gates (G = 4 LSTM,
3 GRU, 1 RNN), 2 per multiply-accumulate, plus about 10 per hidden unit for the gates.
Not drawn by synthesis: a layer is a small program of its own.
"""

from __future__ import annotations

from drtriton.ops import ranges
from drtriton.ops.operator import Choice, ModuleCall, Operator, Param, Slot
from drtriton.ops.shape import ShapeError

#: gates per hidden unit
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _rule(gates: int):
    def rule(ctx, dims, attrs):
        (x,) = dims
        if len(x) != 3:
            raise ShapeError("a recurrent layer takes a 3-D input: (sequence, batch, features), or batch first")
        hidden = ctx.param("hidden_size", lo=1, gen=(1, None))
        directions = 2 if attrs.get("bidirectional") else 1
        layers = attrs.get("num_layers", 1)
        steps = ctx.mul(x[0], x[1])  # sequence x batch, in either order
        recurrence = 2 * gates * ctx.mul(steps, hidden, hidden) + 10 * ctx.mul(steps, hidden)  # each layer
        inputs = 2 * gates * ctx.mul(steps, hidden, x[2])  # the first layer's input products
        later = (layers - 1) * (2 * gates * directions * ctx.mul(steps, hidden, hidden))  # inputs of D*H features
        return [x[0], x[1], directions * hidden], directions * (layers * recurrence + inputs + later)
    return rule


def _module(cls: str, nonlinearity: str | None = None):
    def build(attrs, shapes) -> ModuleCall:
        kwargs = [("num_layers", attrs.get("num_layers", 1)), ("bias", attrs.get("bias", True)),
                  ("batch_first", attrs.get("batch_first", False)), ("bidirectional", attrs.get("bidirectional", False))]
        if nonlinearity:
            kwargs.insert(0, ("nonlinearity", nonlinearity))
        return ModuleCall(cls, (("input_size", shapes[0][-1]), ("hidden_size", attrs["hidden_size"])), tuple(kwargs))
    return build


_ATTRS = (Choice("num_layers", (1, 2)), Choice("bidirectional", (False, True)),
          Choice("batch_first", (False, True)), Choice("bias", (True, True, False)))
_HIDDEN = (Param("hidden_size", "hidden features per direction", test_range=(1, 6)),)


def _op(name: str, cls: str, description: str, value_range, nonlinearity: str | None = None) -> Operator:
    return Operator(
        name=name, category="recurrent", description=description, slots=(Slot("input", (3,)),),
        rule=_rule(GATES[name]), torch_template="self.{module}({x})[0]", attrs=_ATTRS, params=_HIDDEN,
        module=_module(cls, nonlinearity), module_types=(f"torch.{cls}",), value_range=value_range, drawn=False)


def _bounded(rs, attrs):
    return (-1.0, 1.0)  # every output is a tanh, or a mix of tanh outputs and earlier states


OPERATORS = (
    _op("lstm", "nn.LSTM", "nn.LSTM: input, forget, cell and output gates over the sequence (output of each step)",
        _bounded),
    _op("gru", "nn.GRU", "nn.GRU: reset, update and new gates over the sequence (output of each step)", _bounded),
    _op("rnn_tanh", "nn.RNN", "nn.RNN with tanh: h = tanh(W x + U h + b) over the sequence", _bounded, "tanh"),
    _op("rnn_relu", "nn.RNN", "nn.RNN with relu: h = relu(W x + U h + b) over the sequence", ranges.nonneg, "relu"),
)
