"""Streaming attention extraction: batches flow through reducers that keep running sums, never every map.

    results = reduce(encoder, segments, [TokenStats(), EntropyStats(), KeepExamples(8)])

The inputs are cut into blocks of BLOCK_SIZE; each reducer's result for each block is cached on disk
(`cache`) as soon as the block is done, keyed by model fingerprint + the block's own inputs, where it starts
and the block size (+ max_tokens) + the version of the reducer's code (its module and what that imports) +
the reducer's own key. The blocks' results are then merged in order (`Reducer.merge`), so:
- an interrupted run resumes at the first block without an entry; a missing, stale, truncated or
  tampered entry is recomputed; only reducers without a valid entry take part in a block's pass;
- appending inputs reuses every earlier full block, and changing one input recomputes only its block;
- every input of the blocks to compute is tokenized (checked) before the first block is computed, so a bad
  input fails at once, named by its index; when every block is cached nothing is tokenized;
- the result does not depend on how the work was split: under `torch.distributed` (e.g. `torchrun
  --nproc_per_node=2 -m bertlook_utils.cli extract`, see `cli`), process r of w computes the blocks
  b with b % w == r into the shared cache, waits for the others, and every process merges the same blocks.
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.source import PACKAGE, code_version
from ..core.conventions import check_attention, is_punctuation
from ..core.intervene import usable_cache
from ..data.corpora import Segment
from ..core.models import Encoded, Encoder, _unpack

BLOCK_SIZE = 256  # inputs per cached block: the unit of resuming and of sharding (a multiple of batch sizes)


@dataclass
class Batch:
    """A padded batch of inputs and what reducers need to know about its tokens: the kit's one batch type.

    inputs: B objects with tokens, word_ids, words and segment_ids (`Encoded` or `models.Prepared`);
    valid, is_cls, is_sep, is_punct: bool [B, T], False at padding; segment: long [B, T] (0 = A, 1 = B, 0 at
    padding); lengths: long [B]; attn: float32 [B, L, H, T, T], or None when the pass runs no forward pass
    (columns beyond an input's length are exactly 0, the padding mask underflows to 0 in the softmax; rows
    beyond it are meaningless); model_inputs: what the model reads (`Encoder.pad`), None for maps given
    without a model; start: index of inputs[0] among all the inputs of the pass; signed: the maps may hold
    negative weights (`Encoder.signed_attention`)."""

    attn: torch.Tensor | None
    valid: torch.Tensor
    is_cls: torch.Tensor
    is_sep: torch.Tensor
    is_punct: torch.Tensor
    segment: torch.Tensor
    lengths: torch.Tensor
    inputs: Sequence
    cls_token: str
    sep_token: str
    start: int = 0
    model_inputs: dict[str, torch.Tensor] | None = None
    signed: bool = False

    @property
    def sinks(self) -> torch.Tensor:
        """bool [B, T]: [CLS] and every [SEP]."""
        return self.is_cls | self.is_sep

    @property
    def other(self) -> torch.Tensor:
        """bool [B, T]: real tokens that are neither special tokens nor punctuation."""
        return self.valid & ~self.sinks & ~self.is_punct

    @classmethod
    def build(cls, attn: torch.Tensor | None, valid: torch.Tensor, inputs: Sequence, cls_token: str, sep_token: str,
              start: int = 0, model_inputs: dict[str, torch.Tensor] | None = None, signed: bool = False) -> "Batch":
        width = valid.shape[1]

        def padded(rows, fill) -> torch.Tensor:  # one list per input -> [B, T]
            return torch.tensor([list(row) + [fill] * (width - len(row)) for row in rows])

        tokens = [x.tokens for x in inputs]
        return cls(attn, valid, padded(([t == cls_token for t in ts] for ts in tokens), False),
                   padded(([t == sep_token for t in ts] for ts in tokens), False),
                   padded(([is_punctuation(t) for t in ts] for ts in tokens), False),
                   padded((x.segment_ids for x in inputs), 0), valid.sum(1), inputs, cls_token, sep_token, start,
                   model_inputs, signed)

    @classmethod
    def from_encoded(cls, enc: Encoded) -> "Batch":
        """A batch of one, after checking `enc`: at least one token, as many word ids and segment ids as tokens,
        and `enc.attn` a finite, row-normalised [L, H, n, n] array."""
        attn = np.asarray(enc.attn)
        n = len(enc.tokens)
        if n == 0:
            raise ValueError("an input has no tokens; encode a text with Encoder.encode")
        if len(enc.word_ids) != n or len(enc.segment_ids) != n:
            raise ValueError(f"an input has {n} tokens but {len(enc.word_ids)} word ids and {len(enc.segment_ids)} "
                             "segment ids; give one of each per token")
        if attn.ndim != 4 or attn.shape[2:] != (n, n):
            raise ValueError(f"attn must be [layers, heads, {n}, {n}] for {n} tokens, got {attn.shape}")
        check_attention(attn)
        return cls.build(torch.from_numpy(attn.astype(np.float32)).unsqueeze(0), torch.ones(1, n, dtype=torch.bool),
                         [enc], enc.cls_token, enc.sep_token)


def encoded_batches(encodeds: Iterable[Encoded]) -> Iterator[Batch]:
    """One `Batch.from_encoded` per input, in order, after checking that every input has the first one's layers
    and heads (inputs of one model); ValueError when there is none."""
    shape = None
    for i, enc in enumerate(encodeds):
        try:
            batch = Batch.from_encoded(enc)
        except ValueError as error:
            raise ValueError(f"input {i}: {error}") from None
        if shape is None:
            shape = batch.attn.shape[1:3]
        elif batch.attn.shape[1:3] != shape:
            raise ValueError(f"input {i} has {batch.attn.shape[1]} layers x {batch.attn.shape[2]} heads but input 0 "
                             f"has {shape[0]} x {shape[1]}: give inputs encoded by one model")
        yield batch
    if shape is None:
        raise ValueError("no inputs: give at least one Encoded input")


def batches(encoder: Encoder, items: Sequence, batch_size: int = 32, attention: bool = True,
            max_tokens: int | None = None, start: int = 0, reuse: bool = False) -> Iterator[Batch]:
    """`Batch`es of `items` (segments, texts or (a, b) pairs) in the order given: the one way from inputs to
    the model. attention=False leaves `attn` None (callers that run the model themselves, with gradients or
    edits, use `model_inputs`); max_tokens cuts each input (`Encoder.prepare`); start numbers the first input;
    reuse: each batch's `attn` overwrites the last one's (`Encoder.batches`)."""
    for prepared, inputs, attn in encoder.batches(map(_as_item, items), batch_size, attention, max_tokens, reuse):
        yield Batch.build(attn, inputs["attention_mask"].bool(), prepared, encoder.cls_token, encoder.sep_token,
                          start, inputs, encoder.signed_attention)
        start += len(prepared)


class Reducer:
    """Consumes batches, keeps running sums. `key` names its settings in the cache key; `result()` is a
    dict of numpy arrays (what is cached); `merge(results)` combines the results of consecutive blocks of
    inputs into the result of all of them; `load(result)` restores a reducer from a result; `fresh()` is an
    empty reducer with the same settings (one per block).

    `needs_attention`: whether `update` reads `batch.attn`. A reducer that runs the model itself (with
    gradients, or with edited attention) sets it False; a pass whose reducers all do runs no forward pass.
    `update` keeps no view of `batch.attn`: the next batch's maps are written into the same memory."""

    name = "reducer"
    needs_attention = True

    @property
    def key(self) -> str:
        return self.name

    def update(self, batch: Batch) -> None:
        raise NotImplementedError

    def result(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def load(self, result: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def merge(self, results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Sums of the blocks' arrays, key by key (right for results that are running sums and counts)."""
        return {key: sum(r[key] for r in results[1:]) + results[0][key] for key in results[0]}

    def fresh(self) -> "Reducer":
        """A new, empty reducer with these settings (a deep copy of this one, which has seen no batch)."""
        return copy.deepcopy(self)


def concatenate(results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`Reducer.merge` for reducers whose results hold one row per input: the blocks' rows one after the other."""
    return {key: np.concatenate([r[key] for r in results]) for key in results[0]}


class RowReducer(Reducer):
    """A reducer whose result holds one row per input (or per item of an input): `update` hands each batch's
    rows to `add`, `result()` puts them one after the other, and so does `merge` for blocks; `load` keeps the
    result as `arrays`. `fresh()` shares the settings (a model, say: never copied) and holds no rows."""

    def __init__(self):
        self.parts: dict[str, list[np.ndarray]] = {}
        self.arrays: dict[str, np.ndarray] = {}

    def add(self, **rows: np.ndarray) -> None:
        """One batch's rows: name -> [rows, ...]."""
        for key, value in rows.items():
            self.parts.setdefault(key, []).append(value)

    def result(self) -> dict[str, np.ndarray]:
        """The rows added so far, one after the other; after `load`, the loaded arrays."""
        return {key: np.concatenate(parts) for key, parts in self.parts.items()} if self.parts else self.arrays

    merge = staticmethod(concatenate)

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.arrays = result

    def fresh(self) -> "RowReducer":
        new = copy.copy(self)
        new.parts, new.arrays = {}, {}
        return new


class KeepExamples(Reducer):
    """Keeps the full maps of the first `k` inputs, for figures: `.examples` is a list of `Encoded`."""

    name = "examples"

    def __init__(self, k: int = 8):
        self.k = k
        self.examples: list[Encoded] = []

    @property
    def key(self) -> str:
        return f"{self.name}-{self.k}"

    def update(self, batch: Batch) -> None:
        for i, x in enumerate(batch.inputs[:max(0, min(self.k - len(self.examples), self.k - batch.start))]):
            n = len(x.tokens)
            self.examples.append(Encoded(x.tokens, x.word_ids, x.words, x.segment_ids,
                                         batch.attn[i, :, :, :n, :n].numpy().copy(), batch.cls_token, batch.sep_token))

    def result(self) -> dict[str, np.ndarray]:
        meta = [dict(tokens=e.tokens, word_ids=e.word_ids, words=e.words, segment_ids=e.segment_ids,
                     cls_token=e.cls_token, sep_token=e.sep_token) for e in self.examples]
        arrays = {f"attn{i}": e.attn for i, e in enumerate(self.examples)}
        return {"meta": np.array(json.dumps(meta)), **arrays}

    def load(self, result: dict[str, np.ndarray]) -> None:
        meta = json.loads(str(result["meta"]))
        self.examples = [Encoded(attn=result[f"attn{i}"], **m) for i, m in enumerate(meta)]

    def merge(self, results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The blocks' examples one after the other (only the first blocks have any)."""
        meta, arrays = [], {}
        for r in results:
            for i, m in enumerate(json.loads(str(r["meta"]))):
                arrays[f"attn{len(meta)}"] = r[f"attn{i}"]
                meta.append(m)
        return {"meta": np.array(json.dumps(meta)), **arrays}


# -- the pass ---------------------------------------------------------------------------------------
def items_fingerprint(items: Sequence) -> str:
    """sha256 of the inputs as the model reads them: texts and pairs (a segment is its pair; a pair differs from a
    list of two words)."""
    tagged = [[isinstance(x, tuple), x] for x in map(_as_item, items)]
    return hashlib.sha256(json.dumps(tagged, default=_json_default).encode()).hexdigest()


def _json_default(value) -> str | list:
    """What `items_fingerprint` hashes for a value json cannot write: the words of a collection (a numpy array) as a
    list; anything else by its repr (bytes, an object: `reduce` then refuses the input, naming it)."""
    if isinstance(value, Iterator):
        raise TypeError(f"items: an input is an iterator ({type(value).__name__}), which can be read only once; "
                        "give each input as a string, a list of words or an (a, b) pair")
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        return list(value)
    return repr(value)


def reducer_version(reducer: Reducer) -> str:
    """Code version of a reducer: its package module with everything that imports; for a reducer
    defined outside the package, the source file of its class plus this engine."""
    module = type(reducer).__module__
    if module.partition(".")[0] == PACKAGE:
        return code_version(module)
    source = Path(inspect.getfile(type(reducer))).read_bytes()
    return hashlib.sha256(source + code_version(__name__).encode()).hexdigest()


def _as_item(item):
    return item.pair if isinstance(item, Segment) else item


def process_group() -> tuple[int, int]:
    """(rank, world size) of this process under torch.distributed (as `torchrun` starts it), else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _check_items(encoder: Encoder, items: Sequence, indices: Iterable[int], max_tokens: int | None) -> None:
    """Raise the error of the first items[i] (i in indices) that `Encoder.prepare` refuses, naming the item, before
    any forward pass. The prepared inputs are dropped (memory stays flat in the number of inputs; the pass
    tokenizes again), and so are warnings (the pass gives them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in indices:
            try:
                encoder.prepare(*_unpack(_as_item(items[i])), max_tokens)
            except (TypeError, ValueError) as error:
                kind = TypeError if isinstance(error, TypeError) else ValueError
                raise kind(f"item {i + 1} of {len(items)} (items[{i}]): {error}") from None


def _pass(encoder: Encoder, items: Sequence, start: int, reducers: list[Reducer], batch_size: int,
          max_tokens: int | None, bar) -> list[dict[str, np.ndarray]]:
    """Results of fresh copies of `reducers` over `items` (a block beginning at input `start`)."""
    fresh = [r.fresh() for r in reducers]
    attention = any(r.needs_attention for r in fresh)
    for batch in batches(encoder, items, batch_size, attention, max_tokens, start, reuse=True):
        for reducer in fresh:
            reducer.update(batch)
        bar.update(len(batch.inputs))
    return [r.result() for r in fresh]


def reduce(encoder: Encoder, items: Sequence, reducers: Iterable[Reducer], batch_size: int = 32,
           cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True,
           block_size: int = BLOCK_SIZE, max_tokens: int | None = None, desc: str | None = None) -> list[Reducer]:
    """Run every reducer (new, not yet updated) over the attention of `items` (segments, texts or (a, b)
    pairs, each cut to `max_tokens` when given), block by block, and fill them with the merged result.

    Blocks with a valid cache entry are restored instead of recomputed; pass cache_dir=None to skip the
    cache (and sharding). `desc` labels the progress bar. Returns the reducers, filled."""
    reducers = list(reducers)
    if not items:
        raise ValueError("no inputs to extract attention from")
    cache_dir = usable_cache(encoder.model, cache_dir)
    model_key = encoder.fingerprint if cache_dir is not None else None
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, not {block_size}")
    starts = range(0, len(items), block_size)
    cut = "" if max_tokens is None else f", cut to {max_tokens} tokens"
    data_keys = [f"{items_fingerprint(items[s:s + block_size])}: inputs from {s} in blocks of {block_size}{cut}"
                 for s in starts] if cache_dir is not None else []  # a block's key: its own inputs and place
    versions = [reducer_version(r) for r in reducers]

    def path(r: int, b: int) -> Path:
        return entry_path(cache_dir, reducers[r].name, model_key, data_keys[b], reducers[r].key, version=versions[r])

    results = [[None] * len(starts) for _ in reducers]  # [reducer][block]

    def missing(blocks) -> list[int]:
        if cache_dir is not None:
            for r in range(len(reducers)):
                for b in blocks:
                    if results[r][b] is None:
                        results[r][b] = load_result(path(r, b))
        return [b for b in blocks if any(results[r][b] is None for r in range(len(reducers)))]

    def compute(blocks: list[int], label: str) -> None:
        if not blocks:
            return
        spans = [range(starts[b], min(starts[b] + block_size, len(items))) for b in blocks]
        _check_items(encoder, items, (i for span in spans for i in span), max_tokens)
        total = sum(map(len, spans))
        with tqdm(total=total, desc=f"{desc or 'attention of ' + encoder.name}{label}", unit="input",
                  disable=not progress) as bar:
            for b in blocks:
                todo = [r for r in range(len(reducers)) if results[r][b] is None]
                start = starts[b]
                block = _pass(encoder, items[start:start + block_size], start, [reducers[r] for r in todo],
                              batch_size, max_tokens, bar)
                for r, result in zip(todo, block):
                    results[r][b] = result
                    if cache_dir is not None:
                        save_result(path(r, b), result)

    rank, world = process_group() if cache_dir is not None else (0, 1)
    compute(missing(range(rank, len(starts), world)), f" (process {rank + 1} of {world})" if world > 1 else "")
    if world > 1:
        import torch.distributed as dist

        dist.barrier()  # every process has written its blocks
    compute(missing(range(len(starts))), "")  # none, unless a process's cache is not shared
    for reducer, blocks in zip(reducers, results):
        reducer.load(reducer.merge(blocks) if len(blocks) > 1 else blocks[0])
    return reducers
