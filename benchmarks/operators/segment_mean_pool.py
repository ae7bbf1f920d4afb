"""Mean pooling of node features per graph in a batch of graphs (a graph network's readout),
written with torch.segment_reduce over the graphs' node counts."""

import torch
import torch.nn as nn

GRAPHS, NODES, FEATURES = 2000, 200_000, 128


class Model(nn.Module):
    def forward(self, x, nodes_per_graph):
        return torch.segment_reduce(x, "mean", lengths=nodes_per_graph)


def get_inputs():
    # the graphs' node counts: gaps between sorted cut points, summing to NODES
    cuts = torch.randint(0, NODES + 1, (GRAPHS - 1,)).sort().values
    bounds = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), NODES)])
    return [torch.randn(NODES, FEATURES), torch.diff(bounds)]


def get_init_inputs():
    return []
