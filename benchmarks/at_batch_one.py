"""Make problem files run at a batch of 1, in place: inference as users run it, where
`torch.export` specialises a leading size of 1 unless capture works around it.

    python benchmarks/at_batch_one.py DIR [DIR ...]      # every *.py problem file in each DIR

Each file gets a `get_inputs` that keeps the first row of every tensor input sharing the first
tensor input's leading size (the verifier then checks a batch of 2 as its second configuration).
Problems whose other inputs index the batch (offsets, permutations, a hidden state batched along
another dim) fail in their own reference at batch 1: the report says so, and they do not count.
"""

from __future__ import annotations

import sys
from pathlib import Path

OVERRIDE = '''


_get_inputs_at_full_batch = get_inputs


def get_inputs():  # appended by benchmarks/at_batch_one.py: the first row of the batch
    import torch

    inputs = _get_inputs_at_full_batch()
    n = next(x.shape[0] for x in inputs if isinstance(x, torch.Tensor) and x.dim())
    return [x[:1].clone() if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] == n else x for x in inputs]
'''


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for folder in map(Path, argv):
        for path in sorted(folder.glob("*.py")):
            text = path.read_text()
            if "def get_inputs" in text and "_get_inputs_at_full_batch" not in text:
                path.write_text(text + OVERRIDE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
