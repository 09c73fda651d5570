"""Where the sink sits and why there: the sink metric by token category, and position or content (notebook 11,
issue 32 sections 1 and 5).

Section 1, `sink_profile`: per layer and token category ([CLS] / <s>, each separator in order, "." and ",",
ordinary tokens; `gradients.CATEGORIES`, the separators numbered), the sink rate (Gu et al.: the share of the
layer's heads whose sink score exceeds eps) and the mean sink score (`sinks.sink_scores`), with intervals over
inputs; and the first token's sink rate over all heads (`sinks.sink_rate`) along a grid of eps.

Section 5 (Xiao et al. 2024; Darcet et al. 2024):
- `position_or_content`: the model reads word embeddings (`word_embeddings`) in place of token ids, so that a
  position's content can be changed while its position (and token-type) embedding stays where it is. [CLS]'s
  content is replaced at position 0 by a stand-in's ("the", a separator), and separately swapped with an
  ordinary token's further in: does the sink mass follow position 0 or [CLS]'s content?
- `registers`: k extra tokens (unused vocabulary entries, extra separators, or ordinary filler words, the
  control) inserted before the final separator or appended at the end (`append_registers`): does the sink mass
  move to them, and how far do the ordinary tokens' hidden states move?
"Sink mass" of a token is its sink score averaged over the layer's heads (the mean attention it receives over
heads and query rows); for a group of tokens, the sum over the group. Every input weighs the same.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from ...core.intervals import mean_interval
from ...core.models import Encoded, Encoder, Prepared
from ...engine.extract import Batch, batches, encoded_batches
from ..gradients import CATEGORIES, category_mask
from . import EPS, sink_rate, sink_scores

EPS_GRID = tuple(np.round(np.arange(0.05, 1.0, 0.05), 2))  # the eps of the first-token curve
PLACES = ("before_sep", "end")  # where `append_registers` puts the extra tokens
KINDS = ("unused", "sep", "filler")  # what `registers` appends: [unusedN] entries, separators, ordinary words
_UNUSED = re.compile(r"^\[unused\d+\]$")


# -- section 1: the sink metric by token category ---------------------------------------------------
def token_categories(batch: Batch, b: int = 0) -> dict[str, np.ndarray]:
    """bool [n] masks of input b's tokens by category: "cls", "sep1", "sep2", ... (each separator on its own, in
    order: one in a single text, two in a BERT pair, three in a RoBERTa pair), "punct", "other" (the kit's
    `gradients.CATEGORIES`, separators split). Categories absent from the input are left out."""
    n = int(batch.lengths[b])
    masks = {c: category_mask(batch, c)[b, :n].numpy() for c in CATEGORIES}
    found = {"cls": masks["cls"]}
    for k, position in enumerate(np.flatnonzero(masks["sep"]), start=1):
        found[f"sep{k}"] = np.arange(n) == position
    found.update(punct=masks["punct"], other=masks["other"])
    return {name: mask for name, mask in found.items() if mask.any()}


@dataclass(frozen=True)
class SinkProfile:
    """`sink_profile`'s results. per_input: one row per (input, layer, category): `sink_rate` (the share of the
    layer's heads whose sink score exceeds eps, averaged over the category's tokens) and `sink_score` (mean over
    the layer's heads and the category's tokens). curve_per_input: one row per (input, eps): `sink_rate` of the
    first token over all layers x heads (`sinks.sink_rate`)."""

    per_input: pd.DataFrame
    curve_per_input: pd.DataFrame
    eps: float

    def table(self, level: float = 0.95) -> pd.DataFrame:
        """One row per (layer, category): `sink_rate`, `sink_score`, each with `_low`, `_high` (t-interval over the
        inputs that have the category), and `inputs`."""
        return _summary(self.per_input, ["layer", "category"], ["sink_rate", "sink_score"], level)

    def curve(self, level: float = 0.95) -> pd.DataFrame:
        """One row per eps: the first token's `sink_rate` over all heads, `_low`, `_high`, `inputs`."""
        return _summary(self.curve_per_input, ["eps"], ["sink_rate"], level)


def sink_profile(inputs: Iterable[Encoded], eps: float = EPS, eps_grid: Sequence[float] = EPS_GRID) -> SinkProfile:
    """Section 1 over `inputs` (Encoded, e.g. `encoder.encode_many(pairs)`; streamed, each read once): see
    `SinkProfile`. Categories in the order cls, sep1, sep2, ..., punct, other."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie strictly between 0 and 1, got {eps}")
    grid = np.asarray(eps_grid, dtype=float)
    if grid.ndim != 1 or not len(grid) or not ((grid > 0) & (grid < 1)).all():
        raise ValueError(f"eps_grid must be a non-empty list of values strictly between 0 and 1, got {eps_grid!r}")
    rows, curve = [], []
    for i, batch in enumerate(encoded_batches(inputs)):
        attn = batch.attn[0].numpy()
        scores = sink_scores(attn)  # [L, H, n]
        above = scores > eps
        for name, mask in token_categories(batch).items():
            rates, means = above[..., mask].mean(axis=(1, 2)), scores[..., mask].mean(axis=(1, 2))
            rows += [(i, layer + 1, name, rates[layer], means[layer]) for layer in range(len(rates))]
        curve += [(i, float(e), float(sink_rate(attn, e)[0])) for e in grid]
    per_input = pd.DataFrame(rows, columns=["input", "layer", "category", "sink_rate", "sink_score"])
    order = sorted(per_input["category"].unique(), key=_category_order)
    per_input["category"] = pd.Categorical(per_input["category"], categories=order, ordered=True)
    return SinkProfile(per_input, pd.DataFrame(curve, columns=["input", "eps", "sink_rate"]), float(eps))


def _category_order(name: str) -> tuple[int, int]:
    if name.startswith("sep"):
        return 1, int(name[3:])
    return {"cls": 0, "punct": 2, "other": 3}[name], 0


def _summary(frame: pd.DataFrame, keys: list[str], measures: list[str], level: float) -> pd.DataFrame:
    """Mean and t-interval over inputs of each measure per group of `keys` (NaN bounds under two inputs)."""
    rows = []
    for key, group in frame.groupby(keys, sort=True, observed=True):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        for measure in measures:
            values = group[measure].to_numpy(dtype=float)
            finite = values[np.isfinite(values)]
            if len(finite) >= 2:
                mean, low, high = mean_interval(finite, level)
            else:
                mean, low, high = (finite.mean() if len(finite) else np.nan), np.nan, np.nan
            row.update({measure: mean, f"{measure}_low": low, f"{measure}_high": high})
        row["inputs"] = group["input"].nunique()
        rows.append(row)
    return pd.DataFrame(rows)


# -- section 5: position or content -------------------------------------------------------------------
def word_embeddings(encoder: Encoder, content_ids: torch.Tensor) -> torch.Tensor:
    """long [B, T] -> [B, T, E]: the rows of the model's word-embedding table (`get_input_embeddings()`) only.
    Given as `inputs_embeds`, the model adds the position (and token-type) embeddings of each position and its
    embedding LayerNorm, exactly as for input_ids (BERT, RoBERTa, DistilBERT, ELECTRA)."""
    content_ids = torch.as_tensor(content_ids)
    if content_ids.ndim != 2 or content_ids.dtype != torch.long:
        raise ValueError(f"content_ids must be long token ids [batch, tokens], got {content_ids.dtype} "
                         f"{tuple(content_ids.shape)}")
    table = encoder.model.get_input_embeddings()
    if content_ids.numel() and not 0 <= int(content_ids.min()) <= int(content_ids.max()) < table.num_embeddings:
        raise ValueError(f"content_ids must be token ids from 0 to {table.num_embeddings - 1}")
    return table(content_ids.to(table.weight.device)).cpu()  # the model's inputs live on the CPU (`models.place`)


@dataclass(frozen=True)
class Pass:
    """One forward pass: attn [B, L, H, T, T] and hidden [B, L, T, D] (each layer's output states)."""

    attn: torch.Tensor
    hidden: torch.Tensor


@torch.inference_mode()
def run_pass(encoder: Encoder, inputs: dict[str, torch.Tensor], content_ids: torch.Tensor | None = None) -> Pass:
    """Run the model on padded `inputs` (`Encoder.pad`); with `content_ids` [B, T], on `word_embeddings(content_ids)`
    instead of input_ids, keeping the inputs' attention mask and token types (positions stay where they are)."""
    kwargs = dict(inputs)
    if content_ids is not None:
        if tuple(content_ids.shape) != tuple(inputs["input_ids"].shape):
            raise ValueError(f"content_ids must have the inputs' shape {tuple(inputs['input_ids'].shape)}, got "
                             f"{tuple(content_ids.shape)}")
        del kwargs["input_ids"]
        kwargs["inputs_embeds"] = word_embeddings(encoder, content_ids)
    out = encoder.model(**kwargs, output_attentions=True, output_hidden_states=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError(f"{encoder.name} returned no attention maps; load it with eager attention")
    return Pass(torch.stack(out.attentions, 1), torch.stack(out.hidden_states[1:], 1))


def _layer_mass(attn: torch.Tensor, n: int) -> np.ndarray:
    """One input's padded maps [L, H, T, T] -> [L, n]: each real token's sink score averaged over heads."""
    return sink_scores(attn[:, :, :n, :n].numpy()).mean(axis=1)


def _cosine_distance(a: torch.Tensor, b: torch.Tensor, mask: np.ndarray) -> np.ndarray:
    """States [L, T, D] of two passes -> [L]: 1 - cos, mean over the tokens of `mask` [T] (NaN if none)."""
    if not mask.any():
        return np.full(a.shape[0], np.nan)
    keep = torch.from_numpy(mask)
    cos = torch.nn.functional.cosine_similarity(a[:, keep].double(), b[:, keep].double(), dim=-1)
    return (1 - cos).clamp_min(0).mean(-1).numpy()  # clamp: cos can round to just above 1


def _single_id(encoder: Encoder, token: str, argument: str) -> int:
    """The id of `token`: a vocabulary entry (e.g. "[SEP]", "Ġthe") or a word that is one token after a space."""
    vocab = encoder.tokenizer.get_vocab()
    if token in vocab:
        return vocab[token]
    ids = encoder.tokenizer(" " + token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"{argument}: {token!r} is {len(ids)} tokens for {encoder.name}'s tokenizer; give one token")
    return ids[0]


def _middle_other(other: np.ndarray) -> int:
    found = np.flatnonzero(other)
    if not len(found):
        raise ValueError("an input has no ordinary token to swap [CLS]'s content with")
    return int(found[len(found) // 2])


def _frame(rows: list[tuple], columns: list[str], per_input: bool, level: float) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["input", "variant", "layer", *columns])
    if per_input:
        return frame
    order = list(dict.fromkeys(frame["variant"]))
    frame["variant"] = pd.Categorical(frame["variant"], categories=order, ordered=True)
    summary = _summary(frame, ["variant", "layer"], columns, level)
    summary["variant"] = summary["variant"].astype(str)
    return summary


def position_or_content(encoder: Encoder, items: Sequence, stand_ins: Sequence[str] | None = None,
                        moved_to: int | None = None, batch_size: int = 16, per_input: bool = False,
                        level: float = 0.95) -> pd.DataFrame:
    """Does the sink mass follow position 0 or [CLS]'s content? Variants, each a forward pass on word embeddings
    (`run_pass`; positions and token types unchanged): "original"; "first=<t>" for each stand-in t (default "the"
    and the separator): position 0 reads t's word embedding; "cls<->k": [CLS]'s content and that of the token at
    position k (`moved_to`; default the middle ordinary token of each input) swap places.

    One row per (variant, layer): `first` (sink mass on position 0), `cls_content` (on the position holding [CLS]'s
    word embedding; NaN when none does), `swapped` (on position k; NaN outside "cls<->k"), `sep` (summed over the
    separators), `other` (mean per ordinary token), `ordinary_change` (1 - cos of the layer's output states against
    "original", mean over the ordinary tokens but position k), each with `_low`, `_high` over inputs, and `inputs`.
    per_input=True: the same per input (column `input`), no intervals."""
    items = list(items)
    if not items:
        raise ValueError("items: no inputs; give texts or (a, b) pairs")
    stand_ins = ["the", encoder.sep_token] if stand_ins is None else list(stand_ins)
    stand_in_ids = [(t, _single_id(encoder, t, "stand_ins")) for t in stand_ins]
    if moved_to is not None and (isinstance(moved_to, bool) or not isinstance(moved_to, int) or moved_to < 1):
        raise ValueError(f"moved_to must be a token position of 1 or more (0 is [CLS] itself), got {moved_to!r}")
    columns = ["first", "cls_content", "swapped", "sep", "other", "ordinary_change"]
    rows = []
    for batch in batches(encoder, items, batch_size, attention=False):
        ids = batch.model_inputs["input_ids"]
        lengths = batch.lengths.tolist()
        other = batch.other.numpy()
        if moved_to is None:
            targets = [_middle_other(other[b, :n]) for b, n in enumerate(lengths)]
        else:
            if moved_to >= min(lengths):
                raise ValueError(f"moved_to={moved_to} is past the end of an input of {min(lengths)} tokens")
            targets = [moved_to] * len(lengths)
        variants = [("original", ids, [0] * len(lengths))]
        for token, token_id in stand_in_ids:
            replaced = ids.clone()
            replaced[:, 0] = token_id
            cls_at = 0 if token_id == encoder.tokenizer.cls_token_id else None  # the identity swap
            variants.append((f"first={token}", replaced, [cls_at] * len(lengths)))
        swapped = ids.clone()
        rows_index = torch.arange(len(lengths))
        k = torch.tensor(targets)
        swapped[rows_index, 0], swapped[rows_index, k] = ids[rows_index, k], ids[rows_index, 0]
        name = "cls<->middle" if moved_to is None else f"cls<->{moved_to}"
        variants.append((name, swapped, targets))
        base = None
        for variant, content, cls_at in variants:
            result = run_pass(encoder, batch.model_inputs, content)
            base = result if base is None else base
            for b, n in enumerate(lengths):
                mass = _layer_mass(result.attn[b], n)  # [L, n]
                sep = batch.is_sep[b, :n].numpy()
                ordinary = other[b, :n].copy()
                ordinary[targets[b]] = False
                nan = np.full(mass.shape[0], np.nan)
                values = [mass[:, 0], nan if cls_at[b] is None else mass[:, cls_at[b]],
                          mass[:, targets[b]] if variant == name else nan, mass[:, sep].sum(-1),
                          mass[:, other[b, :n]].mean(-1) if other[b, :n].any() else nan,
                          _cosine_distance(base.hidden[b, :, :n], result.hidden[b, :, :n], ordinary)]
                rows += [(batch.start + b, variant, layer + 1, *(v[layer] for v in values))
                         for layer in range(mass.shape[0])]
    return _frame(rows, columns, per_input, level)


def register_ids(encoder: Encoder, kind: str, k: int, filler: str = "the") -> list[int]:
    """k token ids to append: "unused" the vocabulary's first k [unusedN] entries (BERT's WordPiece; a
    ValueError for a vocabulary without them, such as RoBERTa's), "sep" k separators, "filler" k copies of the
    ordinary word `filler` (one token)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive number of tokens, got {k!r}")
    if kind == "sep":
        return [encoder.tokenizer.sep_token_id] * k
    if kind == "filler":
        return [_single_id(encoder, filler, "filler")] * k
    if kind == "unused":
        vocab = encoder.tokenizer.get_vocab()
        unused = sorted((int(t[7:-1]), i) for t, i in vocab.items() if _UNUSED.match(t))
        if len(unused) < k:
            raise ValueError(f"kind: {encoder.name}'s vocabulary has {len(unused)} [unusedN] entries, {k} needed; "
                             "use kind 'sep' or 'filler'")
        return [i for _, i in unused[:k]]
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def append_registers(encoder: Encoder, prepared: Prepared, ids: Sequence[int], where: str = "before_sep"
                     ) -> tuple[Prepared, np.ndarray]:
    """`prepared` with the tokens `ids` inserted before its final separator ("before_sep") or after it ("end"),
    each its own word, in the segment of its neighbour; and bool [n + k], True at the added tokens. Every other
    token keeps its position but the final separator under "before_sep" (k further on)."""
    if where not in PLACES:
        raise ValueError(f"where must be one of {PLACES}, got {where!r}")
    n, ids = len(prepared.input_ids), list(ids)
    if not ids:
        raise ValueError("ids: give at least one token to append")
    if n + len(ids) > encoder.max_tokens:
        raise ValueError(f"ids: {n} + {len(ids)} tokens is more than {encoder.name} accepts ({encoder.max_tokens})")
    if where == "before_sep" and prepared.tokens[-1] != encoder.sep_token:
        raise ValueError(f"where='before_sep' needs an input ending in {encoder.sep_token}")
    at = n - 1 if where == "before_sep" else n
    k = len(ids)

    def insert(values: list, new: list) -> list:
        return values[:at] + new + values[at:]

    tokens = encoder.tokenizer.convert_ids_to_tokens(ids)
    words = list(prepared.words) + tokens
    word_ids = insert(list(prepared.word_ids), list(range(len(prepared.words), len(words))))
    added = insert([False] * n, [True] * k)
    extended = dataclasses.replace(
        prepared, input_ids=insert(list(prepared.input_ids), ids),
        token_type_ids=insert(list(prepared.token_type_ids), [prepared.token_type_ids[at - 1]] * k),
        tokens=insert(list(prepared.tokens), tokens), word_ids=word_ids, words=words,
        segment_ids=insert(list(prepared.segment_ids), [prepared.segment_ids[at - 1]] * k))
    return extended, np.array(added)


def registers(encoder: Encoder, items: Sequence, k: int = 4, kinds: Sequence[str] = KINDS,
              where: str = "before_sep", filler: str = "the", batch_size: int = 16, per_input: bool = False,
              level: float = 0.95) -> pd.DataFrame:
    """Do k extra tokens take the sink mass, and what do they do to the ordinary tokens? Variants: "original" and
    one per kind ("unused", "sep", "filler": `register_ids`), the k tokens placed by `append_registers`.

    One row per (variant, layer): `first` (sink mass on position 0), `sep` (summed over the original separators),
    `added` (summed over the k added tokens; NaN for "original"), `added_max` (on the added token that draws most),
    `other` (mean per ordinary token), `ordinary_change` (1 - cos of the layer's output states against "original",
    mean over the ordinary tokens, which keep their positions), each with `_low`, `_high` over inputs, and
    `inputs`. per_input=True: the same per input, no intervals."""
    items = list(items)
    if not items:
        raise ValueError("items: no inputs; give texts or (a, b) pairs")
    if not kinds or any(kind not in KINDS for kind in kinds):
        raise ValueError(f"kinds must be some of {KINDS}, got {kinds!r}")
    extra = {kind: register_ids(encoder, kind, k, filler) for kind in kinds}
    columns = ["first", "sep", "added", "added_max", "other", "ordinary_change"]
    rows = []
    for batch in batches(encoder, items, batch_size, attention=False):
        lengths = batch.lengths.tolist()
        other, sep = batch.other.numpy(), batch.is_sep.numpy()
        base = run_pass(encoder, batch.model_inputs)
        variants = [("original", base, [np.zeros(n, bool) for n in lengths])]
        for kind, ids in extra.items():
            grown = [append_registers(encoder, p, ids, where) for p in batch.inputs]
            variants.append((kind, run_pass(encoder, encoder.pad([p for p, _ in grown])), [a for _, a in grown]))
        for variant, result, added in variants:
            for b, n in enumerate(lengths):
                every = _layer_mass(result.attn[b], len(added[b]))  # [L, n + k]
                mass, extra_mass = every[:, ~added[b]], every[:, added[b]]
                ordinary = other[b, :n]
                nan = np.full(mass.shape[0], np.nan)
                kept = torch.from_numpy(np.flatnonzero(~added[b]))
                values = [mass[:, 0], mass[:, sep[b, :n]].sum(-1),
                          extra_mass.sum(-1) if added[b].any() else nan,
                          extra_mass.max(-1) if added[b].any() else nan,
                          mass[:, ordinary].mean(-1) if ordinary.any() else nan,
                          _cosine_distance(base.hidden[b, :, :n], result.hidden[b][:, kept], ordinary)]
                rows += [(batch.start + b, variant, layer + 1, *(v[layer] for v in values))
                         for layer in range(mass.shape[0])]
    return _frame(rows, columns, per_input, level)
