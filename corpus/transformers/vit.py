"""ViT (transformers' ViTModel, Google's Vision Transformer: patch embedding, CLS token, pre-norm encoder) built from a small ViTConfig with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import ViTConfig, ViTModel

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, IMG, PATCH, D, FF, LAYERS, HEADS = {
    "small": (2, 16, 4, 32, 64, 2, 4),
    "full": (16, 224, 16, 768, 3072, 12, 12),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = ViTConfig(image_size=IMG, patch_size=PATCH, num_channels=3, hidden_size=D, intermediate_size=FF,
                           num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           attn_implementation="eager")
        self.model = ViTModel(config, add_pooling_layer=False)
        self.model.eval()

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


def get_inputs():
    return [torch.randn(B, 3, IMG, IMG)]


def get_init_inputs():
    return []
