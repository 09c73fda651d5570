"""What determines a model's numbers, as sha256 digests: its weights as they are in memory, its configuration and
its tokenizer. Together they are the model part of every cache key (`models.Encoder.fingerprint`), so a copy
with edited weights, the same weights under another configuration, or another tokenizer never meets the numbers
of the original.
"""
from __future__ import annotations

import hashlib
import json

_UNSTABLE_TOKENIZER_STATE = ("truncation", "padding")  # the last call's settings, kept by the fast tokenizer


def weights_fingerprint(model) -> str:
    """sha256 of every parameter and buffer as it is now in memory (names, dtypes, shapes and bytes), so any
    edit, training step or copy that changed a number changes it (about 0.1 s per 100 MB of weights)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(memoryview(flat.view(torch.uint8).numpy()))
    return digest.hexdigest()


def config_fingerprint(config) -> str:
    """sha256 of a transformers configuration's settings (layers, heads, sizes, flags), without where it was
    loaded from, the transformers version, and private runtime state such as the attention implementation."""
    settings = {k: v for k, v in config.to_dict().items() if not k.startswith("_") and k != "transformers_version"}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 of how a tokenizer splits text: for a fast tokenizer its whole pipeline (normaliser, e.g. lower
    casing; pre-tokenizer; vocabulary; special tokens; post-processor), else its class and vocabulary; plus its
    special tokens, length limit and, where it cuts inputs from the left, that side (`prepare(max_tokens=...)`
    keeps other tokens; the usual right side adds nothing, so those keys stay as they were)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        for key in _UNSTABLE_TOKENIZER_STATE:
            spec.pop(key, None)
    else:
        spec = sorted(tokenizer.get_vocab().items())
    described = [type(tokenizer).__name__, spec, tokenizer.special_tokens_map, tokenizer.model_max_length]
    if tokenizer.truncation_side != "right":
        described.append(f"truncation_side={tokenizer.truncation_side}")
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()
