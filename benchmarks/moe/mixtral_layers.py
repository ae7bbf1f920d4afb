"""Two Mixtral decoder layers at a GPU size (8 experts, 2 per token, 2048 tokens), random weights,
transformers' own MixtralModel in float32: the router counts tokens per expert with histc and the
experts run as one grouped product (transformers' grouped_mm_fallback when traced)."""
import torch
import torch.nn as nn
from transformers import MixtralConfig, MixtralModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = MixtralConfig(vocab_size=1024, hidden_size=1024, intermediate_size=1792, num_hidden_layers=2,
                               num_attention_heads=16, num_key_value_heads=4, num_local_experts=8,
                               num_experts_per_tok=2, max_position_embeddings=1024, attn_implementation="eager")
        self.model = MixtralModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(2, 1024, (4, 512))]


def get_init_inputs():
    return []
