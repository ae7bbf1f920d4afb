"""KernelBench-format source for a solved program graph.

Layout of a generated program::

    class Model(nn.Module):
        def __init__(self, conv2d_0_in_channels, conv2d_0_out_channels):
            super().__init__()
            self.conv2d_0 = nn.Conv2d(conv2d_0_in_channels, conv2d_0_out_channels, kernel_size=...)

        def forward(self, x0, x1):
            v0 = self.conv2d_0(x0)
            v1 = torch.relu(v0)
            v2 = v1 + x1
            return v2

    x0_shape = (16, 3, 32, 32)        # module-level shape constants
    x1_shape = (16, 1, 1)
    conv2d_0_in_channels = 3          # constructor arguments, exposed like KernelBench's
    conv2d_0_out_channels = 16

    def get_inputs(): ...             # torch.randn for data, torch.rand for probabilities,
    def get_init_inputs(): ...        # torch.rand + 0.5 for divisors, torch.randint for classes

Names are deterministic: inputs ``x<j>`` in creation order, operator ``i`` writes ``v<i>`` and
owns the module ``self.<name>_<i>``. The forward is straight-line; the last operator's result
is the output (every operator contributes to it by construction).
"""

from __future__ import annotations

from drtriton.ops.indexing import ends_source, offsets_source
from drtriton.ops.layout import FLATTEN, INTO_DOMAIN, TO_FLOAT, unsqueeze_expr
from drtriton.training.synth.solve import Solution
from drtriton.training.synth.structure import Graph, Use

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def tensor_names(graph: Graph) -> dict[int, str]:
    names = {t.id: f"x{j}" for j, t in enumerate(graph.inputs)}
    names.update({node.output: f"v{node.index}" for node in graph.ops})
    return names


def _use_expr(use: Use, names: dict[int, str]) -> str:
    expr = names[use.tensor]
    if use.cast:
        expr = TO_FLOAT.apply(expr, {})
    if use.into:
        expr = INTO_DOMAIN[use.into].apply(expr, {})
    if use.flatten is not None:
        expr = FLATTEN.apply(expr, {"start_dim": use.flatten})
    return unsqueeze_expr(expr, use.unsqueeze)


def _input_expr(graph: Graph, solution: Solution, tensor_id: int, shape_name: str) -> str:
    tensor = graph.tensors[tensor_id]
    if tensor.domain == "index":
        node = graph.ops[tensor.consumer]
        src, axis = node.op.slots[[u.tensor for u in node.uses].index(tensor_id)].index_of
        classes = solution.adapted[node.index][src][axis]
        return f"torch.randint(0, {classes}, {shape_name})"
    if tensor.domain in ("offsets", "ends"):  # sorted bounds over the rows of the slot they segment
        node = graph.ops[tensor.consumer]
        src, axis = node.op.slots[[u.tensor for u in node.uses].index(tensor_id)].index_of
        draw = offsets_source if tensor.domain == "offsets" else ends_source
        return draw(solution.adapted[node.index][src][axis], solution.shapes[tensor_id])
    if tensor.domain in ("unit", "probability"):
        return f"torch.rand({shape_name})"
    if tensor.domain == "mask":
        return f"torch.rand({shape_name}) > 0.5"
    if tensor.domain == "positive":
        return f"torch.rand({shape_name}) + 0.5"
    if tensor.domain == "above_one":
        return f"torch.rand({shape_name}) + 1.0"
    if tensor.domain == "integer":
        return f"torch.randint(-64, 64, {shape_name})"
    return f"torch.randn({shape_name})"


def render(graph: Graph, solution: Solution) -> str:
    names = tensor_names(graph)
    init_args: list[tuple[str, object]] = []
    init_lines, forward_lines = [], []
    for node in graph.ops:
        op, attrs = node.op, solution.attrs[node.index]
        module_attr = None
        if op.has_module:
            module_attr = f"{node.name}_{node.index}"
            call = op.module_call(attrs, solution.adapted[node.index])
            arg_names = [f"{module_attr}_{arg}" for arg, _ in call.args]
            init_args += [(name, value) for name, (_, value) in zip(arg_names, call.args)]
            init_lines.append(f"        self.{module_attr} = {call.render(arg_names)}")
        expr = op.torch_expr([_use_expr(u, names) for u in node.uses], attrs, module_attr)
        forward_lines.append(f"        {names[node.output]} = {expr}")
    inputs = [names[t.id] for t in graph.inputs]
    ops_doc = " -> ".join(node.name for node in graph.ops)
    lines = [
        HEADER, "",
        "class Model(nn.Module):",
        f'    """Synthetic program ({len(graph.ops)} operators): {ops_doc}."""', "",
        f"    def __init__(self{''.join(', ' + name for name, _ in init_args)}):",
        "        super().__init__()",
        *init_lines, "",
        f"    def forward(self, {', '.join(inputs)}):",
        *forward_lines,
        f"        return {names[graph.output]}", "", "",
    ]
    lines += [f"{name}_shape = {solution.shapes[t.id]!r}" for name, t in zip(inputs, graph.inputs)]
    lines += [f"{name} = {value!r}" for name, value in init_args]
    lines += ["", "", "def get_inputs():"]
    lines += [f"    {name} = {_input_expr(graph, solution, t.id, name + '_shape')}"
              for name, t in zip(inputs, graph.inputs)]
    lines += [f"    return [{', '.join(inputs)}]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(name for name, _ in init_args)}]", ""]
    return "\n".join(lines)


def shapes_by_name(graph: Graph, solution: Solution) -> dict[str, list[int]]:
    names = tensor_names(graph)
    return {names[t.id]: list(solution.shapes[t.id]) for t in graph.tensors}
