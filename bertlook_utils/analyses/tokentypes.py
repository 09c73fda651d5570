"""Attention by token type: [CLS] and [SEP] per layer, what [CLS] attends to, and where vertical stripes fall
(Kovaleva et al. 2019, §4.4 and §4.5).

    result = token_type_attention(encoder, items)    # texts or (a, b) pairs; tagged by spaCy, one cached pass
    result.special_by_layer()                        # [CLS] / [SEP] / punctuation mass per layer
    result.cls_by_type()                             # the last layer's [CLS] row, by type, vs the base rate
    result.stripe_table(0.2)                         # which token types the vertical stripes fall on
    special_change(before, after)                    # a pre-trained and a fine-tuned model on the same inputs

Token types come from spaCy's tags and parses of the inputs (`parses.tag_texts`: silver, like every parse in
the kit); each input is encoded from the parser's words (pre-split), so every token belongs to one tagged word
and the wordpieces of a word share its types. A word may have several types (a noun that is a subject is both):

    [CLS], [SEP]   the special tokens (every [SEP] of a pair)
    punctuation    coarse tag PUNCT (every punctuation mark, not only Clark's "." and ","); a punctuation word
                   has no other type, so [CLS], [SEP], punctuation, "linguistic" and "other" partition the tokens
    noun           NOUN, PROPN          verb      VERB (not AUX)          pronoun   PRON
    subject        nsubj, nsubjpass, csubj, csubjpass (the head word of the subject)
    object         dobj, iobj, dative, pobj (the head word of the object; pobj: object of a preposition)
    negation       dependency neg, or one of NEGATION_WORDS (a word list added to the parse: spaCy labels
                   "never", "not", "n't" neg but "no", "nothing", "nobody" as det / nsubj / dobj ...)
    other          a word of none of these types

The types overlap; EXCLUSIVE puts each token in one category instead, by its coarse tag alone: [CLS], [SEP],
punctuation, noun, verb, pronoun and "other words" (every other word: adjectives, adverbs, determiners,
adpositions, auxiliaries, numbers, ...). A word has one coarse tag, so these shares add up to 1 and
`exclusive_cls_change` reads them off the same pass (other words: 1 minus the rest).

Two groups are counted too (GROUPS): "special or punctuation" ([CLS], [SEP], punctuation) and "linguistic"
(a word of any of the six linguistic types).

Per head [L, H], averaged over inputs (every input weighs the same):
- cls: the mass of the [CLS] row on each type; `base_rate` the type's share of the input's tokens (what a
  uniform row gives);
- rows: the mass on each type averaged over every real row ([CLS] and [SEP] rows included): the [CLS] and
  [SEP] columns of it are "attention to [CLS] / [SEP]" per head and layer.
Both are also kept per input, averaged over each layer's heads, so that shares and before/after changes come
with 95 % t-intervals over inputs (paired for changes: the same inputs through both models).

Vertical stripes, independent of the pattern classifier: in one map (one input, one head) a column is a
*stripe* when it receives on average at least `threshold` of each row's attention (mean over the real rows of
that column's weight). DEFAULT_THRESHOLD = 0.2: a fifth of every row, five to twelve times what a column gets
from a uniform head on inputs of 25-60 tokens, and at most five columns of a map can reach it. Every pass also
counts STRIPE_THRESHOLDS (0.1 and 0.4) so a conclusion can be checked at another value; at 0.1 every column of
a uniform head over fewer than 10 tokens is a stripe, so a low threshold suits long inputs only. Per type: the
number of stripes on tokens of that type, over all maps (input x head), against the type's share of all tokens;
and the mean attention a token of the type receives (its column's mean over rows), relative to the mean over
all tokens (1 = average).
Token-level throughout: a word split into three wordpieces is three columns.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..core.cache import DEFAULT_CACHE_DIR
from ..core.conventions import check_index, head_frame
from ..engine.extract import Batch, Reducer, reduce
from ..core.intervals import mean_interval
from ..core.models import Encoder
from ..data.parses import PUNCT_POS, Sentence, tag_texts

TYPES = ("[CLS]", "[SEP]", "punctuation", "noun", "verb", "pronoun", "subject", "object", "negation", "other")
LINGUISTIC = ("noun", "verb", "pronoun", "subject", "object", "negation")
UNTYPED = "other words"  # the EXCLUSIVE category of every word that is none of the typed ones
EXCLUSIVE = ("[CLS]", "[SEP]", "punctuation", "noun", "verb", "pronoun", UNTYPED)  # one per token, by coarse tag


class Group(StrEnum):
    """The two groups of token types (GROUPS); the value is the label the tables show."""

    SPECIAL = "special or punctuation"
    LINGUISTIC = "linguistic"


GROUPS = {Group.SPECIAL: ("[CLS]", "[SEP]", "punctuation"), Group.LINGUISTIC: LINGUISTIC}
CATEGORIES = TYPES + tuple(GROUPS)  # every row of every table: the types, then the groups
POS_TYPES = {"noun": ("NOUN", "PROPN"), "verb": ("VERB",), "pronoun": ("PRON",)}
DEP_TYPES = {"subject": ("nsubj", "nsubjpass", "csubj", "csubjpass"), "object": ("dobj", "iobj", "dative", "pobj"),
             "negation": ("neg",)}
NEGATION_WORDS = frozenset({"not", "n't", "no", "never", "nor", "neither", "none", "nobody", "nothing", "nowhere"})
STRIPE_THRESHOLDS = (0.1, 0.2, 0.4)
DEFAULT_THRESHOLD = 0.2

Tags = Sentence | tuple[Sentence, Sentence]  # the tagged words of a text, or of both texts of a pair


# -- types of words ---------------------------------------------------------------------------------
def word_types(sentence: Sentence) -> np.ndarray:
    """bool [n_words, len(TYPES)]: the types of each tagged word ([CLS] and [SEP] columns False)."""
    types = np.zeros((len(sentence), len(TYPES)), dtype=bool)
    for i, (word, pos, dep) in enumerate(zip(sentence.words, sentence.pos, sentence.relations)):
        if pos == PUNCT_POS:
            types[i, TYPES.index("punctuation")] = True
            continue
        for name, tags in POS_TYPES.items():
            types[i, TYPES.index(name)] = pos in tags
        for name, labels in DEP_TYPES.items():
            types[i, TYPES.index(name)] = dep in labels
        types[i, TYPES.index("negation")] |= word.lower() in NEGATION_WORDS
        types[i, TYPES.index("other")] = not types[i].any()
    return types


def with_groups(types: np.ndarray) -> np.ndarray:
    """bool [..., len(TYPES)] -> bool [..., len(CATEGORIES)]: the types, then each group (any of its types)."""
    groups = [types[..., [TYPES.index(t) for t in members]].any(-1) for members in GROUPS.values()]
    return np.concatenate([types, np.stack(groups, -1)], -1)


def _parts(tags: Tags) -> tuple[Sentence, ...]:
    return tags if isinstance(tags, tuple) else (tags,)


def token_categories(words: Sequence[str], word_ids: Sequence[int], segment_ids: Sequence[int],
                     is_cls: Sequence[bool], is_sep: Sequence[bool], tags: Tags) -> np.ndarray:
    """bool [n, len(CATEGORIES)] for one encoded input, every wordpiece with the types of its word.

    words, word_ids, segment_ids: as in `models.Encoded` (special tokens are words of their own); tags: the
    tagged words of text a (and b) in order. The input may have been cut: each text's words must be a prefix
    of its tagged words."""
    parts = _parts(tags)
    per_part = [word_types(s) for s in parts]
    n = len(word_ids)
    first: dict[int, int] = {}  # segment -> word id of its first word
    for w, s, c, p in zip(word_ids, segment_ids, is_cls, is_sep):
        if not (c or p):
            first.setdefault(s, w)
    out = np.zeros((n, len(TYPES)), dtype=bool)
    for t in range(n):
        if is_cls[t] or is_sep[t]:
            out[t, TYPES.index("[CLS]" if is_cls[t] else "[SEP]")] = True
            continue
        s, w = segment_ids[t], word_ids[t]
        local = w - first[s]
        if s >= len(parts) or local >= len(parts[s]) or words[w] != parts[s].words[local]:
            raise ValueError(f"the encoded words differ from the tagged words of {parts[min(s, len(parts) - 1)].id!r} "
                             "(text a and b in order): encode each input from its own tagged words (pre-split)")
        out[t] = per_part[s][local]
    return with_groups(out)


# -- the pass ---------------------------------------------------------------------------------------
def tags_fingerprint(tags: Sequence[Tags]) -> str:
    """sha256 of the tagged inputs: words, coarse tags and relations of every text."""
    digest = hashlib.sha256()
    for item in tags:
        digest.update(json.dumps([[list(s.words), list(s.pos), list(s.relations)] for s in _parts(item)]).encode())
    return digest.hexdigest()


def _check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(t) for t in thresholds)
    if not values or any(not 0 < t <= 1 for t in values) or len(set(values)) != len(values):
        raise ValueError(f"stripe thresholds must be distinct numbers in (0, 1], got {tuple(thresholds)!r}")
    return values


PER_INPUT = ("cls_by_input", "rows_by_input")  # result arrays with one row per input (the others are sums)


class TokenTypeSums(Reducer):
    """Streams attention and keeps, per category (CATEGORIES) and head, running sums over inputs: the [CLS]
    row's mass, the mass averaged over rows, and the stripes at each threshold; the token counts; and, per
    input, the two masses averaged over each layer's heads (for paired intervals). tags[k] are the tagged
    words of input k of the pass."""

    name = "token_types"

    def __init__(self, tags: Sequence[Tags], thresholds: Sequence[float] = STRIPE_THRESHOLDS):
        self.tags = list(tags)
        self.thresholds = _check_thresholds(thresholds)
        self.sums: dict[str, np.ndarray] = {}
        self.rows: dict[str, list[np.ndarray]] = {name: [] for name in PER_INPUT}

    @property
    def key(self) -> str:
        return f"{self.name}-{self.thresholds}-{tags_fingerprint(self.tags)[:24]}"

    def update(self, batch: Batch) -> None:
        attn = batch.attn  # [B, L, H, T, T]
        B, T = batch.valid.shape
        if batch.start + B > len(self.tags):
            raise ValueError(f"input {batch.start + B - 1} has no tagged words ({len(self.tags)} given): give one per "
                             "input, in order")
        masks = torch.zeros(B, T, len(CATEGORIES), dtype=torch.float64)  # [B, T, C]
        for i, x in enumerate(batch.inputs):
            n = len(x.tokens)
            found = token_categories(x.words, x.word_ids, x.segment_ids, batch.is_cls[i, :n].tolist(),
                                     batch.is_sep[i, :n].tolist(), self.tags[batch.start + i])
            masks[i, :n] = torch.from_numpy(found.astype(np.float64))
        if not batch.is_cls.any(1).all():
            raise ValueError("an input has no start token ([CLS]); its row is undefined")
        n = batch.lengths.double()
        cls_rows = attn[torch.arange(B), :, :, batch.is_cls.float().argmax(1)].double()  # [B, L, H, T]
        columns = (torch.einsum("blhij,bi->blhj", attn, batch.valid.float()).double()  # [B, L, H, T]: mean per column
                   / n[:, None, None, None])
        thresholds = torch.tensor(self.thresholds, dtype=torch.float64)
        stripes = (columns[None] >= thresholds[:, None, None, None, None]).double()  # [S, B, L, H, T]
        cls_mass = torch.einsum("blht,btc->bclh", cls_rows, masks)  # [B, C, L, H]
        row_mass = torch.einsum("blht,btc->bclh", columns, masks)
        self.rows["cls_by_input"].append(cls_mass.mean(-1).float().numpy())
        self.rows["rows_by_input"].append(row_mass.mean(-1).float().numpy())
        self._add({
            "cls_mass": cls_mass.sum(0), "row_mass": row_mass.sum(0),
            "stripes": torch.einsum("sblht,btc->sclh", stripes, masks).round().long(),
            "stripe_columns": stripes.sum((1, 4)).round().long(),
            "striped_maps": (stripes.amax(-1) > 0).sum(1),
            "tokens": masks.sum((0, 1)).round().long(),
            "base_rate": (masks.sum(1) / n[:, None]).sum(0),
            "inputs": torch.tensor(B), "all_tokens": batch.lengths.sum(),
        })

    def _add(self, values: dict[str, torch.Tensor]) -> None:
        for name, value in values.items():
            self.sums[name] = self.sums.get(name, 0) + value.numpy()

    def result(self) -> dict[str, np.ndarray]:
        if not self.sums:
            raise ValueError(f"{self.name}: no inputs were seen")
        return {**{name: np.asarray(value) for name, value in self.sums.items()},
                **{name: np.concatenate(rows) for name, rows in self.rows.items()}}

    def merge(self, results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The blocks' sums added, their per-input rows one after the other."""
        return {key: np.concatenate([r[key] for r in results]) if key in PER_INPUT else sum(r[key] for r in results)
                for key in results[0]}

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.sums = {key: value for key, value in result.items() if key not in PER_INPUT}
        self.rows = {key: [result[key]] for key in PER_INPUT}


# -- the result -------------------------------------------------------------------------------------
def _category(name: str) -> int:
    if name not in CATEGORIES:
        raise ValueError(f"unknown token type {name!r}; use one of {CATEGORIES}")
    return CATEGORIES.index(name)


def _kind(name: str) -> str:
    return "group" if name in GROUPS else "type"


@dataclass
class TokenTypeAttention:
    """Attention by token type over a set of inputs (sums over inputs; see the module's docstring).

    cls_mass, row_mass: float [C, L, H] sums over inputs (C = len(CATEGORIES)); cls_by_input, rows_by_input:
    float32 [N, C, L] the same per input, averaged over each layer's heads; stripes: int [S, C, L, H] stripes
    on each category per threshold; stripe_columns, striped_maps: int [S, L, H] all stripes, and maps with at
    least one; tokens: int [C] token counts; base_rate: float [C] sum over inputs of the category's share of
    the input's tokens; n_inputs, n_tokens; thresholds: [S]; inputs_key: fingerprint of the tagged inputs
    (results to compare must share it)."""

    cls_mass: np.ndarray
    row_mass: np.ndarray
    cls_by_input: np.ndarray
    rows_by_input: np.ndarray
    stripes: np.ndarray
    stripe_columns: np.ndarray
    striped_maps: np.ndarray
    tokens: np.ndarray
    base_rate: np.ndarray
    n_inputs: int
    n_tokens: int
    thresholds: tuple[float, ...]
    inputs_key: str
    model: str = ""

    @classmethod
    def from_sums(cls, sums: dict[str, np.ndarray], thresholds: Sequence[float], inputs_key: str,
                  model: str = "") -> "TokenTypeAttention":
        arrays = ("cls_mass", "row_mass", "cls_by_input", "rows_by_input", "stripes", "stripe_columns",
                  "striped_maps", "tokens", "base_rate")
        return cls(*(sums[name] for name in arrays), int(sums["inputs"]), int(sums["all_tokens"]),
                   _check_thresholds(thresholds), inputs_key, model)

    @property
    def n_layers(self) -> int:
        return self.cls_mass.shape[1]

    @property
    def n_heads(self) -> int:
        return self.cls_mass.shape[2]

    def _layers(self, layer: int | None) -> slice:
        """0-based slice of one 1-indexed layer, or of every layer (None)."""
        if layer is None:
            return slice(None)
        check_index(layer, self.n_layers, "layer")
        return slice(layer - 1, layer)

    def _threshold(self, threshold: float) -> int:
        for s, t in enumerate(self.thresholds):
            if abs(t - threshold) < 1e-9:
                return s
        raise ValueError(f"stripes were counted at thresholds {self.thresholds}, not {threshold}; pass "
                         "thresholds=... to token_type_attention to count them")

    def by_head(self, category: str, source: str = "rows") -> pd.DataFrame:
        """One row per head: layer, head, mass (mean over inputs) on `category` from the [CLS] row (source
        "cls") or averaged over all rows ("rows")."""
        if source not in ("cls", "rows"):
            raise ValueError(f"source must be 'cls' or 'rows', not {source!r}")
        mass = self.cls_mass if source == "cls" else self.row_mass
        return head_frame({"mass": mass[_category(category)] / self.n_inputs})

    def special_by_layer(self) -> pd.DataFrame:
        """Attention to [CLS], [SEP] and punctuation per layer (index 1..L): the mass averaged over rows, heads
        and inputs; `cls_base`, `sep_base`, `punctuation_base`: their share of tokens (a uniform head's mass)."""
        columns = {}
        for name, category in (("cls", "[CLS]"), ("sep", "[SEP]"), ("punctuation", "punctuation")):
            columns[name] = self.row_mass[_category(category)].mean(1) / self.n_inputs
        for name, category in (("cls", "[CLS]"), ("sep", "[SEP]"), ("punctuation", "punctuation")):
            columns[f"{name}_base"] = np.full(self.n_layers, self.base_rate[_category(category)] / self.n_inputs)
        return pd.DataFrame(columns, index=pd.Index(range(1, self.n_layers + 1), name="layer"))

    def cls_by_type(self, layer: int | None = None) -> pd.DataFrame:
        """What the [CLS] row attends to in `layer` (1-indexed; default the last), one row per category:
        category, kind ("type" / "group"), share (mass, mean over the layer's heads and the inputs), base_rate
        (the category's mean share of an input's tokens), relative (share / base_rate; NaN for a category
        absent from the inputs), share_low, share_high (95 % t-interval over inputs; NaN for one input),
        head_min, head_max (the least and most of any head of the layer)."""
        layer = self.n_layers if layer is None else layer
        per_head = self.cls_mass[:, self._layers(layer)][:, 0] / self.n_inputs  # [C, H]
        base = self.base_rate / self.n_inputs
        share = per_head.mean(1)
        low, high = _intervals(self.cls_by_input[:, :, layer - 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = np.where(self.tokens > 0, share / base, np.nan)
        return pd.DataFrame({"category": CATEGORIES, "kind": [_kind(c) for c in CATEGORIES], "share": share,
                             "base_rate": base, "relative": relative, "share_low": low, "share_high": high,
                             "head_min": per_head.min(1), "head_max": per_head.max(1)})

    def stripe_table(self, threshold: float = DEFAULT_THRESHOLD, layer: int | None = None) -> pd.DataFrame:
        """Where the stripes fall, over every map (input x head) of `layer` (1-indexed; None: all layers), one
        row per category: category, kind, stripes (count), share_of_stripes (stripes on the category / all
        stripes; the types overlap, [CLS], [SEP], punctuation, linguistic and other add up to 1),
        share_of_tokens (the category's share of all tokens: the base rate), ratio (share_of_stripes /
        share_of_tokens), received (mean attention a token of the category receives, relative to the mean over
        all tokens; NaN for a category absent from the inputs)."""
        s, layers = self._threshold(threshold), self._layers(layer)
        counts = self.stripes[s][:, layers].sum((1, 2))  # [C]
        total = self.stripe_columns[s][layers].sum()
        share_of_tokens = self.tokens / self.n_tokens
        per_token = self.row_mass[:, layers].mean((1, 2)) / np.maximum(self.tokens, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = counts / total if total else np.full(len(CATEGORIES), np.nan)
            ratio = np.where(self.tokens > 0, share / share_of_tokens, np.nan)
            received = np.where(self.tokens > 0, per_token / (self.n_inputs / self.n_tokens), np.nan)
        return pd.DataFrame({"category": CATEGORIES, "kind": [_kind(c) for c in CATEGORIES], "stripes": counts,
                             "share_of_stripes": share, "share_of_tokens": share_of_tokens, "ratio": ratio,
                             "received": received})

    def stripes_by_layer(self, threshold: float = DEFAULT_THRESHOLD) -> pd.DataFrame:
        """Stripes per layer (index 1..L): maps (inputs x heads), striped_maps (share with at least one stripe),
        stripes (count), and one column per category: its share of the layer's stripes (NaN: no stripe)."""
        s = self._threshold(threshold)
        total = self.stripe_columns[s].sum(1)  # [L]
        frame = pd.DataFrame({"maps": self.n_inputs * self.n_heads,
                              "striped_maps": self.striped_maps[s].sum(1) / (self.n_inputs * self.n_heads),
                              "stripes": total}, index=pd.Index(range(1, self.n_layers + 1), name="layer"))
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = self.stripes[s].sum(2) / np.where(total > 0, total, np.nan)  # [C, L]
        for c, name in enumerate(CATEGORIES):
            frame[name] = shares[c]
        return frame


class Stripes(StrEnum):
    """The share columns of `stripe_summary`; the value is the label the table shows."""

    SPECIAL = "special or punct."  # share of the stripes on [CLS], [SEP] and punctuation
    CLS = "[CLS]"  # share of the stripes on [CLS]
    SPECIAL_TOKENS = "special or punct. tokens"  # share of the tokens that are [CLS], [SEP] or punctuation
    LINGUISTIC = "linguistic"  # share of the stripes on linguistic types
    LINGUISTIC_TOKENS = "linguistic tokens"  # share of the tokens of a linguistic type


def stripe_summary(results: Mapping[str, Mapping[str, TokenTypeAttention]],
                   thresholds: Sequence[float] = STRIPE_THRESHOLDS) -> pd.DataFrame:
    """Where the stripes fall, one row per task, model and threshold, in the order given: task, model, threshold,
    stripes (count over every layer), then `Stripes`' shares. results: task -> model (e.g. `finetune.Stage`) ->
    `TokenTypeAttention`."""
    rows = []
    for task, by_model in results.items():
        for model, result in by_model.items():
            for threshold in thresholds:
                frame = result.stripe_table(threshold).set_index("category")
                rows.append((task, model, threshold, int(result.stripes_by_layer(threshold)["stripes"].sum()),
                             frame.loc[Group.SPECIAL, "share_of_stripes"], frame.loc["[CLS]", "share_of_stripes"],
                             frame.loc[Group.SPECIAL, "share_of_tokens"],
                             frame.loc[Group.LINGUISTIC, "share_of_stripes"],
                             frame.loc[Group.LINGUISTIC, "share_of_tokens"]))
    return pd.DataFrame(rows, columns=["task", "model", "threshold", "stripes", *Stripes])


def _intervals(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) [...] of the 95 % t-interval of the mean over inputs of values [N, ...]; NaN for N < 2."""
    flat = values.reshape(len(values), -1).astype(np.float64)
    if len(values) < 2:
        return np.full(values.shape[1:], np.nan), np.full(values.shape[1:], np.nan)
    bounds = np.array([mean_interval(flat[:, j])[1:] for j in range(flat.shape[1])])  # [K, 2]
    return bounds[:, 0].reshape(values.shape[1:]), bounds[:, 1].reshape(values.shape[1:])


def _same_inputs(before: TokenTypeAttention, after: TokenTypeAttention) -> None:
    if before.inputs_key != after.inputs_key or before.cls_mass.shape != after.cls_mass.shape:
        raise ValueError("before and after must be computed on the same tagged inputs with models of the same "
                         "size (e.g. a model and its fine-tuned copy)")


def special_change(before: TokenTypeAttention, after: TokenTypeAttention) -> pd.DataFrame:
    """Attention to [CLS] and [SEP] per layer (index 1..L) before and after (e.g. fine-tuning), on the same
    inputs: cls_before, cls_after, cls_change (after - before), cls_change_low, cls_change_high (95 % paired
    t-interval over inputs; NaN for one input), and the same for sep."""
    _same_inputs(before, after)
    a, b = before.special_by_layer(), after.special_by_layer()
    frame = pd.DataFrame(index=a.index)
    for name, category in (("cls", "[CLS]"), ("sep", "[SEP]")):
        c = _category(category)
        frame[f"{name}_before"], frame[f"{name}_after"] = a[name], b[name]
        frame[f"{name}_change"] = b[name] - a[name]
        frame[f"{name}_change_low"], frame[f"{name}_change_high"] = _intervals(
            after.rows_by_input[:, c] - before.rows_by_input[:, c])
    return frame


def cls_change(before: TokenTypeAttention, after: TokenTypeAttention, layer: int | None = None) -> pd.DataFrame:
    """What [CLS] attends to in `layer` (default the last) before and after, one row per category: category,
    kind, base_rate, before, after (shares), change (after - before), change_low, change_high (95 % paired
    t-interval over inputs; NaN for one input), before_relative, after_relative."""
    _same_inputs(before, after)
    a, b = before.cls_by_type(layer), after.cls_by_type(layer)
    layer = before.n_layers if layer is None else layer
    low, high = _intervals(after.cls_by_input[:, :, layer - 1] - before.cls_by_input[:, :, layer - 1])
    return pd.DataFrame({"category": a["category"], "kind": a["kind"], "base_rate": a["base_rate"],
                         "before": a["share"], "after": b["share"], "change": b["share"] - a["share"],
                         "change_low": low, "change_high": high, "before_relative": a["relative"],
                         "after_relative": b["relative"]})


def exclusive_cls_change(before: TokenTypeAttention, after: TokenTypeAttention, layer: int | None = None,
                         n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """What [CLS] attends to in `layer` (default the last) before and after, in the EXCLUSIVE categories (each
    token in one; shares add up to 1), one row per category: category, base_rate (its mean share of an input's
    tokens), before, after (shares, mean over the layer's heads and the inputs), change (after - before),
    change_low, change_high (percentile interval at `level` of the change from `n_boot` resamples of the inputs,
    paired: the same inputs through both models)."""
    _same_inputs(before, after)
    layer = before.n_layers if layer is None else layer
    check_index(layer, before.n_layers, "layer")
    typed = [_category(c) for c in EXCLUSIVE if c != UNTYPED]

    def shares(result: TokenTypeAttention) -> np.ndarray:  # [N, E] per input
        part = result.cls_by_input[:, typed, layer - 1].astype(np.float64)
        return np.concatenate([part, 1 - part.sum(1, keepdims=True)], 1)

    a, b = shares(before), shares(after)
    base = before.base_rate[typed] / before.n_inputs
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(a), np.full(len(a), 1 / len(a)), size=n_boot) / len(a)  # [B, N]
    tail = (1 - level) / 2
    low, high = np.quantile(weights @ (b - a), [tail, 1 - tail], axis=0)
    return pd.DataFrame({"category": EXCLUSIVE, "base_rate": np.append(base, 1 - base.sum()), "before": a.mean(0),
                         "after": b.mean(0), "change": (b - a).mean(0), "change_low": low, "change_high": high})


def _check_items(items: Sequence, tags: Sequence[Tags] | None) -> None:
    if not items:
        raise ValueError("no inputs: give at least one text or (a, b) pair")
    for k, item in enumerate(items):
        texts = item if isinstance(item, tuple) else (item,)
        if len(texts) not in (1, 2) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"input {k} must be a text or an (a, b) pair of texts, got {item!r:.80}")
    if tags is None:
        return
    if len(tags) != len(items):
        raise ValueError(f"{len(items)} inputs but {len(tags)} tagged inputs: give one per input, in order")
    for k, (item, tagged) in enumerate(zip(items, tags)):
        parts = _parts(tagged)
        if not all(isinstance(s, Sentence) for s in parts) or len(parts) != (2 if isinstance(item, tuple) else 1):
            raise ValueError(f"input {k}: give one parses.Sentence per text (a pair needs a pair of them)")


def tag_items(items: Sequence, cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> list[Tags]:
    """The tagged words of each input (a text or an (a, b) pair), by `parses.tag_texts` (cached)."""
    _check_items(items, None)
    texts = [t for item in items for t in (item if isinstance(item, tuple) else (item,))]
    tagged = iter(tag_texts(texts, cache_dir=cache_dir, progress=progress))
    return [(next(tagged), next(tagged)) if isinstance(item, tuple) else next(tagged) for item in items]


def of_batches(batches: Sequence[Batch], tags: Sequence[Tags],
               thresholds: Sequence[float] = STRIPE_THRESHOLDS) -> TokenTypeAttention:
    """The same from batches in memory (e.g. `Batch.from_encoded` of synthetic maps), numbered in order:
    tags[k] are the tagged words of the k-th input over all batches."""
    reducer = TokenTypeSums(tags, thresholds)
    start = 0
    for batch in batches:
        reducer.update(replace(batch, start=start))
        start += len(batch.inputs)
    if start != len(tags):
        raise ValueError(f"{start} inputs but {len(tags)} tagged inputs: give one per input, in order")
    return TokenTypeAttention.from_sums(reducer.result(), reducer.thresholds, tags_fingerprint(tags))


def token_type_attention(encoder: Encoder, items: Sequence, tags: Sequence[Tags] | None = None,
                         thresholds: Sequence[float] = STRIPE_THRESHOLDS, batch_size: int = 32,
                         cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True
                         ) -> TokenTypeAttention:
    """Attention by token type of `encoder` over `items` (texts or (a, b) pairs), in one streaming pass.

    tags: the tagged words of each input (`tag_items`, the default: spaCy, cached); each input is encoded from
    them, pre-split. The pass is cached block by block (`extract.reduce`: model, words, tags, thresholds and
    this code)."""
    items = list(items)
    _check_items(items, tags)
    tags = tag_items(items, cache_dir, progress) if tags is None else list(tags)
    words = [tuple(list(s.words) for s in t) if isinstance(t, tuple) else list(t.words) for t in tags]
    reducer = TokenTypeSums(tags, thresholds)
    reduce(encoder, words, [reducer], batch_size=batch_size, cache_dir=cache_dir, progress=progress,
           desc=f"attention by token type of {encoder.name}")
    return TokenTypeAttention.from_sums(reducer.result(), reducer.thresholds, tags_fingerprint(tags), encoder.name)
