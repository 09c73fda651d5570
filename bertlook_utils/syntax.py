"""Syntax heads (Clark et al. 2019, §4.2, Table 1): which attention head points from a word to its
syntactic head, relation by relation, compared with the best fixed-offset baseline.

    examples = parsed_attention(encoder, sentences)     # word-level maps aligned with silver parses
    head_accuracy(examples)                             # best head per relation (+ "all")
    offset_baseline(examples)                           # best fixed offset per relation

For long runs `score_sentences(encoder, sentences)` streams the same computation without keeping any map
and caches the per-dependent outcomes (`HeadScores`), from which every table here is built.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .cache import DEFAULT_CACHE_DIR, code_version, entry_path, load_result, save_result
from .extract import check_attention
from .intervals import bootstrap_interval
from .models import Encoder
from .parses import POSSESSIVE_MARKERS, Sentence, split_halves, to_conllu
from .wordlevel import to_word_level

DIRECTIONS = ("dep->head", "head->dep")
OFFSETS = tuple(range(-3, 4))


@dataclass
class ParsedAttention:
    """Word-level attention of one parsed sentence.

    word_attn: float32 [L, H, m, m], [CLS] as word 0, the final [SEP] as word m-1 (m = n_words + 2), rows
    sum to 1; heads: int [m-2] (0 = ROOT, i = the i-th word, 1-based); relations, words, is_punct: [m-2];
    id: the sentence's id."""

    word_attn: np.ndarray
    heads: np.ndarray
    relations: list[str]
    words: list[str]
    is_punct: list[bool]
    id: str = ""

    def __post_init__(self):
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
            check_attention(self.word_attn)
        except ValueError as error:
            raise ValueError(f"sentence {self.id!r}: word_attn is not word-level attention: {error}") from None


# -- alignment ------------------------------------------------------------------------------------
def _prepare(encoder: Encoder, sentence: Sentence):
    """The encoder's prepared input for a sentence's words, checked to keep every word as one word."""
    try:
        prepared = encoder.prepare(list(sentence.words))
    except ValueError as error:
        raise ValueError(f"sentence {sentence.id!r} cannot be aligned: {error}") from error
    n = len(sentence.words)
    if (max(prepared.word_ids) + 1 != n + 2 or prepared.words[1:-1] != list(sentence.words)
            or prepared.tokens[0] != encoder.cls_token or prepared.tokens[-1] != encoder.sep_token):
        raise ValueError(f"sentence {sentence.id!r}: the encoder's words do not match the parser's {n} words "
                         "one to one between [CLS] and [SEP]")
    return prepared


def _batches(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int, from_mode: str, progress: bool
             ) -> Iterator[tuple[int, ParsedAttention]]:
    """(index in `sentences`, ParsedAttention) for every sentence, batched by similar length (less padding)."""
    if not sentences:
        raise ValueError("no sentences to align")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    prepared = [_prepare(encoder, s) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(prepared[i].input_ids))
    bar = tqdm(total=len(sentences), desc=f"word-level attention of {encoder.name}", unit="sentence",
               disable=not progress)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        attn, _ = encoder.forward([prepared[i] for i in chunk])
        for row, i in enumerate(chunk):
            p, s = prepared[i], sentences[i]
            n = len(p.input_ids)
            word_attn = to_word_level(attn[row, :, :, :n, :n].numpy(), p.word_ids, from_mode)
            yield i, ParsedAttention(word_attn, np.array(s.heads), list(s.relations), list(s.words), s.is_punct, s.id)
        bar.update(len(chunk))
    bar.close()


def parsed_attention(encoder: Encoder, sentences: Sequence[Sentence], batch_size: int = 32, progress: bool = True,
                     from_mode: str = "mean") -> list[ParsedAttention]:
    """Word-level attention (float32 [L, H, m, m]) of every sentence, in the order given.

    Each sentence is encoded from its parser words (pre-split), so every parser word is one word of the map;
    a word that gives no wordpieces raises ValueError naming the sentence. Attention from a split word is
    the mean of its tokens' rows (`from_mode`, see `wordlevel.to_word_level`). Memory: about
    4·L·H·m² bytes per sentence (~0.2 MB for 6 x 12 heads and 25 words); for thousands of sentences prefer
    `score_sentences`, which streams."""
    out: list[ParsedAttention | None] = [None] * len(sentences)
    for i, example in _batches(encoder, sentences, batch_size, from_mode, progress):
        out[i] = example
    return out  # type: ignore[return-value]


# -- scoring --------------------------------------------------------------------------------------
@dataclass
class HeadScores:
    """Per-dependent outcomes of every head and offset, from which every table is built.

    correct: bool [N, 2, L, H] (direction 0 = dep->head, 1 = head->dep): did the head's argmax find the
    gold head of dependent k? offset_correct: bool [N, len(offsets)]; relations: str [N]; sentence: int [N]
    (index of the dependent's sentence). N counts every word whose gold head is a word (not ROOT)."""

    correct: np.ndarray
    offset_correct: np.ndarray
    relations: np.ndarray
    sentence: np.ndarray
    offsets: tuple[int, ...]

    @property
    def n_layers(self) -> int:
        return self.correct.shape[2]

    @property
    def n_heads(self) -> int:
        return self.correct.shape[3]

    def relation_counts(self) -> pd.Series:
        """Number of dependents per relation, most frequent first."""
        return pd.Series(self.relations).value_counts()

    def mask(self, relation: str) -> np.ndarray:
        """bool [N]: the dependents of `relation` ("all": every dependent)."""
        if relation == "all":
            return np.ones(len(self.relations), dtype=bool)
        return self.relations == relation

    def take(self, sentences: Sequence[int]) -> "HeadScores":
        """The outcomes of the dependents of the given sentences (indices as in `sentence`)."""
        keep = np.isin(self.sentence, np.asarray(sentences))
        return HeadScores(self.correct[keep], self.offset_correct[keep], self.relations[keep], self.sentence[keep],
                          self.offsets)

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {"correct": np.packbits(self.correct, axis=-1), "n_heads": np.array(self.n_heads),
                "offset_correct": self.offset_correct, "relations": self.relations.astype(str),
                "sentence": self.sentence, "offsets": np.array(self.offsets)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "HeadScores":
        n_heads = int(arrays["n_heads"])
        correct = np.unpackbits(arrays["correct"], axis=-1, count=n_heads).astype(bool)
        return cls(correct, arrays["offset_correct"], arrays["relations"], arrays["sentence"],
                   tuple(int(o) for o in arrays["offsets"]))


def dependents(heads: Sequence[int], relations: Sequence[str], words: Sequence[str]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dep, gold, alt) for every word with a word as gold head: dep 0-based, gold 1-based, alt the 0-based
    index of a second word that also counts as the dependent, else -1.

    The possessive rule (Clark et al. §4.2): a `poss` dependent followed by its possessive marker ('s, ')
    may be stood for by the marker, since BERT's heads treat "'s" as the possessor ("the accuracy in
    Table 1 counts 's as correct")."""
    heads = np.asarray(heads)
    dep = np.flatnonzero(heads > 0)
    alt = np.full(len(dep), -1)
    for k, d in enumerate(dep):
        nxt = d + 1
        if (relations[d] == "poss" and nxt < len(words) and words[nxt] in POSSESSIVE_MARKERS
                and heads[nxt] == d + 1):
            alt[k] = nxt
    return dep, heads[dep], alt


def predictions(word_attn: np.ndarray) -> np.ndarray:
    """int [2, L, H, n]: the word (1-based) each head picks for each of the n real words, in both directions.

    dep->head: the argmax of the word's row; head->dep: the argmax of its column (the row of the transposed
    map: the word that attends to it most). [CLS], [SEP] and the word itself are never picked."""
    attn = np.array(word_attn[..., 1:-1, 1:-1], dtype=np.float32)  # a copy: the diagonal is zeroed
    n = attn.shape[-1]
    attn[..., np.arange(n), np.arange(n)] = 0
    return np.stack([attn.argmax(-1), attn.argmax(-2)]) + 1


def score_example(example: ParsedAttention, offsets: Sequence[int] = OFFSETS
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(correct bool [N, 2, L, H], offset_correct bool [N, len(offsets)], relations str [N]) of one sentence."""
    dep, gold, alt = dependents(example.heads, example.relations, example.words)
    predicted = predictions(example.word_attn)  # [2, L, H, n]
    correct = np.moveaxis(predicted[..., dep] == gold, -1, 0)
    has_alt = alt >= 0
    if has_alt.any():
        correct[has_alt] |= np.moveaxis(predicted[..., alt[has_alt]] == gold[has_alt], -1, 0)
    n = len(example.heads)
    offsets = np.asarray(offsets)
    guess = dep[:, None] + 1 + offsets  # 1-based; outside 1..n never matches a gold head
    offset_correct = (guess == gold[:, None]) & (guess >= 1) & (guess <= n)
    if has_alt.any():
        offset_correct[has_alt] |= alt[has_alt, None] + 1 + offsets == gold[has_alt, None]
    return correct, offset_correct, np.array([example.relations[d] for d in dep], dtype=str)


def score_examples(examples: Sequence[ParsedAttention], offsets: Sequence[int] = OFFSETS) -> HeadScores:
    """HeadScores of in-memory examples (see `score_sentences` for the streaming, cached version)."""
    examples = list(examples)
    if not examples:
        raise ValueError("no examples to score")
    if not all(isinstance(e, ParsedAttention) for e in examples):
        raise ValueError("examples must be ParsedAttention objects (from syntax.parsed_attention)")
    if len({e.word_attn.shape[:2] for e in examples}) > 1:
        raise ValueError("examples come from models of different sizes (layers, heads)")
    parts = [score_example(e, offsets) for e in examples]
    return _collect(parts, tuple(int(o) for o in offsets))


def _collect(parts, offsets: tuple[int, ...]) -> HeadScores:
    sentence = np.concatenate([np.full(len(p[2]), i) for i, p in enumerate(parts)])
    return HeadScores(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                      np.concatenate([p[2] for p in parts]).astype(str), sentence, offsets)


def sentences_fingerprint(sentences: Sequence[Sentence]) -> str:
    """sha256 of the sentences' CoNLL-U: the data part of a cache key."""
    return hashlib.sha256(to_conllu(sentences).encode()).hexdigest()


def score_sentences(encoder: Encoder, sentences: Sequence[Sentence], offsets: Sequence[int] = OFFSETS,
                    batch_size: int = 32, from_mode: str = "mean", cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                    progress: bool = True) -> HeadScores:
    """HeadScores of every sentence, streamed (no map is kept) and cached, keyed by the model, the
    sentences, the settings and this code. Equal to `score_examples(parsed_attention(...))`."""
    offsets = tuple(int(o) for o in offsets)
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, "syntax-scores", encoder.fingerprint, sentences_fingerprint(sentences),
                          f"{offsets}/{from_mode}", version=code_version("syntax"))
        cached = load_result(path)
        if cached is not None:
            return HeadScores.from_arrays(cached)
    parts: list = [None] * len(sentences)
    for i, example in _batches(encoder, sentences, batch_size, from_mode, progress):
        parts[i] = score_example(example, offsets)
    scores = _collect(parts, offsets)
    if path is not None:
        save_result(path, scores.as_arrays())
    return scores


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
    return scores.correct[scores.mask(relation), DIRECTIONS.index(direction), layer - 1, head - 1]


def head_accuracy(examples, relations: Sequence[str] | None = None, min_n: int = 1, n_boot: int = 1000,
                  seed: int = 0) -> pd.DataFrame:
    """The best head per relation (plus "all"): relation, layer, head (1-indexed), direction, accuracy
    (fraction), n, low, high (95 % bootstrap interval over sentences, for that head).

    examples: ParsedAttention objects or HeadScores. Relations with fewer than `min_n` dependents are left
    out; "all" counts every dependent whose gold head is a word."""
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


def offset_baseline(examples, offsets: Sequence[int] = OFFSETS, relations: Sequence[str] | None = None,
                    min_n: int = 1) -> pd.DataFrame:
    """The best fixed offset per relation (plus "all"): relation, offset, accuracy (fraction), n.
    Predicting the word at `offset` from the dependent; ties go to the offset listed first."""
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
                  min_n: int = 1, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Heads and offsets chosen on the selection half, scored on the held-out half.

    Columns: relation; layer, head, direction (chosen on the selection half); selection (its accuracy
    there); heldout (its accuracy on the held-out half), low, high (95 % interval), n (held-out
    dependents); heldout_best (the best head's accuracy when chosen on the held-out half itself: the
    optimistic number Table 1 reports); offset (chosen on the selection half), baseline (its held-out
    accuracy). Relations need `min_n` dependents in each half."""
    if relations is None:
        counts = pd.concat([selection.relation_counts(), heldout.relation_counts()], axis=1).fillna(0).min(1)
        relations = ["all"] + [r for r, c in counts.sort_values(ascending=False).items() if c >= min_n]
    rows = []
    for relation in relations:
        layer, head, direction = best_head(selection, relation)
        chosen = head_outcomes(selection, relation, layer, head, direction)
        outcomes = head_outcomes(heldout, relation, layer, head, direction)
        low, high = bootstrap_interval(outcomes, heldout.sentence[heldout.mask(relation)], n_boot, seed)
        offset_column = int(np.argmax(selection.offset_correct[selection.mask(relation)].mean(0)))
        baseline = heldout.offset_correct[heldout.mask(relation), offset_column].mean()
        rows.append((relation, layer, head, direction, chosen.mean(), outcomes.mean(), low, high, len(outcomes),
                     accuracy_grid(heldout, relation).max(), selection.offsets[offset_column], baseline))
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "direction", "selection", "heldout", "low",
                                       "high", "n", "heldout_best", "offset", "baseline"])


def summary_table(heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """`head_accuracy` beside `offset_baseline`, for reading: relation, head ("3-9"), direction, accuracy
    and interval (%), baseline (% and offset), gain over the baseline (points), n."""
    merged = heads.merge(baseline, on="relation", suffixes=("", "_baseline"))
    return pd.DataFrame({
        "relation": merged["relation"],
        "head": [f"{r.layer}-{r.head}" for r in merged.itertuples()],
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


# -- the paper's Table 1 side by side ---------------------------------------------------------------
SD_TO_SPACY = {"nn": "compound"}  # Stanford Dependencies (Clark et al.) -> spaCy's ClearNLP labels


def _offset_text(accuracy: float, offset: int) -> str:
    return f"{100 * accuracy:.1f} ({offset:+d})"


def table1_comparison(paper_table: pd.DataFrame, heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Clark et al.'s Table 1 (`paper.TABLE1`) beside this run's `head_accuracy` and `offset_baseline`,
    relation by relation (SD names mapped to spaCy's, e.g. nn -> compound). Accuracies in %."""
    heads, baseline = heads.set_index("relation"), baseline.set_index("relation")
    rows = []
    for p in paper_table.itertuples():
        ours = SD_TO_SPACY.get(p.relation, p.relation)
        row = {"relation": p.relation if ours == p.relation else f"{p.relation} → {ours}",
               "paper head": p.head + (" (head→dep)" if p.direction == "head->dep" else ""),
               "paper acc.": p.accuracy, "paper baseline": f"{p.baseline:.1f} ({p.offset:+d})"}
        if ours in heads.index:
            h, b = heads.loc[ours], baseline.loc[ours]
            row.update({"head": f"{h['layer']}-{h['head']}" + (" (head→dep)" if h["direction"] == "head->dep" else ""),
                        "acc.": round(100 * h["accuracy"], 1),
                        "95% interval": f"{100 * h['low']:.1f}–{100 * h['high']:.1f}",
                        "baseline": _offset_text(b["accuracy"], int(b["offset"])), "n": int(h["n"])})
        rows.append(row)
    return pd.DataFrame(rows).fillna("–")


# -- figures and the relation explorer (drawing only; imported lazily so the data layer stays light) ----
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
    layers, heads = np.meshgrid(np.arange(1, scores.n_layers + 1), np.arange(1, scores.n_heads + 1), indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(), "accuracy": values.ravel()})


def _draw_lines(ax, words: Sequence[str], weights: np.ndarray, rows: Sequence[int], colour: str, title: str,
                min_weight: float, label_colours: dict[int, str] | None = None) -> None:
    """Two columns of words; a line from word i (left) to word j (right) with opacity weights[i, j]; rows in
    `rows` in `colour`, the others faint grey; left labels of `rows` in bold (coloured by `label_colours`)."""
    from . import viz

    n = len(words)
    highlighted = set(rows)
    for i in range(n):
        for j in range(n):
            w = float(weights[i, j])
            if w >= min_weight:
                ax.plot([0, 1], [i, j], lw=2 if i in highlighted else 1,
                        color=colour if i in highlighted else viz.PALETTE["uniform"],
                        alpha=min(1.0, w) if i in highlighted else 0.25 * min(1.0, w))
    for i, word in enumerate(words):
        bold = i in highlighted
        ax.text(-0.05, i, word, ha="right", va="center", fontsize=9, fontweight="bold" if bold else "normal",
                color=(label_colours or {}).get(i, "black"))
        ax.text(1.05, i, word, ha="left", va="center", fontsize=9)
    ax.set_xlim(-1.0, 2.0)
    ax.set_ylim(n - 0.5, -0.5)
    ax.axis("off")
    ax.set_title(title, fontsize=10)


def plot_relation_head(example: ParsedAttention, layer: int, head: int, relation: str, direction: str = "dep->head",
                       axes=None, min_weight: float = 0.1, max_words: int = 30):
    """Clark et al. Fig 5 style, for one sentence: (left) head `layer-head`'s attention between the words,
    the rows that matter for `relation` in colour (dep->head: from each dependent; head->dep: from each
    gold head), each renormalised over the other words (no [CLS], [SEP] or self, as the argmax sees them);
    a highlighted word's label is green where the head's prediction, as scored, is the gold arc and red
    where it is not; (right) the gold (spaCy) arcs of
    `relation` drawn the same way. Returns the two axes."""
    from . import viz

    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if axes is None:
        axes = viz.plt.subplots(1, 2, figsize=(7, 0.26 * min(max_words, len(example.words)) + 0.8))[1]
    n = min(max_words, len(example.words))
    attn = example.word_attn[layer - 1, head - 1, 1:n + 1, 1:n + 1].astype(float)
    np.fill_diagonal(attn, 0)
    attn /= np.maximum(attn.sum(-1, keepdims=True), 1e-12)
    dep = [d for d in range(n) if example.relations[d] == relation and 0 < example.heads[d] <= n]
    gold_head = [int(example.heads[d]) - 1 for d in dep]
    predicted = predictions(example.word_attn)[DIRECTIONS.index(direction), layer - 1, head - 1] - 1  # [n_words]
    gold = np.zeros((n, n))
    if direction == "dep->head":
        rows, gold[dep, gold_head] = dep, 1
        found = {d: predicted[d] == h for d, h in zip(dep, gold_head)}
    else:  # a head's label is green when the argmax finds it for every one of its dependents shown
        rows, gold[gold_head, dep] = sorted(set(gold_head)), 1
        found = {h: all(predicted[d] == h for d, g in zip(dep, gold_head) if g == h) for h in gold_head}
    colours = {i: viz.PALETTE["next"] if ok else viz.PALETTE["cls"] for i, ok in found.items()}
    arrow = "dependent → head" if direction == "dep->head" else "head → dependent"
    _draw_lines(axes[0], example.words[:n], attn, rows, viz.PALETTE["prev"],
                f"head {viz.head_label(layer, head)} ({arrow})", min_weight, colours)
    _draw_lines(axes[1], example.words[:n], gold, rows, viz.PALETTE["next"], f"gold (spaCy) {relation} arcs", 0.5)
    return axes


def plot_accuracy_grid(frame: pd.DataFrame, ax=None, title: str = ""):
    """A layers x heads heatmap of `accuracy_frame` (1-indexed labels, values in %), the best head outlined."""
    from matplotlib.patches import Rectangle

    from . import viz

    table = frame.pivot(index="layer", columns="head", values="accuracy")
    ax = ax or viz.plt.subplots(figsize=(0.55 * table.shape[1] + 2.4, 0.42 * table.shape[0] + 1.5))[1]
    image = ax.imshow(100 * table.values, cmap=viz.ATTENTION_CMAP, vmin=0, vmax=100, aspect="auto")
    for (i, j), value in np.ndenumerate(100 * table.values):
        ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=7, color="white" if value > 60 else "black")
    best = np.unravel_index(np.argmax(table.values), table.shape)
    ax.add_patch(Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, edgecolor=viz.PALETTE["cls"], lw=2.5))
    ax.set_xticks(range(table.shape[1]), table.columns)
    ax.set_yticks(range(table.shape[0]), table.index)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.grid(False)
    label = viz.head_label(int(table.index[best[0]]), int(table.columns[best[1]]))
    ax.set_title(f"{title}{': ' if title else ''}best head {label} = {100 * table.values[best]:.1f} %")
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="accuracy (%)")
    return ax


def relation_explorer(scores: HeadScores, relations: Sequence[str] | None = None, min_n: int = 20,
                      snapshot: bool = True):
    """An ipywidgets picker: a relation menu and a direction toggle over a layers x heads heatmap of every
    head's accuracy for that relation (the best head outlined). Headless, it still shows a static PNG."""
    import ipywidgets
    from matplotlib.figure import Figure

    from . import widgets

    counts = scores.relation_counts()
    relations = list(relations) if relations is not None else ["all"] + [r for r, c in counts.items() if c >= min_n]
    size = {r: int(scores.mask(r).sum()) for r in relations}
    menu = ipywidgets.Dropdown(options=[(f"{r} (n={size[r]:,})", r) for r in relations], value=relations[0],
                               description="relation")
    toggle = ipywidgets.ToggleButtons(options=["dep->head", "head->dep", "best"], value="dep->head",
                                      description="direction")

    def draw():
        fig = Figure(figsize=(0.55 * scores.n_heads + 2.4, 0.42 * scores.n_layers + 1.5), layout="constrained")
        plot_accuracy_grid(accuracy_frame(scores, menu.value, toggle.value), ax=fig.add_subplot(),
                           title=f"{menu.value} ({toggle.value}), n = {size[menu.value]:,}")
        return fig

    def describe():
        return f"relation {menu.value}, {toggle.value}"

    return widgets.Explorer({"relation": menu, "direction": toggle}, draw, describe, snapshot)
