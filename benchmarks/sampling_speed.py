"""Rollout generation speed for the tiny recipe's model: transformers' `generate` against the
sampler of training/sampling.py, eager and as a CUDA graph (docs/benchmarks.md, "Training").

    python benchmarks/sampling_speed.py --batch 16 64 --new 1024 --out speed.json

A randomly initialised model of the recipe's size (speed does not depend on the weights), random
prompts of the recipe's prompt length, every completion run to `--new` tokens (no end of
sequence), medians of `--repeats` runs after one warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    from transformers import AutoModelForCausalLM, Qwen2Config

    from drtriton.training.recipes import TINY
    from drtriton.training.sampling import sample

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--prompt", type=int, default=900, help="prompt tokens")
    ap.add_argument("--new", type=int, default=1024, help="tokens generated per completion")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    spec = TINY.model
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.hidden * 4,
                         num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.heads,
                         max_position_embeddings=8192, tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(config).cuda().eval()
    rows = []
    for batch in args.batch:
        prompts = torch.randint(10, spec.vocab, (batch, args.prompt)).tolist()
        ids = torch.tensor(prompts, device="cuda")

        def hf():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new,
                           min_new_tokens=args.new, do_sample=True, temperature=0.8, pad_token_id=0)

        runs = {"transformers generate": hf,
                "sampler, eager": lambda: sample(model, prompts, args.new, 0.8, [-1], 0, use_graph=False),
                "sampler, CUDA graph": lambda: sample(model, prompts, args.new, 0.8, [-1], 0, use_graph=True)}
        for name, fn in runs.items():
            times = []
            for i in range(args.repeats + 1):
                torch.cuda.synchronize()
                started = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                if i:
                    times.append(time.perf_counter() - started)
            median = statistics.median(times)
            row = {"batch": batch, "generator": name, "seconds": round(median, 3),
                   "ms_per_token": round(1000 * median / args.new, 3)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "prompt": args.prompt,
              "new": args.new, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
