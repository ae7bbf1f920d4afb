"""Two OLMoE decoder layers at a GPU size (64 experts, 8 per token, 2048 tokens:
16384 expert ids sorted in chunks), random weights,
transformers' own OlmoeModel in float32: many small experts, the shape grouped products serve."""
import torch
import torch.nn as nn
from transformers import OlmoeConfig, OlmoeModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = OlmoeConfig(vocab_size=1024, hidden_size=1024, intermediate_size=512, num_hidden_layers=2,
                             num_attention_heads=16, num_key_value_heads=16, num_experts=64, num_experts_per_tok=8,
                             max_position_embeddings=1024, attn_implementation="eager")
        self.model = OlmoeModel(config)
        self.model.eval()

    def forward(self, x):
        return self.model(input_ids=x).last_hidden_state


def get_inputs():
    return [torch.randint(2, 1024, (4, 512))]


def get_init_inputs():
    return []
