"""A local transformers checkpoint that streams several samples at once.

Shared by the `hf` policy and `drtriton serve-model`. Generation runs in a thread; a streamer
sees each step's new token for every sample of the batch and hands out the new text per sample,
so a caller streams all samples while they are being sampled together.
"""

from __future__ import annotations

import threading
import time

from .models import Generation, ModelError, OnText


class LocalModel:
    def __init__(self, path: str, device: str = "cpu"):
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise ModelError("the hf policy needs transformers: pip install 'drtriton[training]'") from None
        from pathlib import Path

        if not (Path(path) / "config.json").is_file():
            raise ModelError(f"no transformers checkpoint at {path} (expected a folder with config.json)")
        try:  # local files only: weights are never downloaded
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device).eval()
        except (OSError, ValueError) as e:
            raise ModelError(f"cannot load a model from {path}: {e}") from None
        self.path = path
        self.device = device
        self.lock = threading.Lock()  # one generation at a time per loaded model

    def prompt_ids(self, messages: list[dict]):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                          return_dict=True)["input_ids"]
        else:  # a plain transcript for tokenizers without a chat template
            text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
            ids = tok(text, return_tensors="pt")["input_ids"]
        return ids.to(self.device)

    def generate(self, messages, samples: int, temperature: float, max_new_tokens: int,
                 on_text: OnText, cancel: threading.Event | None = None) -> list[Generation]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        ids = self.prompt_ids(messages)
        streamer = _BatchStreamer(self.tokenizer, samples, on_text, prompt_len=ids.shape[1])

        class _Cancel(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return torch.full((input_ids.shape[0],), bool(cancel is not None and cancel.is_set()),
                                  dtype=torch.bool, device=input_ids.device)

        started = time.monotonic()
        with self.lock, torch.no_grad():
            self.model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None, max_new_tokens=max_new_tokens,
                num_return_sequences=samples, streamer=streamer,
                stopping_criteria=StoppingCriteriaList([_Cancel()]),
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        seconds = time.monotonic() - started
        error = "cancelled" if cancel is not None and cancel.is_set() else ""
        return [Generation(streamer.text(i), streamer.counts[i], seconds, error) for i in range(samples)]


class _BatchStreamer:
    """transformers calls `put` with the prompt first, then each step's tokens (one a sample)."""

    def __init__(self, tokenizer, samples: int, on_text: OnText, prompt_len: int):
        self.tokenizer = tokenizer
        self.ids: list[list[int]] = [[] for _ in range(samples)]
        self.sent = [""] * samples
        self.counts = [0] * samples
        self.done = [False] * samples
        self.on_text = on_text
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # the first call carries the prompt
            self.prompt_seen = True
            return
        rows = value.reshape(len(self.ids), -1).tolist()
        eos = self.tokenizer.eos_token_id
        for i, row in enumerate(rows):
            if self.done[i]:
                continue
            for token in row:
                if token == eos:
                    self.done[i] = True
                    break
                self.ids[i].append(token)
                self.counts[i] += 1
            text = self.text(i)
            if len(text) > len(self.sent[i]) and not text.endswith("\ufffd"):  # whole characters only
                self.on_text(i, text[len(self.sent[i]):])
                self.sent[i] = text

    def text(self, i: int) -> str:
        return self.tokenizer.decode(self.ids[i], skip_special_tokens=True)

    def end(self) -> None:
        for i in range(len(self.ids)):
            text = self.text(i)
            if len(text) > len(self.sent[i]):
                self.on_text(i, text[len(self.sent[i]):])
                self.sent[i] = text
