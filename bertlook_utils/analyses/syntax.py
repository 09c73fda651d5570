"""Syntax heads (Clark et al. 2019, §4.2, Table 1): which attention head points from a word to its
syntactic head, relation by relation, compared with the best fixed-offset baseline.

    examples = parsed_attention(encoder, sentences)     # word-level maps aligned with silver parses
    head_accuracy(examples)                             # best head per relation (+ "all")
    offset_baseline(examples)                           # best fixed offset per relation

For long runs `score_sentences(encoder, sentences)` streams the same computation without keeping any map:
a reducer on `extract.reduce`, so it is cached block by block, resumes and shards like every other pass; it
keeps the per-dependent outcomes (`HeadScores`), from which every table here is built.
"""
from __future__ import annotations

import hashlib
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR
from ..core.conventions import check_attention, check_head, head_frame, head_label
from ..engine.extract import Batch, Reducer, batches, concatenate, reduce
from ..core.intervals import bootstrap_interval
from ..core.models import Encoder
from ..data.parses import POSSESSIVE_MARKERS, Sentence, split_halves, to_conllu
from ..core.wordlevel import to_word_level

DIRECTIONS = ("dep->head", "head->dep")
OFFSETS = tuple(range(-3, 4))  # scored; tables choose among CLARK_OFFSETS unless told
CLARK_OFFSETS = tuple(range(-3, 3))  # the offsets of Clark et al.'s released baseline: -3 ... +2


@dataclass
class ParsedAttention:
    """Word-level attention of one parsed sentence.

    word_attn: float32 [L, H, m, m], [CLS] as word 0, the final [SEP] as word m-1 (m = n_words + 2), rows
    sum to 1; heads: int [m-2] (0 = ROOT, i = the i-th word, 1-based); relations: [m-2]; words: [m-2]
    (optional: "w1", "w2", ... when not given, so the possessive rule finds no marker); is_punct: [m-2]
    (optional: from the words, a word made of punctuation characters; all False without words);
    id: the sentence's id; signed: word_attn may hold negative weights and rows that do not sum to 1
    (effective attention), so only finiteness is checked."""

    word_attn: np.ndarray
    heads: np.ndarray
    relations: list[str]
    words: list[str] | None = None
    is_punct: list[bool] | None = None
    id: str = ""
    signed: bool = False

    def __post_init__(self):
        n_words = len(np.asarray(self.heads).reshape(-1))
        if self.is_punct is None:
            self.is_punct = [bool(w) and all(unicodedata.category(c).startswith("P") for c in w)
                             for w in self.words or []] or [False] * n_words
        if self.words is None:
            self.words = [f"w{i}" for i in range(1, n_words + 1)]
        heads = np.asarray(self.heads)
        if heads.ndim != 1 or (heads.size and not np.issubdtype(heads.dtype, np.integer)):
            raise ValueError(f"sentence {self.id!r}: heads must be a flat list of integers (0 = ROOT, i = the i-th "
                             f"word), got {heads.dtype} of shape {heads.shape}")
        self.heads = heads.astype(np.int64)
        self.word_attn = np.asarray(self.word_attn)
        n = len(self.heads)
        if self.word_attn.ndim != 4 or self.word_attn.shape[2:] != (n + 2, n + 2):
            raise ValueError(f"sentence {self.id!r}: word_attn must be [layers, heads, {n + 2}, {n + 2}] for {n} "
                             f"words plus [CLS] and [SEP], got {self.word_attn.shape}")
        if not (len(self.relations) == len(self.words) == len(self.is_punct) == n):
            raise ValueError(f"sentence {self.id!r}: heads, relations, words and is_punct must have one entry per "
                             f"word; got {n} heads, {len(self.relations)} relations, {len(self.words)} words and "
                             f"{len(self.is_punct)} is_punct flags")
        if n and (self.heads.min() < 0 or self.heads.max() > n):
            raise ValueError(f"sentence {self.id!r}: heads must be 0 (ROOT) or a 1-based word index up to {n}, "
                             f"got values from {self.heads.min()} to {self.heads.max()}")
        try:
            if not self.signed:
                check_attention(self.word_attn)
            elif not np.all(np.isfinite(self.word_attn)):
                raise ValueError("attention contains NaN or infinite values")
        except ValueError as error:
            raise ValueError(f"sentence {self.id!r}: word_attn is not word-level attention: {error}") from None


# -- alignment ------------------------------------------------------------------------------------
def _examples(batch: Batch, sentences: Sequence[Sentence], from_mode: str) -> Iterator[tuple[int, ParsedAttention]]:
    """(position among the pass's inputs, ParsedAttention) of every input of a batch of sentences' words;
    sentences[k] is the sentence of input k of the pass."""
    for i, x in enumerate(batch.inputs):
        k = batch.start + i
        s, n = sentences[k], len(x.tokens)
        if list(x.words[1:-1]) != list(s.words):
            raise ValueError(f"sentence {s.id!r}: the encoded words differ from the parser's; encode each "
                             "sentence's own words, in order")
        word_attn = to_word_level(batch.attn[i, :, :, :n, :n].numpy(), x.word_ids, from_mode, batch.signed)
        yield k, ParsedAttention(word_attn, np.array(s.heads), list(s.relations), list(s.words), s.is_punct, s.id,
                                 batch.signed)


@contextmanager
def _naming_the_sentence(encoder: Encoder, sentences: Sequence[Sentence]) -> Iterator[None]:
    """Inside the block, an input the encoder refuses (a word without wordpieces, a sentence too long) raises
    a ValueError that names the sentence (found afterwards, so the usual path pays nothing for it)."""
    try:
        yield
    except ValueError as error:
        for s in sentences:
            try:
                encoder.prepare(list(s.words))
            except ValueError as refused:
                raise ValueError(f"sentence {s.id!r} cannot be aligned: {refused}") from error
        raise


def _length_order(encoder: Encoder, sentences: Sequence[Sentence]) -> list[int]:
    """Indices of the sentences by token count (stable): batching them in this order wastes little on padding."""
    if not sentences:
        raise ValueError("no sentences to align")
    lengths = encoder.count_tokens([list(s.words) for s in sentences])
    return sorted(range(len(sentences)), key=lengths.__getitem__)


def parsed_attention(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int = 32, progress: bool = True,
                     from_mode: str = "mean") -> list[ParsedAttention]:
    """Word-level attention (float32 [L, H, m, m]) of every sentence, in the order given.

    Each sentence is encoded from its parser words (pre-split), so every parser word is one word of the map;
    a word that gives no wordpieces raises ValueError naming the sentence. Attention from a split word is
    the mean of its tokens' rows (`from_mode`, see `wordlevel.to_word_level`). Batched by the engine
    (`extract.batches`), sentences of similar length together. Memory: about 4·L·H·m² bytes per sentence
    (~0.2 MB for 6 x 12 heads and 25 words); for thousands of sentences prefer `score_sentences`, which streams."""
    order = _length_order(encoder, sentences)
    ordered = [sentences[i] for i in order]
    out: list[ParsedAttention | None] = [None] * len(sentences)
    with tqdm(total=len(sentences), desc=f"word-level attention of {encoder.name}", unit="sentence",
              disable=not progress) as bar:
        with _naming_the_sentence(encoder, ordered):
            for batch in batches(encoder, [list(s.words) for s in ordered], batch_size):
                for k, example in _examples(batch, ordered, from_mode):
                    out[order[k]] = example
                bar.update(len(batch.inputs))
    return out  # type: ignore[return-value]


# -- scoring --------------------------------------------------------------------------------------
SCORINGS = {
    "clark": "Clark et al.'s released scoring: `all` counts every word, the root included (never right), and "
             "a possessor followed by its 's is scored by the 's row's prediction",
    "kit": "the root is left out of `all`, and a possessor is right when its own row or its 's row finds the head",
}


@dataclass
class HeadScores:
    """Per-word outcomes of every head and offset, from which every table is built.

    own: bool [N, 2, L, H] (direction 0 = dep->head, 1 = head->dep): did the head's argmax from word k find
    its gold head? marker: the same from the possessive marker after a `poss` word (False where has_marker
    is False); own_offset, marker_offset: bool [N, len(offsets)], the same for fixed offsets; has_marker,
    is_root: bool [N]; relations: str [N]; sentence: int [N] (index of the word's sentence). N counts every
    word. `scoring` (see SCORINGS) turns these into `correct` and `offset_correct` and says what "all" is."""

    own: np.ndarray
    marker: np.ndarray
    own_offset: np.ndarray
    marker_offset: np.ndarray
    has_marker: np.ndarray
    is_root: np.ndarray
    relations: np.ndarray
    sentence: np.ndarray
    offsets: tuple[int, ...]
    scoring: str = "clark"

    def __post_init__(self):
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {tuple(SCORINGS)}, not {self.scoring!r}")

    def _resolve(self, own: np.ndarray, marker: np.ndarray) -> np.ndarray:
        where = self.has_marker.reshape(-1, *([1] * (own.ndim - 1)))
        return np.where(where, marker, own) if self.scoring == "clark" else own | (marker & where)

    @property
    def correct(self) -> np.ndarray:
        """bool [N, 2, L, H]: is head (direction, layer, head) right for word k under this scoring?"""
        return self._resolve(self.own, self.marker)

    @property
    def offset_correct(self) -> np.ndarray:
        """bool [N, len(offsets)]: is each fixed offset right for word k under this scoring?"""
        return self._resolve(self.own_offset, self.marker_offset)

    @property
    def n_layers(self) -> int:
        return self.own.shape[2]

    @property
    def n_heads(self) -> int:
        return self.own.shape[3]

    def with_scoring(self, scoring: str) -> "HeadScores":
        """The same outcomes under another scoring (see SCORINGS)."""
        return replace(self, scoring=scoring)

    def relation_counts(self) -> pd.Series:
        """Number of dependents per relation (the root is no relation), most frequent first."""
        return pd.Series(self.relations[~self.is_root]).value_counts()

    def mask(self, relation: str) -> np.ndarray:
        """bool [N]: the words of `relation`; "all": every word under Clark's scoring, every word whose head
        is a word under the kit's."""
        if relation == "all":
            return np.ones(len(self.relations), dtype=bool) if self.scoring == "clark" else ~self.is_root
        return (self.relations == relation) & ~self.is_root

    def where(self, keep: np.ndarray) -> "HeadScores":
        """The outcomes of the words where `keep` (bool [N]) is True."""
        keep = np.asarray(keep)
        if keep.shape != self.is_root.shape or keep.dtype != bool:
            raise ValueError(f"keep must be a bool array with one entry per word ({len(self.is_root)}), "
                             f"got {keep.dtype} {keep.shape}")
        return HeadScores(*(getattr(self, f)[keep] for f in _PER_WORD), offsets=self.offsets, scoring=self.scoring)

    def take(self, sentences: Sequence[int]) -> "HeadScores":
        """The outcomes of the words of the given sentences (indices as in `sentence`)."""
        return self.where(np.isin(self.sentence, np.asarray(sentences)))

    def as_arrays(self) -> dict[str, np.ndarray]:
        packed = {f: np.packbits(getattr(self, f), axis=-1) for f in ("own", "marker")}
        return {**packed, **{f: getattr(self, f) for f in _PER_WORD[2:]}, "n_heads": np.array(self.n_heads),
                "relations": self.relations.astype(str), "offsets": np.array(self.offsets)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], scoring: str = "clark") -> "HeadScores":
        n_heads = int(arrays["n_heads"])
        unpacked = [np.unpackbits(arrays[f], axis=-1, count=n_heads).astype(bool) for f in ("own", "marker")]
        return cls(*unpacked, *(arrays[f] for f in _PER_WORD[2:]),
                   offsets=tuple(int(o) for o in arrays["offsets"]), scoring=scoring)


_PER_WORD = ("own", "marker", "own_offset", "marker_offset", "has_marker", "is_root", "relations", "sentence")


def possessive_markers(heads: Sequence[int], relations: Sequence[str], words: Sequence[str]) -> np.ndarray:
    """int [n]: for each word, the 0-based index of the possessive marker ('s, ') that may stand for it, else -1.

    The possessive rule (Clark et al. §4.2, "the accuracy in Table 1 counts 's as correct"): a `poss` word
    followed by its marker, attached to it, is represented by the marker, since BERT's heads treat "'s" as
    the possessor."""
    marker = np.full(len(heads), -1)
    for d in range(len(heads) - 1):
        if relations[d] == "poss" and words[d + 1] in POSSESSIVE_MARKERS and heads[d + 1] == d + 1:
            marker[d] = d + 1
    return marker


def predictions(word_attn: np.ndarray) -> np.ndarray:
    """int [2, L, H, n]: the word (1-based) each head picks for each of the n real words, in both directions.

    dep->head: the argmax of the word's row; head->dep: the argmax of its column (the row of the transposed
    map: the word that attends to it most). [CLS], [SEP] and the word itself are never picked."""
    attn = np.array(word_attn[..., 1:-1, 1:-1], dtype=np.float32)  # a copy: the diagonal is zeroed
    n = attn.shape[-1]
    attn[..., np.arange(n), np.arange(n)] = 0
    return np.stack([attn.argmax(-1), attn.argmax(-2)]) + 1


def _offset_hits(words: np.ndarray, gold: np.ndarray, n: int, offsets: np.ndarray) -> np.ndarray:
    guess = words[:, None] + 1 + offsets  # 1-based; outside 1..n never matches a gold head
    return (guess == gold[:, None]) & (guess >= 1) & (guess <= n)


def score_example(example: ParsedAttention, offsets: Sequence[int] = OFFSETS) -> dict[str, np.ndarray]:
    """The per-word fields of HeadScores (see there) for one sentence; every word, the root included."""
    heads = example.heads
    n = len(heads)
    marker = possessive_markers(heads, example.relations, example.words)
    has_marker = marker >= 0
    stand_in = np.where(has_marker, marker, np.arange(n))  # the marker's row, else the word's own
    predicted = predictions(example.word_attn)  # [2, L, H, n]
    offsets = np.asarray(offsets)
    return {"own": np.moveaxis(predicted == heads, -1, 0),
            "marker": np.moveaxis(predicted[..., stand_in] == heads, -1, 0) & has_marker[:, None, None, None],
            "own_offset": _offset_hits(np.arange(n), heads, n, offsets),
            "marker_offset": _offset_hits(stand_in, heads, n, offsets) & has_marker[:, None],
            "has_marker": has_marker, "is_root": heads == 0,
            "relations": np.array(example.relations, dtype=str)}


def score_examples(examples: Sequence[ParsedAttention], offsets: Sequence[int] = OFFSETS,
                   scoring: str = "clark") -> HeadScores:
    """HeadScores of in-memory examples under `scoring` (see SCORINGS; `score_sentences` is the streaming,
    cached version)."""
    examples = list(examples)
    if not examples:
        raise ValueError("no examples to score")
    if not all(isinstance(e, ParsedAttention) for e in examples):
        raise ValueError("examples must be ParsedAttention objects (from syntax.parsed_attention)")
    if len({e.word_attn.shape[:2] for e in examples}) > 1:
        raise ValueError("examples come from models of different sizes (layers, heads)")
    parts = [score_example(e, offsets) for e in examples]
    return _collect(parts, tuple(int(o) for o in offsets), range(len(parts)), scoring)


def _collect(parts: Sequence[dict[str, np.ndarray]], offsets: tuple[int, ...], sentences: Sequence[int],
             scoring: str = "clark") -> HeadScores:
    """HeadScores from `score_example`'s parts, part k belonging to sentence number sentences[k]."""
    sentence = np.concatenate([np.full(len(p["relations"]), i, dtype=np.int64) for i, p in zip(sentences, parts)])
    fields = {f: np.concatenate([p[f] for p in parts]) for f in _PER_WORD[:-1]}
    return HeadScores(**fields, sentence=sentence, offsets=offsets, scoring=scoring)


def sentences_fingerprint(sentences: Sequence[Sentence]) -> str:
    """sha256 of the sentences' CoNLL-U: the data part of a cache key."""
    return hashlib.sha256(to_conllu(sentences).encode()).hexdigest()


class SentenceScores(Reducer):
    """Streams the attention of parsed sentences' words and keeps, per dependent, whether every head and
    every offset finds its gold head (`score_example`): no map is kept. `sentences[k]` is the sentence of
    input k of the pass, `index[k]` its position in the caller's list (recorded as `HeadScores.sentence`)."""

    name = "syntax_scores"

    def __init__(self, sentences: Sequence[Sentence], index: Sequence[int], offsets: tuple[int, ...],
                 from_mode: str):
        self.sentences, self.index, self.offsets, self.from_mode = list(sentences), list(index), offsets, from_mode
        self.parts: list = []
        self.positions: list[int] = []
        self.scores: HeadScores | None = None

    @property
    def key(self) -> str:
        return f"{self.name}-{self.offsets}-{self.from_mode}-{sentences_fingerprint(self.sentences)[:16]}"

    def update(self, batch: Batch) -> None:
        for k, example in _examples(batch, self.sentences, self.from_mode):
            self.parts.append(score_example(example, self.offsets))
            self.positions.append(self.index[k])

    def result(self) -> dict[str, np.ndarray]:
        return _collect(self.parts, self.offsets, self.positions).as_arrays()

    def merge(self, results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The blocks' words one after the other (the shape and offsets are the same in every block)."""
        rows = concatenate([{k: r[k] for k in _PER_WORD} for r in results])
        return {**rows, "n_heads": results[0]["n_heads"], "offsets": results[0]["offsets"]}

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.scores = HeadScores.from_arrays(result)


def score_sentences(encoder: Encoder, sentences: Sequence[Sentence], offsets: Sequence[int] = OFFSETS,
                    batch_size: int = 32, from_mode: str = "mean", cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                    progress: bool = True, scoring: str = "clark") -> HeadScores:
    """HeadScores of every sentence under `scoring` (see SCORINGS; `with_scoring` gives the other), streamed
    through `extract.reduce` (no map is kept; cached block by block, keyed by the model, the sentences, the
    settings and this code). Sentences of similar length are batched together. Equal to
    `score_examples(parsed_attention(...))`."""
    offsets = tuple(int(o) for o in offsets)
    order = _length_order(encoder, sentences)
    ordered = [sentences[i] for i in order]
    reducer = SentenceScores(ordered, order, offsets, from_mode)
    with _naming_the_sentence(encoder, ordered):
        reduce(encoder, [list(s.words) for s in ordered], [reducer], batch_size=batch_size, cache_dir=cache_dir,
               progress=progress, desc=f"word-level attention of {encoder.name}")
    scores = reducer.scores
    by_sentence = np.argsort(scores.sentence, kind="stable")  # the caller's order, each sentence's words in order
    return HeadScores(*(getattr(scores, f)[by_sentence] for f in _PER_WORD), offsets=offsets, scoring=scoring)


def split_scores(scores: HeadScores, sentences: Sequence[Sentence]) -> tuple[HeadScores, HeadScores]:
    """The scores of `parses.split_halves(sentences)`: (selection, held-out), no sentence scored twice.
    `scores` must come from these sentences, in this order."""
    if scores.sentence.max(initial=-1) >= len(sentences):
        raise ValueError("these scores come from more sentences than given; pass the sentences that were scored")
    index = {s.id: i for i, s in enumerate(sentences)}
    return tuple(scores.take([index[s.id] for s in half]) for half in split_halves(sentences))  # type: ignore


def _as_scores(examples, offsets: Sequence[int] = OFFSETS) -> HeadScores:
    if isinstance(examples, ParsedAttention):
        raise TypeError("examples must be a list of ParsedAttention objects or HeadScores; wrap a single "
                        "sentence in a list")
    return examples if isinstance(examples, HeadScores) else score_examples(examples, offsets)


# -- tables ---------------------------------------------------------------------------------------
def accuracy_grid(scores: HeadScores, relation: str = "all") -> np.ndarray:
    """float [2, L, H]: accuracy of every head in both directions on the dependents of `relation`."""
    mask = scores.mask(relation)
    if not mask.any():
        raise ValueError(f"no dependent has the relation {relation!r}; "
                         f"known: {', '.join(scores.relation_counts().index[:20])}")
    return scores.correct[mask].mean(0)


def _relations(scores: HeadScores, relations: Sequence[str] | None, min_n: int) -> list[str]:
    if isinstance(relations, str):
        raise TypeError(f"relations must be a list of relation names, e.g. [{relations!r}], not a string")
    if relations is not None and not len(relations):
        raise ValueError("relations is empty; pass None for every relation with at least min_n dependents")
    if relations is None:
        counts = scores.relation_counts()
        relations = ["all"] + [r for r, c in counts.items() if c >= min_n]
    return list(relations)


def best_head(scores: HeadScores, relation: str) -> tuple[int, int, str]:
    """(layer, head, direction) of the most accurate head for `relation`, layer and head 1-indexed (ties go
    to dep->head, then the lowest layer and head)."""
    grid = accuracy_grid(scores, relation)
    direction, layer, head = np.unravel_index(np.argmax(grid), grid.shape)
    return int(layer) + 1, int(head) + 1, DIRECTIONS[direction]


def head_outcomes(scores: HeadScores, relation: str, layer: int, head: int, direction: str) -> np.ndarray:
    """bool [n]: outcome of one head (1-indexed) on each dependent of `relation`."""
    check_head(layer, head, scores.n_layers, scores.n_heads)
    return scores.correct[scores.mask(relation), DIRECTIONS.index(direction), layer - 1, head - 1]


def head_accuracy(examples, relations: Sequence[str] | None = None, min_n: int = 1, n_boot: int = 1000,
                  seed: int = 0) -> pd.DataFrame:
    """The best head per relation (plus "all"): relation, layer, head (1-indexed), direction, accuracy
    (fraction), n, low, high (95 % bootstrap interval over sentences, for that head).

    examples: ParsedAttention objects (scored the Clark way) or HeadScores (under their own scoring).
    Relations with fewer than `min_n` dependents are left out."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1 (bootstrap resamples), not {n_boot}")
    scores = _as_scores(examples)
    rows = []
    for relation in _relations(scores, relations, min_n):
        layer, head, direction = best_head(scores, relation)
        outcomes = head_outcomes(scores, relation, layer, head, direction)
        low, high = bootstrap_interval(outcomes, scores.sentence[scores.mask(relation)], n_boot, seed)
        rows.append((relation, layer, head, direction, outcomes.mean(), len(outcomes), low, high))
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "direction", "accuracy", "n", "low", "high"])


def offset_baseline(examples, offsets: Sequence[int] = CLARK_OFFSETS, relations: Sequence[str] | None = None,
                    min_n: int = 1) -> pd.DataFrame:
    """The best fixed offset per relation (plus "all"): relation, offset, accuracy (fraction), n.
    Predicting the word at `offset` from the dependent (Clark's -3 ... +2 unless told); ties go to the offset
    listed first."""
    offsets = tuple(int(o) for o in offsets)
    if not offsets:
        raise ValueError("offsets is empty; give at least one offset, e.g. syntax.OFFSETS")
    scores = _as_scores(examples, offsets)
    missing = set(offsets) - set(scores.offsets)
    if missing:
        raise ValueError(f"offsets {sorted(missing)} were not scored; score with offsets={offsets}")
    columns = [scores.offsets.index(o) for o in offsets]
    rows = []
    for relation in _relations(scores, relations, min_n):
        mask = scores.mask(relation)
        accuracy = scores.offset_correct[mask][:, columns].mean(0)
        best = int(np.argmax(accuracy))
        rows.append((relation, offsets[best], float(accuracy[best]), int(mask.sum())))
    return pd.DataFrame(rows, columns=["relation", "offset", "accuracy", "n"])


def heldout_table(selection: HeadScores, heldout: HeadScores, relations: Sequence[str] | None = None,
                  min_n: int = 1, n_boot: int = 1000, seed: int = 0,
                  offsets: Sequence[int] = CLARK_OFFSETS) -> pd.DataFrame:
    """Heads and offsets chosen on the selection half, scored on the held-out half.

    Columns: relation; layer, head, direction (chosen on the selection half); selection (its accuracy
    there); heldout (its accuracy on the held-out half), low, high (95 % interval), n (held-out
    dependents); heldout_best (the best head's accuracy when chosen on the held-out half itself: the
    optimistic number Table 1 reports); offset (chosen among `offsets` on the selection half), baseline (its
    held-out accuracy). Relations need `min_n` dependents in each half."""
    columns = [selection.offsets.index(o) for o in offsets]
    if relations is None:
        counts = pd.concat([selection.relation_counts(), heldout.relation_counts()], axis=1).fillna(0).min(1)
        relations = ["all"] + [r for r, c in counts.sort_values(ascending=False).items() if c >= min_n]
    rows = []
    for relation in relations:
        layer, head, direction = best_head(selection, relation)
        chosen = head_outcomes(selection, relation, layer, head, direction)
        outcomes = head_outcomes(heldout, relation, layer, head, direction)
        low, high = bootstrap_interval(outcomes, heldout.sentence[heldout.mask(relation)], n_boot, seed)
        offset_column = columns[int(np.argmax(selection.offset_correct[selection.mask(relation)][:, columns].mean(0)))]
        baseline = heldout.offset_correct[heldout.mask(relation), offset_column].mean()
        rows.append((relation, layer, head, direction, chosen.mean(), outcomes.mean(), low, high, len(outcomes),
                     accuracy_grid(heldout, relation).max(), selection.offsets[offset_column], baseline))
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "direction", "selection", "heldout", "low",
                                       "high", "n", "heldout_best", "offset", "baseline"])


def scoring_variants(scores: HeadScores, relations: Sequence[str] = ("all", "poss")) -> pd.DataFrame:
    """Table 1's rows under both scorings (SCORINGS) and both offset ranges (Clark's -3 ... +2 and -3 ... +3):
    relation, scoring, offsets ("-3..+2"), layer, head, direction (the best head), accuracy, offset,
    baseline (the best offset's accuracy), n. Accuracies are fractions."""
    rows = []
    for relation in relations:
        for scoring in SCORINGS:
            scored = scores.with_scoring(scoring)
            layer, head, direction = best_head(scored, relation)
            accuracy = head_outcomes(scored, relation, layer, head, direction).mean()
            for offsets in (CLARK_OFFSETS, OFFSETS):
                base = offset_baseline(scored, offsets, [relation]).iloc[0]
                rows.append((relation, scoring, f"{offsets[0]:+d}..{offsets[-1]:+d}", layer, head, direction, accuracy,
                             int(base["offset"]), base["accuracy"], int(base["n"])))
    return pd.DataFrame(rows, columns=["relation", "scoring", "offsets", "layer", "head", "direction", "accuracy",
                                       "offset", "baseline", "n"])


def on_subset(scores: HeadScores, keep: np.ndarray, relations: Sequence[str]) -> pd.DataFrame:
    """Table 1 on every word and on the words where `keep` (bool [N], e.g. where two parsers agree) holds:
    relation, n, kept (fraction of its words kept), head (label of the best head on every word), accuracy,
    accuracy_kept (the same head on the kept words), best_kept (the best head on the kept words) and its
    accuracy, baseline and baseline_kept (the best offset on each). Accuracies are fractions."""
    kept = scores.where(keep)
    rows = []
    for relation in relations:
        chosen, best = best_head(scores, relation), best_head(kept, relation)
        n = scores.mask(relation).sum()
        rows.append((relation, int(n), kept.mask(relation).sum() / n,
                     head_label(*chosen[:2]), head_outcomes(scores, relation, *chosen).mean(),
                     head_outcomes(kept, relation, *chosen).mean(), head_label(*best[:2]),
                     head_outcomes(kept, relation, *best).mean(),
                     offset_baseline(scores, relations=[relation])["accuracy"].iloc[0],
                     offset_baseline(kept, relations=[relation])["accuracy"].iloc[0]))
    return pd.DataFrame(rows, columns=["relation", "n", "kept", "head", "accuracy", "accuracy_kept", "best_kept",
                                       "best_kept_accuracy", "baseline", "baseline_kept"])


def _offset_text(accuracy: float, offset: int) -> str:
    return f"{100 * accuracy:.1f} ({offset:+d})"


def summary_table(heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """`head_accuracy` beside `offset_baseline`, for reading: relation, head ("3-9"), direction, accuracy
    and interval (%), baseline (% and offset), gain over the baseline (points), n."""
    merged = heads.merge(baseline, on="relation", suffixes=("", "_baseline"))
    return pd.DataFrame({
        "relation": merged["relation"],
        "head": [head_label(r.layer, r.head) for r in merged.itertuples()],
        "direction": merged["direction"],
        "acc.": (100 * merged["accuracy"]).round(1),
        "95% interval": [f"{100 * r.low:.1f}–{100 * r.high:.1f}" for r in merged.itertuples()],
        "baseline": [_offset_text(r.accuracy_baseline, r.offset) for r in merged.itertuples()],
        "gain": (100 * (merged["accuracy"] - merged["accuracy_baseline"])).round(1),
        "n": merged["n"]})


def example_sentences(sentences: Sequence[Sentence], relation: str, k: int = 1, min_words: int = 8,
                      max_words: int = 16) -> list[Sentence]:
    """The first `k` sentences of `min_words`..`max_words` words with a dependent of `relation` (for figures)."""
    found = [s for s in sentences if relation in s.relations and min_words <= len(s) <= max_words][:k]
    if not found:
        raise ValueError(f"no sentence of {min_words}-{max_words} words has the relation {relation!r}")
    return found


def accuracy_frame(scores: HeadScores, relation: str = "all", direction: str = "dep->head") -> pd.DataFrame:
    """layer, head (1-indexed), accuracy of every head for `relation` in one direction ("dep->head",
    "head->dep", or "best" = the better of the two per head)."""
    grid = accuracy_grid(scores, relation)
    if direction == "best":
        values = grid.max(0)
    elif direction in DIRECTIONS:
        values = grid[DIRECTIONS.index(direction)]
    else:
        raise ValueError(f"direction must be one of {DIRECTIONS + ('best',)}, not {direction!r}")
    return head_frame({"accuracy": values})
