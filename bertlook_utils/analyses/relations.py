"""Relation-specific heads (Kovaleva et al. 2019, §4.2), on a SILVER PREDICATE–ARGUMENT PROXY for FrameNet.

The paper takes 473 FrameNet sentences of at most 12 tokens whose frame elements span at most 3 tokens and
scores each head by the maximum attention weight between the frame-evoking word and its frame-element tokens,
averaged over sentences (two heads of BERT-base: 0.201 and 0.209, above the 99th percentile). FrameNet is not
available offline, so the frames here are a silver proxy read off spaCy's dependency parses (`parses`): a
verb (the "predicate", standing in for the frame-evoking word) and its core arguments (standing in for frame
elements). Every result here is "on the silver predicate–argument proxy", never "on FrameNet".

    frames = predicate_arguments(sentences)            # silver proxy frames: short sentences, spans <= 3 words
    scores = score_relations(encoder, sentences, frames)   # streamed and cached on extract.reduce
    scores.table()      # per head: score, top_p99 (the paper's statistic), effect and its interval, null_p99, above

Score of a head (decided here; the paper says "between", so both directions count):
- per frame, the maximum word-level weight between the predicate and any word of its argument spans, in
  either direction: predicate→argument (the predicate's row, the argument word's column) or
  argument→predicate (the argument word's row, the predicate's column); `direction` picks one of them;
- word-level maps as in `syntax`: attention TO a word is the sum over its pieces, FROM a word the mean;
- averaged per sentence over its frames, then over sentences (`average="sentences"`, the paper's), or over
  all frames at once (`average="frames"`).

The paper's statistic is a rank among heads: a head is relation-specific when its score is above the 99th
percentile of all the model's head scores (`top_heads`; of 72 or 144 heads that is the top one or two, whatever
the scores). It needs no null and says nothing about chance; the nulls below are the kit's own addition.

Null (the kit's own addition; two kinds, NULLS). `null="relocated"` (the default): the same sentences and
maps, each argument span moved to another position of the same length in its sentence that does not cover the
predicate (uniformly, independently per span and per draw, seeded per sentence, so the draws do not depend on
batching or sharding), scored and averaged the same way. A span that has no other position stays where it is
(only in very short sentences; it makes the null harder to beat, not easier). Arguments often sit next to their
verb, so under this null a head that only looks at the previous or the next word is far "above" it (it can
score as high as the best real head). `null="shifted"` controls for this: the whole frame, predicate and spans
together, is shifted by the same number of words (distances kept, the words changed), so a purely positional
head scores the same on real and shifted frames and only attention tied to these words beats it. Read "above
the relocated null" as "attends to its arguments or to its neighbours".

`n_draws` null averages per head give its null distribution; a head is "above" when its real score exceeds the
null's 99th percentile (one-sided, per head: about 1 % of heads pass by chance, and on enough arguments any
consistent preference passes). The effect size (`effects`) is a head's score minus its null's mean, with a
percentile interval from a bootstrap over sentences (each sentence's real score minus its own null mean).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..core.cache import DEFAULT_CACHE_DIR
from ..core.conventions import check_attention, check_head, head_frame, head_label
from ..engine.extract import Batch, Reducer, reduce
from ..core.models import Encoder
from ..data.parses import Sentence
from .syntax import HeadScores, _examples, _length_order, _naming_the_sentence, accuracy_frame, sentences_fingerprint

CORE_RELATIONS = ("nsubj", "nsubjpass", "dobj", "pobj", "agent", "ccomp", "xcomp")
DIRECTIONS = ("pred->arg", "arg->pred")  # the two stored directions; "both" = their maximum
NULLS = {
    "relocated": "each argument span moved to another position of its length not covering the predicate",
    "shifted": "the whole frame (predicate and spans) shifted by the same number of words, distances kept",
}
AVERAGES = ("sentences", "frames")
PREDICATE_POS = "VERB"


# -- the silver predicate–argument proxy ----------------------------------------------------------------
@dataclass(frozen=True)
class Frame:
    """One silver predicate–argument frame (a proxy for a FrameNet frame). sentence: index of its sentence in
    the list given to `predicate_arguments`; predicate: 0-based index of the verb; spans: ((start, end), ...)
    half-open 0-based word ranges of its arguments, by start; relations: the argument's relation per span
    ("pobj" and "agent": the object of a preposition / of "by" attached to the verb)."""

    sentence: int
    predicate: int
    spans: tuple[tuple[int, int], ...]
    relations: tuple[str, ...]

    def __post_init__(self):
        if not self.spans or len(self.spans) != len(self.relations):
            raise ValueError(f"frame of sentence {self.sentence}: needs at least one span and one relation per span")
        for start, end in self.spans:
            if not 0 <= start < end or start <= self.predicate < end:
                raise ValueError(f"frame of sentence {self.sentence}: span ({start}, {end}) must be a non-empty "
                                 f"0-based half-open range not covering the predicate {self.predicate}")

    @property
    def words(self) -> np.ndarray:
        """int [k]: the 0-based indices of every argument word (the union of the spans)."""
        return np.unique(np.concatenate([np.arange(s, e) for s, e in self.spans]))


def _subtree_span(children: list[list[int]], root: int) -> tuple[int, int] | None:
    """(start, end) of the subtree of word `root` (0-based, half-open), or None if it is not contiguous."""
    members, todo = set(), [root]
    while todo:
        w = todo.pop()
        members.add(w)
        todo.extend(children[w])
    start, end = min(members), max(members) + 1
    return (start, end) if len(members) == end - start else None


def sentence_frames(sentence: Sentence, k: int = 0, max_span: int = 3,
                    relations: Sequence[str] = CORE_RELATIONS) -> list[Frame]:
    """The silver predicate–argument frames of one sentence (`predicate_arguments` without the length filter);
    k: the sentence's index, recorded in each Frame."""
    n = len(sentence)
    children: list[list[int]] = [[] for _ in range(n)]
    for j, h in enumerate(sentence.heads):
        if h:
            children[h - 1].append(j)
    wanted = set(relations)
    frames = []
    for v in range(n):
        if sentence.pos[v] != PREDICATE_POS:
            continue
        arguments = []  # (argument word, relation)
        for c in children[v]:
            rel = sentence.relations[c]
            if rel in wanted and rel not in ("pobj", "agent"):
                arguments.append((c, rel))
            elif rel in ("prep", "agent") and ("pobj" if rel == "prep" else "agent") in wanted:
                arguments += [(g, "pobj" if rel == "prep" else "agent") for g in children[c]
                              if sentence.relations[g] == "pobj"]
        found = {}
        for word, rel in arguments:
            span = _subtree_span(children, word)
            if span is not None and span[1] - span[0] <= max_span and span not in found:
                found[span] = rel
        if found:
            spans = tuple(sorted(found))
            frames.append(Frame(k, v, spans, tuple(found[s] for s in spans)))
    return frames


def predicate_arguments(sentences: Sequence[Sentence], max_words: int = 12, max_span: int = 3,
                        relations: Sequence[str] = CORE_RELATIONS) -> list[Frame]:
    """Silver predicate–argument frames (the proxy for FrameNet frames) of the sentences of at most `max_words`
    words (spaCy tokens, punctuation included).

    A frame is a verb (coarse tag VERB; auxiliaries and copulas are not) with at least one core argument among
    `relations`: nsubj, nsubjpass, dobj, ccomp, xcomp (a child of the verb), pobj (the object of a preposition
    attached to the verb) and agent (the object of the "by" attached to a passive verb). An argument's span is
    the subtree of its word; a span that is not contiguous or longer than `max_span` words is skipped, and a
    verb left with no argument gives no frame. Frames come in sentence order, then predicate order."""
    if max_words < 1 or max_span < 1:
        raise ValueError(f"max_words and max_span must be at least 1; got {max_words} and {max_span}")
    if isinstance(relations, str) or not set(relations) or not set(relations) <= set(CORE_RELATIONS):
        raise ValueError(f"relations must be a non-empty list drawn from {CORE_RELATIONS}, got {relations!r}")
    frames = []
    for k, s in enumerate(sentences):
        if not isinstance(s, Sentence):
            raise ValueError(f"item {k} is a {type(s).__name__}, not a parses.Sentence")
        if len(s) <= max_words:
            frames += sentence_frames(s, k, max_span, relations)
    return frames


def frames_table(frames: Sequence[Frame], sentences: Sequence[Sentence]) -> pd.DataFrame:
    """One row per argument: sentence (its id), predicate (the verb), relation, argument (its words), text."""
    rows = []
    for f in frames:
        s = sentences[f.sentence]
        for (start, end), rel in zip(f.spans, f.relations):
            rows.append((s.id, s.words[f.predicate], rel, " ".join(s.words[start:end]), s.text))
    return pd.DataFrame(rows, columns=["sentence", "predicate", "relation", "argument", "text"])


# -- scoring one sentence --------------------------------------------------------------------------
def _check_direction(direction: str) -> None:
    if direction not in (*DIRECTIONS, "both"):
        raise ValueError(f"direction must be one of {(*DIRECTIONS, 'both')}, not {direction!r}")


def _rng(seed: int, sentence: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(sentence)])


def _check_null(null: str) -> None:
    if null not in NULLS:
        raise ValueError(f"null must be one of {tuple(NULLS)}, not {null!r}")


def score_sentence(word_attn: np.ndarray, frames: Sequence[Frame], direction: str = "both", n_draws: int = 1000,
                   seed: int = 0, null: str = "relocated") -> tuple[np.ndarray, np.ndarray]:
    """(real, null) of the frames of one sentence.

    word_attn: float [L, H, m, m], a word-level map with [CLS] as word 0 and [SEP] as word m-1 (n = m-2
    words); frames: its frames (all of the same sentence). real: float32 [F, 2, L, H], per frame the maximum
    weight between predicate and argument words, direction 0 = pred->arg, 1 = arg->pred; null: float64
    [F, n_draws, L, H], the same (in `direction`) under the `null` (see NULLS and the module's docstring)."""
    _check_direction(direction)
    _check_null(null)
    n = word_attn.shape[-1] - 2
    n_layers, n_heads = word_attn.shape[:2]
    real = np.empty((len(frames), 2, n_layers, n_heads), dtype=np.float32)
    drawn = np.empty((len(frames), n_draws, n_layers, n_heads))
    rng = _rng(seed, frames[0].sentence) if frames else None
    for i, f in enumerate(frames):
        p = f.predicate + 1  # map index
        between = np.stack([word_attn[:, :, p, 1:n + 1], word_attn[:, :, 1:n + 1, p]])  # [2, L, H, n]
        real[i] = between[..., f.words].max(-1)
        if null == "shifted":
            drawn[i] = _shifted(word_attn, f, direction, n, n_draws, rng)
            continue
        pick = between.max(0) if direction == "both" else between[DIRECTIONS.index(direction)]  # [L, H, n]
        draws = np.full((n_layers, n_heads, n_draws), -np.inf)
        for start, end in f.spans:
            k = end - start
            starts = np.array([s for s in range(n - k + 1) if s != start and not s <= f.predicate < s + k])
            if not len(starts):
                starts = np.array([start])
            windows = np.lib.stride_tricks.sliding_window_view(pick, k, axis=-1).max(-1)  # [L, H, n-k+1]
            draws = np.maximum(draws, windows[..., starts[rng.integers(len(starts), size=n_draws)]])
        drawn[i] = np.moveaxis(draws, -1, 0)
    return real, drawn


def _shifted(word_attn: np.ndarray, f: Frame, direction: str, n: int, n_draws: int,
             rng: np.random.Generator) -> np.ndarray:
    """float [n_draws, L, H]: the frame's score with predicate and spans shifted together by a random nonzero
    offset that keeps them inside the sentence (no shift possible: the frame where it is)."""
    words = f.words
    low, high = -min(f.predicate, words[0]), n - 1 - max(f.predicate, words[-1])
    shifts = np.array([d for d in range(low, high + 1) if d] or [0])
    values = []
    for d in shifts:
        p, w = f.predicate + d + 1, words + d + 1
        one = np.stack([word_attn[:, :, p, w].max(-1), word_attn[:, :, w, p].max(-1)])  # [2, L, H]
        values.append(one.max(0) if direction == "both" else one[DIRECTIONS.index(direction)])
    return np.stack(values)[rng.integers(len(shifts), size=n_draws)]


def _null_sums(null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum over frames, the sentence's mean over frames), each [D, L, H], of one sentence's null."""
    return null.sum(0), null.mean(0)


def _check_frames(frames: Sequence[Frame]) -> list[Frame]:
    frames = list(frames)
    if not frames:
        raise ValueError("no predicate–argument frames to score (are the sentences at most max_words long, with "
                         "verbs whose arguments span at most max_span words?)")
    if not all(isinstance(f, Frame) for f in frames):
        raise ValueError("frames must be relations.Frame objects (from predicate_arguments)")
    return frames


# -- the result -------------------------------------------------------------------------------------
@dataclass
class RelationScores:
    """Per-head scores on the silver predicate–argument proxy, and their null.

    frames: [F] Frame; frame_scores: float32 [F, 2, L, H], per frame the maximum weight between predicate and
    argument words (direction 0 = pred->arg, 1 = arg->pred); null_frames, null_sentences: float [D, L, H], per
    null draw the score averaged over frames / over sentences, in `direction`; null_by_sentence: float [S, L, H],
    each sentence's null mean (over its frames and the draws), sentences in increasing index; seed: the null's
    seed; null_kind: how the null's frames were drawn (see NULLS)."""

    frames: list[Frame]
    frame_scores: np.ndarray
    null_frames: np.ndarray
    null_sentences: np.ndarray
    null_by_sentence: np.ndarray
    direction: str = "both"
    seed: int = 0
    null_kind: str = "relocated"

    def __post_init__(self):
        _check_direction(self.direction)
        _check_null(self.null_kind)
        if self.frame_scores.shape[:2] != (len(self.frames), 2):
            raise ValueError(f"frame_scores must be [{len(self.frames)}, 2, L, H], got {self.frame_scores.shape}")
        if self.null_by_sentence.shape != (self.n_sentences, *self.frame_scores.shape[2:]):
            raise ValueError(f"null_by_sentence must be [{self.n_sentences}, L, H] (one row per sentence with a "
                             f"frame), got {self.null_by_sentence.shape}")

    @property
    def n_layers(self) -> int:
        return self.frame_scores.shape[2]

    @property
    def n_heads(self) -> int:
        return self.frame_scores.shape[3]

    @property
    def n_sentences(self) -> int:
        return len({f.sentence for f in self.frames})

    def per_frame(self, direction: str | None = None) -> np.ndarray:
        """float [F, L, H]: each frame's score in `direction` (default: the one the null was drawn in)."""
        direction = direction or self.direction
        _check_direction(direction)
        if direction == "both":
            return self.frame_scores.max(1)
        return self.frame_scores[:, DIRECTIONS.index(direction)]

    def _sentence_sums(self, direction: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(float [S, L, H] the sum of each sentence's frame scores, int [S] its number of frames), sentences in
        increasing index."""
        per_frame = self.per_frame(direction).astype(np.float64)
        _, group = np.unique([f.sentence for f in self.frames], return_inverse=True)
        sums = np.zeros((group.max() + 1, *per_frame.shape[1:]))
        np.add.at(sums, group, per_frame)
        return sums, np.bincount(group)

    def score(self, average: str = "sentences", direction: str | None = None) -> np.ndarray:
        """float [L, H]: the mean frame score, per sentence then over sentences (the paper's) or over frames."""
        sums, counts = self._sentence_sums(direction)
        if _check_average(average) == "frames":
            return sums.sum(0) / counts.sum()
        return (sums / counts[:, None, None]).mean(0)

    def top_heads(self, q: float = 99, average: str = "sentences") -> np.ndarray:
        """bool [L, H]: the paper's statistic, heads whose score is above the q-th percentile of all the model's
        head scores (a rank among heads, no null: of 72 heads the top one at q = 99, unless scores tie)."""
        _check_q(q)
        score = self.score(average)
        return score > np.percentile(score, q)

    def effects(self, average: str = "sentences", n_boot: int = 1000, level: float = 0.95,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(effect, low, high), each float [L, H]: score minus the null's mean, and its percentile interval at
        `level` from `n_boot` resamples of the sentences (each sentence's real score minus its own null mean;
        average "frames" weighs a sentence by its frames)."""
        sums, counts = self._sentence_sums()
        null = self.null_by_sentence * counts[:, None, None]  # each sentence's null, summed over its frames
        if _check_average(average) == "sentences":
            values, sizes = (sums - null) / counts[:, None, None], np.ones(len(counts))
        else:
            values, sizes = sums - null, counts.astype(np.float64)
        flat = values.reshape(len(values), -1)
        effect = (flat.sum(0) / sizes.sum()).reshape(values.shape[1:])
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(len(sizes), np.full(len(sizes), 1 / len(sizes)), size=n_boot)  # [B, S]
        drawn = (weights @ flat) / (weights @ sizes)[:, None]  # [B, L * H]
        tail = (1 - level) / 2
        low, high = np.quantile(drawn, [tail, 1 - tail], axis=0).reshape(2, *values.shape[1:])
        return effect, low, high

    def null(self, average: str = "sentences") -> np.ndarray:
        """float [D, L, H]: the null distribution of `score(average)` in this result's direction."""
        return self.null_sentences if _check_average(average) == "sentences" else self.null_frames

    def null_percentile(self, q: float = 99, average: str = "sentences") -> np.ndarray:
        """float [L, H]: the per-head q-th percentile of the null."""
        _check_q(q)
        return np.percentile(self.null(average), q, axis=0)

    def above(self, q: float = 99, average: str = "sentences") -> np.ndarray:
        """bool [L, H]: heads whose score exceeds their null's q-th percentile."""
        return self.score(average) > self.null_percentile(q, average)

    def table(self, q: float = 99, average: str = "sentences") -> pd.DataFrame:
        """One row per head, top heads first: layer, head (1-indexed), label ("layer-head"), score, top_p<q>
        (`top_heads`: above the q-th percentile of all head scores, the paper's statistic), null_mean, effect,
        effect_low, effect_high (`effects`), null_p<q> (null_p99 by default), above (score > null_p<q>)."""
        p = f"null_p{q:g}"
        effect, low, high = self.effects(average)
        frame = head_frame({"score": self.score(average), f"top_p{q:g}": self.top_heads(q, average),
                            "null_mean": self.null(average).mean(0), "effect": effect, "effect_low": low,
                            "effect_high": high, p: self.null_percentile(q, average)})
        frame["above"] = frame["score"] > frame[p]
        frame[f"top_p{q:g}"] = frame[f"top_p{q:g}"].astype(bool)
        frame.insert(2, "label", [head_label(layer, h) for layer, h in zip(frame["layer"], frame["head"])])
        return frame.sort_values(["score", "layer", "head"], ascending=[False, True, True], ignore_index=True)

    def examples(self, sentences: Sequence[Sentence], layer: int, head: int, k: int = 5) -> pd.DataFrame:
        """The k frames on which head `layer-head` (1-indexed) scores highest: sentence (id), predicate,
        arguments ("relation: words; ..."), score, text."""
        check_head(layer, head, self.n_layers, self.n_heads)
        per_frame = self.per_frame()[:, layer - 1, head - 1]
        rows = []
        for i in np.argsort(-per_frame, kind="stable")[:k]:
            f = self.frames[i]
            s = sentences[f.sentence]
            arguments = "; ".join(f"{r}: {' '.join(s.words[a:b])}" for (a, b), r in zip(f.spans, f.relations))
            rows.append((s.id, s.words[f.predicate], arguments, float(per_frame[i]), s.text))
        return pd.DataFrame(rows, columns=["sentence", "predicate", "arguments", "score", "text"])


def _check_q(q: float) -> None:
    if not 0 < q < 100:
        raise ValueError(f"q is a percentile strictly between 0 and 100, not {q}")


def _check_average(average: str) -> str:
    if average not in AVERAGES:
        raise ValueError(f"average must be one of {AVERAGES}, not {average!r}")
    return average


def _by_sentence(frames: Sequence[Frame]) -> dict[int, list[int]]:
    """sentence index -> indices of its frames in `frames`."""
    grouped: dict[int, list[int]] = {}
    for i, f in enumerate(frames):
        grouped.setdefault(f.sentence, []).append(i)
    return grouped


def _check_n_draws(n_draws: int) -> None:
    if int(n_draws) != n_draws or n_draws < 100:
        raise ValueError(f"n_draws must be an integer of at least 100 (a 99th percentile needs them), not {n_draws}")


def score_maps(word_maps: Sequence[np.ndarray], frames: Sequence[Frame], direction: str = "both",
               n_draws: int = 1000, seed: int = 0, null: str = "relocated") -> RelationScores:
    """RelationScores from in-memory word-level maps: word_maps[k] is float [L, H, m, m] of sentence k ([CLS]
    as word 0, [SEP] as word m-1, as `syntax.ParsedAttention.word_attn`); `score_relations` is the streaming,
    cached version on a real model. null: "relocated" or "shifted" (see NULLS)."""
    frames = _check_frames(frames)
    _check_direction(direction)
    _check_null(null)
    _check_n_draws(n_draws)
    shapes = set()
    parts = {}
    for s, members in _by_sentence(frames).items():
        if not 0 <= s < len(word_maps):
            raise ValueError(f"a frame refers to sentence {s}, but {len(word_maps)} maps were given")
        attn = np.asarray(word_maps[s])
        _check_map(attn, [frames[i] for i in members], s)
        shapes.add(attn.shape[:2])
        parts[s] = score_sentence(attn, [frames[i] for i in members], direction, n_draws, seed, null)
    if len(shapes) > 1:
        raise ValueError(f"the maps come from models of different sizes (layers, heads): {sorted(shapes)}")
    real = np.empty((len(frames), *parts[frames[0].sentence][0].shape[1:]), dtype=np.float32)
    by_frame, by_sentence, each = 0, 0, {}
    for s, members in _by_sentence(frames).items():
        real[members] = parts[s][0]
        summed, mean = _null_sums(parts[s][1])
        by_frame, by_sentence, each[s] = by_frame + summed, by_sentence + mean, mean.mean(0)
    return RelationScores(frames, real, by_frame / len(frames), by_sentence / len(parts),
                          np.stack([each[s] for s in sorted(each)]), direction, seed, null)


def _check_map(attn: np.ndarray, frames: Sequence[Frame], s: int) -> None:
    if attn.ndim != 4 or attn.shape[2] != attn.shape[3] or attn.shape[2] < 3:
        raise ValueError(f"the map of sentence {s} must be a word-level map [L, H, m, m] with [CLS] and [SEP], "
                         f"got shape {attn.shape}")
    n = attn.shape[2] - 2
    if any(f.predicate >= n or max(e for _, e in f.spans) > n for f in frames):
        raise ValueError(f"a frame of sentence {s} reaches beyond its {n} words (map {attn.shape}); pass the map "
                         "of the sentence the frame was read from")
    check_attention(attn)


# -- streaming on a real model ----------------------------------------------------------------------
def _frames_fingerprint(frames: Sequence[Frame]) -> str:
    return hashlib.sha256(json.dumps([[f.sentence, f.predicate, f.spans, f.relations] for f in frames]).encode()
                          ).hexdigest()


class FrameScores(Reducer):
    """Streams the word-level attention of parsed sentences and keeps, per silver predicate–argument frame,
    its score in both directions, and the null's running sums: no map is kept. `sentences[k]` is the sentence
    of input k of the pass, `index[k]` its position in the caller's list; `frames` the caller's frames."""

    name = "relation_scores"

    def __init__(self, sentences: Sequence[Sentence], index: Sequence[int], frames: Sequence[Frame],
                 direction: str, n_draws: int, seed: int, from_mode: str, null: str = "relocated"):
        self.sentences, self.index, self.frames = list(sentences), list(index), list(frames)
        self.direction, self.n_draws, self.seed, self.from_mode = direction, n_draws, seed, from_mode
        self.null = null
        self.grouped = _by_sentence(self.frames)
        self.parts: dict[str, list] = {"frame_ids": [], "frame_scores": [], "sentence_ids": [], "null_by_sentence": []}
        self.null_frames = self.null_sentences = 0.0
        self.arrays: dict[str, np.ndarray] | None = None

    @property
    def key(self) -> str:
        return (f"{self.name}-{self.direction}-{self.null}-{self.n_draws}-{self.seed}-{self.from_mode}-"
                f"{sentences_fingerprint(self.sentences)[:16]}-{_frames_fingerprint(self.frames)[:16]}")

    def update(self, batch: Batch) -> None:
        for k, example in _examples(batch, self.sentences, self.from_mode):
            members = self.grouped[self.index[k]]
            real, null = score_sentence(example.word_attn, [self.frames[i] for i in members], self.direction,
                                        self.n_draws, self.seed, self.null)
            summed, mean = _null_sums(null)
            self.null_frames, self.null_sentences = self.null_frames + summed, self.null_sentences + mean
            self.parts["frame_ids"].append(np.array(members, dtype=np.int64))
            self.parts["frame_scores"].append(real)
            self.parts["sentence_ids"].append(np.array([self.index[k]], dtype=np.int64))
            self.parts["null_by_sentence"].append(mean.mean(0)[None])

    def result(self) -> dict[str, np.ndarray]:
        return {key: np.concatenate(rows) for key, rows in self.parts.items()} | {
            "null_frames": np.asarray(self.null_frames), "null_sentences": np.asarray(self.null_sentences)}

    def merge(self, results: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The blocks' frames one after the other; the null's sums added."""
        return {**{key: np.concatenate([r[key] for r in results]) for key in self.parts},
                **{key: sum(r[key] for r in results) for key in ("null_frames", "null_sentences")}}

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.arrays = result


def score_relations(encoder: Encoder, sentences: Sequence[Sentence], frames: Sequence[Frame] | None = None,
                    direction: str = "both", n_draws: int = 1000, seed: int = 0, null: str = "relocated",
                    batch_size: int = 32, from_mode: str = "mean", cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                    progress: bool = True) -> RelationScores:
    """RelationScores of the silver predicate–argument frames of `sentences` (default:
    `predicate_arguments(sentences)`, at most 12 words, spans of at most 3), on `encoder`'s word-level
    attention (each sentence encoded from its parser words, as `syntax.parsed_attention`).

    Only the sentences with a frame are encoded, shortest first; streamed through `extract.reduce`, so no map
    is kept and the result is cached block by block (keyed by the model, the sentences, the frames, the
    settings and this code). Equal to `score_maps` of `syntax.parsed_attention`'s maps. null: "relocated"
    (spans moved anywhere) or "shifted" (the frame moved whole, distances kept): see NULLS (both the kit's own)."""
    frames = _check_frames(predicate_arguments(sentences) if frames is None else frames)
    _check_direction(direction)
    _check_n_draws(n_draws)
    _check_null(null)
    used = sorted({f.sentence for f in frames})
    if used[0] < 0 or used[-1] >= len(sentences):
        raise ValueError(f"a frame refers to sentence {used[-1] if used[0] >= 0 else used[0]}, but "
                         f"{len(sentences)} sentences were given")
    chosen = [sentences[i] for i in used]
    order = _length_order(encoder, chosen)
    ordered = [chosen[i] for i in order]
    reducer = FrameScores(ordered, [used[i] for i in order], frames, direction, n_draws, seed, from_mode, null)
    with _naming_the_sentence(encoder, ordered):
        reduce(encoder, [list(s.words) for s in ordered], [reducer], batch_size=batch_size, cache_dir=cache_dir,
               progress=progress, desc=f"predicate–argument attention of {encoder.name}")
    arrays = reducer.arrays
    real = np.empty_like(arrays["frame_scores"])
    real[arrays["frame_ids"]] = arrays["frame_scores"]
    by_sentence = arrays["null_by_sentence"][np.argsort(arrays["sentence_ids"])]
    return RelationScores(frames, real, arrays["null_frames"] / len(frames), arrays["null_sentences"] / len(used),
                          by_sentence, direction, seed, null)


# -- beside the syntax heads -----------------------------------------------------------------------------
SYNTAX_RELATIONS = ("nsubj", "dobj", "pobj", "ccomp", "xcomp")  # the proxy's argument relations that Table 1 scores


def versus_syntax(scores: RelationScores, head_scores: HeadScores, relations: Sequence[str] = SYNTAX_RELATIONS,
                  q: float = 99) -> pd.DataFrame:
    """How the relation-specific heads relate to the syntax heads of `syntax` (notebook 04): one row per
    dependency relation with relation, syntax_head (the head whose argmax finds that relation's head word most
    often, either direction), accuracy (its accuracy), its relation score, rank (1 = the top relation head of
    all), above (above its null's q-th percentile), and spearman: the rank correlation over all heads between
    the relation score and the accuracy for that relation."""
    from scipy.stats import spearmanr

    table = scores.table(q)
    if (scores.n_layers, scores.n_heads) != (head_scores.n_layers, head_scores.n_heads):
        raise ValueError("the relation scores and the syntax scores come from models of different sizes")
    missing = [r for r in relations if not head_scores.mask(r).any()]
    if missing:
        raise ValueError(f"the syntax scores have no dependents of {missing}")
    rank = {label: k + 1 for k, label in enumerate(table["label"])}
    by_label = table.set_index("label")
    rows = []
    for relation in relations:
        accuracy = accuracy_frame(head_scores, relation, "best")
        best = accuracy.loc[accuracy["accuracy"].idxmax()]
        label = head_label(int(best["layer"]), int(best["head"]))
        rho = spearmanr(scores.score().ravel(), accuracy["accuracy"].to_numpy()).statistic
        rows.append((relation, label, float(best["accuracy"]), float(by_label.loc[label, "score"]), rank[label],
                     bool(by_label.loc[label, "above"]), float(rho)))
    return pd.DataFrame(rows, columns=["relation", "syntax_head", "accuracy", "score", "rank", "above", "spearman"])
