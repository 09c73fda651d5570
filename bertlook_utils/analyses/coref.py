"""Coreference heads (Clark et al. 2019, §4.3, Table 2): antecedent selection by attention and by baselines.

For every coreferent mention (a mention whose entity was mentioned before) a system picks one earlier
mention; it is right when that mention is one of the antecedents (an earlier mention of the same entity).
An attention head picks the earlier mention whose head word the mention's head word attends to most
(word-level maps, [CLS] = word 0). That restriction of the argmax to the earlier mentions' head words is the
kit's reading of Clark et al.'s definition ("the head word of a coreferent mention most attends to the head
of one of its antecedents"; their coreference code was never released): `READINGS` adds two stricter ones,
the argmax over every word before the mention and over every word of the passage (but the head word itself),
each right when it lands on the head word of an antecedent. Baselines: the nearest mention; the nearest mention
with the same head word (else the nearest); a rule-based sieve (exact string match -> head match -> number /
gender / person / animacy agreement -> nearest). The best head is selected on one half of the passages and
reported on the other; 95 % intervals come from a bootstrap over passages.

    result = analyse(encoder, corefdata.read_jsonl())
    result.table          # Table 2 on the held-out half: system, type, accuracy, low, high, n
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..core.cache import DEFAULT_CACHE_DIR
from ..data.corefdata import TYPES, Passage
from ..core.conventions import check_attention, check_head, head_label
from ..engine.extract import Batch, RowReducer, reduce
from ..core.intervals import bootstrap_interval
from ..core.wordlevel import FROM_MODES, to_word_level

COLUMNS = ("all", *TYPES)


class System(StrEnum):
    """The systems of `CorefResult.table` besides the single heads (named by `best_head_label`): the baselines
    (`SYSTEMS`) and the learned combination of every head. Look a system up by its member; its value is the
    label the tables and figures show."""

    NEAREST = "nearest mention"
    HEAD_WORD = "head-word match"
    SIEVE = "rule-based (sieves)"
    COMBINED = "all heads combined (learned)"  # a lower bound on what attention holds, not a coreference system


COMBINED = System.COMBINED  # the name that student copies handed out before the ids use (tests/handed_out.txt)


class Reading(StrEnum):
    """Readings of "most attends to the head of one of its antecedents": where the argmax is taken (`READINGS`).
    [CLS] and [SEP] are never candidates (as for the syntax heads of notebook 04)."""

    MENTION_HEADS = "mention heads"
    EARLIER_WORDS = "earlier words"
    ALL_WORDS = "all words"


READINGS = {Reading.MENTION_HEADS: "the head words of the earlier mentions (the kit's reading)",
            Reading.EARLIER_WORDS: "every word before the mention",
            Reading.ALL_WORDS: "every word of the passage but the mention's head word"}
WORD_READINGS = (Reading.EARLIER_WORDS, Reading.ALL_WORDS)  # the order of the last axis of `word_choices`


# -- the mentions to resolve -------------------------------------------------------------------------
def mention_table(passages: Sequence[Passage]) -> pd.DataFrame:
    """One row per coreferent mention: passage (index), mention (index in its passage), type, text,
    head_word, candidates (earlier mentions), rank (1 = its nearest antecedent is the nearest earlier
    mention, 2 = the one before, ...), distance (words between its head and its nearest antecedent's)."""
    rows = []
    for p_index, p in enumerate(passages):
        for i in p.coreferent():
            m = p.mentions[i]
            nearest = max(p.antecedents(i))
            rows.append(dict(passage=p_index, id=p.id, mention=i, type=m.type, text=p.mention_text(i),
                             head_word=p.words[m.head], candidates=i, rank=i - nearest,
                             distance=m.head - p.mentions[nearest].head))
    if not rows:
        raise ValueError("the passages hold no coreferent mentions (no entity is mentioned twice)")
    return pd.DataFrame(rows)


def antecedent_mask(passages: Sequence[Passage], mentions: pd.DataFrame, width: int | None = None) -> np.ndarray:
    """bool [N, width]: is earlier mention j an antecedent of row n's mention? (False beyond the earlier
    mentions; width defaults to the most earlier mentions of any row)."""
    width = width if width is not None else int(mentions["mention"].max())
    mask = np.zeros((len(mentions), width), dtype=bool)
    for n, (k, i) in enumerate(zip(mentions["passage"], mentions["mention"])):
        mask[n, passages[k].antecedents(i)] = True
    return mask


def is_correct(passages: Sequence[Passage], mentions: pd.DataFrame, chosen: np.ndarray) -> np.ndarray:
    """chosen [N, ...] earlier-mention indices -> bool [N, ...]: is it an antecedent of row n's mention?"""
    chosen = np.asarray(chosen)
    limit = mentions["mention"].to_numpy().reshape(-1, *[1] * (chosen.ndim - 1))
    if chosen.shape[:1] != (len(mentions),) or np.any(chosen < 0) or np.any(chosen >= limit):
        raise ValueError("chosen must hold one earlier mention (0 .. i-1) per row of mentions")
    mask = antecedent_mask(passages, mentions)
    rows = np.arange(len(mentions)).reshape(limit.shape)
    return mask[rows, chosen]


# -- baselines ----------------------------------------------------------------------------------------
def _text(p: Passage, j: int) -> str:
    return p.mention_text(j).lower()


def _head(p: Passage, j: int) -> str:
    return p.words[p.mentions[j].head].lower()


def nearest_mention(p: Passage, i: int) -> int:
    """The mention just before mention i."""
    return i - 1


def head_word_match(p: Passage, i: int) -> int:
    """The nearest earlier mention with the same head word (lower-cased); else the nearest mention."""
    for j in range(i - 1, -1, -1):
        if _head(p, j) == _head(p, i):
            return j
    return i - 1


def agrees(a, b) -> bool:
    """Number, person and animacy equal; gender equal or unknown on either side."""
    return (a.number == b.number and a.person == b.person and a.animacy == b.animacy
            and (a.gender == b.gender or "unknown" in (a.gender, b.gender)))


def sieve(p: Passage, i: int) -> int:
    """Rule-based sieves in order of precision, each picking the nearest mention it allows:
    1. exact string match (not for pronouns); 2. head-word match (not for pronouns, candidates not
    pronouns); 3. number / gender / person / animacy agreement; 4. the nearest mention."""
    m = p.mentions[i]
    earlier = range(i - 1, -1, -1)
    if m.type != "pronoun":
        for j in earlier:
            if p.mentions[j].type != "pronoun" and _text(p, j) == _text(p, i):
                return j
        for j in earlier:
            if p.mentions[j].type != "pronoun" and _head(p, j) == _head(p, i):
                return j
    for j in earlier:
        if agrees(p.mentions[j], m):
            return j
    return i - 1


def kth_previous(k: int) -> Callable[[Passage, int], int]:
    """A position-only system: the k-th mention before mention i (or the first mention)."""
    return lambda p, i: max(i - k, 0)


SYSTEMS: dict[System, Callable[[Passage, int], int]] = {
    System.NEAREST: nearest_mention, System.HEAD_WORD: head_word_match, System.SIEVE: sieve}


def choose(passages: Sequence[Passage], mentions: pd.DataFrame, system: Callable[[Passage, int], int]) -> np.ndarray:
    """int [N]: the earlier mention `system(passage, i)` picks for every row of `mentions`."""
    return np.array([system(passages[k], i) for k, i in zip(mentions["passage"], mentions["mention"])])


# -- attention ----------------------------------------------------------------------------------------
def antecedent_attention(word_attn: np.ndarray, passage: Passage, first_word: int = 1,
                         width: int | None = None) -> np.ndarray:
    """word_attn [L, H, m, m] of one passage (rows sum to 1; passage word w is word w + first_word, as
    after [CLS]) -> float32 [n_coreferent, L, H, width]: for each coreferent mention (in
    `passage.coreferent()` order) and head, the attention from its head word to the head word of each
    earlier mention 0, 1, ...; -1 beyond the earlier mentions (width defaults to the most there are)."""
    word_attn = np.asarray(word_attn)
    if word_attn.ndim != 4 or word_attn.shape[-1] != word_attn.shape[-2]:
        raise ValueError(f"word_attn must be [layers, heads, m, m], got {word_attn.shape}")
    check_attention(word_attn)
    rows = _head_words(passage, first_word, word_attn.shape[-1])[passage.coreferent()]
    return _candidates(word_attn[:, :, rows, :], passage, first_word, width)


def _head_words(passage: Passage, first_word: int, n_words: int) -> np.ndarray:
    """int [n_mentions]: each mention's head word in the map's numbering."""
    heads = np.array([m.head for m in passage.mentions], dtype=int) + first_word
    if len(heads) and heads.max() >= n_words:
        raise ValueError(f"passage {passage.id}: a mention head (word {heads.max()}) lies beyond the "
                         f"{n_words} words of the map; encode the passage's own words")
    return heads


def _candidates(rows: np.ndarray, passage: Passage, first_word: int, width: int | None) -> np.ndarray:
    """rows [L, H, n_coreferent, m] (the coreferent mentions' word rows) -> [n_coreferent, L, H, width]."""
    heads = _head_words(passage, first_word, rows.shape[-1])
    coreferent = passage.coreferent()
    width = width if width is not None else max(coreferent, default=0)
    if coreferent and max(coreferent) > width:
        raise ValueError(f"passage {passage.id} has {max(coreferent)} earlier mentions, more than width={width}")
    out = np.full((len(coreferent), *rows.shape[:2], width), -1, dtype=np.float32)
    for r, i in enumerate(coreferent):
        out[r, ..., :i] = rows[:, :, r, heads[:i]]
    return out


def word_rows(attn: np.ndarray, word_ids: Sequence[int], words: Sequence[int], from_mode: str = "mean") -> np.ndarray:
    """Rows `words` of the word-level map of token-level attn [L, H, T, T]: float32 [L, H, len(words), n_words],
    equal to `wordlevel.to_word_level(attn, word_ids, from_mode)[..., words, :]` but computing only those
    rows (a passage needs a few dozen of its ~100 rows), with no matrix product."""
    if from_mode not in FROM_MODES:
        raise ValueError(f"from_mode must be one of {FROM_MODES}, not {from_mode!r}")
    ids = np.asarray(word_ids)
    if np.any(np.diff(ids) < 0) or np.any(np.diff(ids) > 1) or ids[0] != 0:  # tokens of a word not contiguous
        return to_word_level(attn, word_ids, from_mode)[..., list(words), :]
    if attn.shape[-2:] != (len(ids), len(ids)):
        raise ValueError(f"attn must end in [{len(ids)}, {len(ids)}] for {len(ids)} word ids, got {attn.shape}")
    check_attention(attn)
    starts = np.flatnonzero(np.r_[True, np.diff(ids) != 0])
    out = []
    for w in words:
        tokens = np.flatnonzero(ids == w)
        to_words = np.add.reduceat(attn[:, :, tokens, :].astype(np.float64), starts, axis=-1)  # [L, H, k, n]
        if from_mode == "mean":
            row = to_words.mean(axis=-2)
        elif from_mode == "first":
            row = to_words[:, :, 0]
        else:
            row = to_words.max(axis=-2)
            row = row / row.sum(-1, keepdims=True)
        out.append(row)
    return np.stack(out, axis=-2).astype(np.float32)


def word_choices(rows: np.ndarray, passage: Passage, first_word: int = 1) -> np.ndarray:
    """rows [L, H, n_coreferent, m]: the word-level rows of the coreferent mentions' head words (in
    `passage.coreferent()` order; passage word w is word w + first_word, the last word is [SEP]) -> int16
    [n_coreferent, L, H, 2]: the passage word (0-based) each head attends to most, among every word before
    the mention (`WORD_READINGS[0]`) and among every word but the mention's head word (`WORD_READINGS[1]`)."""
    rows = np.asarray(rows)
    n_words = len(passage.words)
    if rows.shape[-1] != n_words + first_word + 1:
        raise ValueError(f"rows must end in the {n_words + first_word + 1} words of the map ([CLS], the passage's "
                         f"words, [SEP]), got {rows.shape}")
    words = rows[..., first_word:first_word + n_words].astype(np.float32)  # [L, H, k, n_words]
    out = np.empty((len(passage.coreferent()), *rows.shape[:2], 2), dtype=np.int16)
    for r, i in enumerate(passage.coreferent()):
        m = passage.mentions[i]
        out[r, ..., 0] = np.argmax(words[:, :, r, :m.start], axis=-1)  # a coreferent mention has earlier words
        row = words[:, :, r].copy()
        row[..., m.head] = -np.inf
        out[r, ..., 1] = np.argmax(row, axis=-1)
    return out


def lands_on_antecedent(passages: Sequence[Passage], mentions: pd.DataFrame, words: np.ndarray) -> np.ndarray:
    """words int [N, ...]: a passage word per row of `mentions` -> bool [N, ...]: is it the head word of one of
    the row's antecedents?"""
    words = np.asarray(words)
    if words.shape[:1] != (len(mentions),):
        raise ValueError(f"words must hold one word per row of mentions ({len(mentions)}), got {words.shape}")
    width = max(len(p.words) for p in passages)
    heads = np.zeros((len(mentions), width), dtype=bool)
    for n, (k, i) in enumerate(zip(mentions["passage"], mentions["mention"])):
        heads[n, [passages[k].mentions[j].head for j in passages[k].antecedents(i)]] = True
    rows = np.arange(len(mentions)).reshape(-1, *[1] * (words.ndim - 1))
    return heads[rows, words]


def choose_words_by_attention(word_attn: np.ndarray, passage: Passage, first_word: int = 1) -> np.ndarray:
    """word_attn [L, H, m, m] of one passage -> int16 [n_coreferent, L, H, 2]: `word_choices` of its
    coreferent mentions' head-word rows."""
    word_attn = np.asarray(word_attn)
    check_attention(word_attn)
    rows = _head_words(passage, first_word, word_attn.shape[-1])[passage.coreferent()]
    return word_choices(word_attn[:, :, rows, :], passage, first_word)


def choose_by_attention(word_attn: np.ndarray, passage: Passage, first_word: int = 1) -> np.ndarray:
    """int [n_coreferent, L, H]: for each coreferent mention and head, the earlier mention whose head
    word its head word attends to most (see `antecedent_attention`)."""
    return np.argmax(antecedent_attention(word_attn, passage, first_word), axis=-1).astype(np.int16)


def passages_key(passages: Sequence[Passage]) -> str:
    """sha256 of the passages' words and mentions."""
    return hashlib.sha256(json.dumps([p.to_json() for p in passages]).encode()).hexdigest()


def passage_attention(attn: np.ndarray, word_ids: Sequence[int], passage: Passage, from_mode: str = "mean",
                      width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Token-level attn [L, H, T, T] of `passage` encoded alone ([CLS] passage [SEP]) -> (float32
    [n_coreferent, L, H, width] as `antecedent_attention`, int16 [n_coreferent, L, H, 2] as `word_choices`)
    of its word-level map (only the rows needed)."""
    n_words = int(np.max(word_ids)) + 1
    rows = word_rows(attn, word_ids, _head_words(passage, 1, n_words)[passage.coreferent()], from_mode)
    return _candidates(rows, passage, 1, width), word_choices(rows, passage, 1)


class AntecedentAttention(RowReducer):
    """Streams the passages' attention (in order) and keeps, per coreferent mention and head, the earlier
    mention its head word attends to most, `choices` int16 [N, L, H], its attention to each earlier
    mention's head word, `weights` float16 [N, L, H, C] (-1 beyond the earlier mentions; C = the most
    earlier mentions any passage has), and the word it attends to most under each of `WORD_READINGS`,
    `words` int16 [N, L, H, 2] (`.arrays` after the pass); rows in `mention_table` order."""

    name = "coref_attention"

    def __init__(self, passages: Sequence[Passage], from_mode: str = "mean"):
        super().__init__()
        self.passages, self.from_mode = list(passages), from_mode
        self.width = max((max(p.coreferent(), default=0) for p in self.passages), default=0)

    @property
    def key(self) -> str:
        return f"{self.name}-{self.from_mode}-{passages_key(self.passages)[:16]}"

    def update(self, batch: Batch) -> None:
        for i, x in enumerate(batch.inputs):
            p = self.passages[batch.start + i]
            if list(x.words[1:-1]) != p.words:
                raise ValueError(f"passage {p.id}: the encoded words differ from the passage's; "
                                 "encode each passage's own words, in order, as one segment")
            n = len(x.tokens)
            weights, words = passage_attention(batch.attn[i, :, :, :n, :n].numpy(), x.word_ids, p, self.from_mode,
                                               self.width)
            self.add(weights=weights, words=words)

    def result(self) -> dict[str, np.ndarray]:
        rows = super().result()
        return {"choices": np.argmax(rows["weights"], axis=-1).astype(np.int16),  # from the float32 weights: exact
                "weights": rows["weights"].astype(np.float16), "words": rows["words"]}


def word_attention(encoder, passage: Passage, from_mode: str = "mean") -> np.ndarray:
    """[L, H, m, m] word-level attention of one passage ([CLS] = word 0, passage word w = word w + 1)."""
    enc = encoder.encode(passage.words)
    return to_word_level(enc.attn, enc.word_ids, from_mode)


# -- scoring ------------------------------------------------------------------------------------------
def halves(passages: Sequence[Passage], seed: int = 0) -> np.ndarray:
    """bool [n_passages]: True for the selection half (a seeded random half of the passages)."""
    order = np.random.default_rng(seed).permutation(len(passages))
    selection = np.zeros(len(passages), dtype=bool)
    selection[order[: len(passages) // 2]] = True
    return selection


def accuracy_by_type(correct: np.ndarray, types: pd.Series | np.ndarray) -> dict[str, float]:
    """{"all", "pronoun", "proper", "nominal"} -> accuracy of bool `correct` [N] (NaN where none)."""
    correct, types = np.asarray(correct, dtype=bool), np.asarray(types)
    out = {"all": float(correct.mean()) if correct.size else float("nan")}
    for t in TYPES:
        chosen = correct[types == t]
        out[t] = float(chosen.mean()) if chosen.size else float("nan")
    return out


def head_scores(correct: np.ndarray, mentions: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """correct bool [N, L, H] -> one row per head (1-indexed layer, head) with its accuracy on `rows`,
    overall and per mention type."""
    _, n_layers, n_heads = correct.shape
    types = mentions["type"].to_numpy()[rows]
    sub = correct[rows]
    frame = pd.DataFrame({"layer": np.repeat(np.arange(1, n_layers + 1), n_heads),
                          "head": np.tile(np.arange(1, n_heads + 1), n_layers),
                          "all": sub.mean(0).ravel()})
    for t in TYPES:
        frame[t] = sub[types == t].mean(0).ravel() if np.any(types == t) else np.nan
    return frame


def combine_heads(weights: np.ndarray, antecedents: np.ndarray, train: np.ndarray) -> np.ndarray:
    """A learned system on attention alone: logistic regression on the log attention of every head from a
    mention to a candidate (weights [N, L, H, C], -1 = no candidate), trained on the rows in `train`
    (label: the candidate is an antecedent, `antecedents` bool [N, C]). int [N]: the best-scoring earlier
    mention of every row."""
    from sklearn.linear_model import LogisticRegression

    n, n_layers, n_heads, width = weights.shape
    features = np.log(np.clip(weights, 1e-6, None)).reshape(n, n_layers * n_heads, width).transpose(0, 2, 1)
    valid = weights[:, 0, 0, :] >= 0
    pick = valid & np.asarray(train)[:, None]
    mean, scale = features[pick].mean(0), features[pick].std(0) + 1e-6  # standardised: converges in fewer steps
    model = LogisticRegression(max_iter=2000).fit((features[pick] - mean) / scale, antecedents[pick])
    scores = np.full((n, width), -np.inf)
    scores[valid] = model.decision_function((features[valid] - mean) / scale)
    return np.argmax(scores, axis=-1)


@dataclass
class CorefResult:
    """mentions: one row per coreferent mention (mention_table) with `half`, each system's choice
    (`<system>` columns: earlier-mention index) and correctness (`<system> ok`); choices int [N, L, H]
    and correct bool [N, L, H] for every head; heads: per-head accuracy on the selection half (`all`,
    per type) and on the held-out half (`held_out`); best: (layer, head), 1-indexed, chosen on the
    selection half; table: every system on the held-out half, long form (system, type, accuracy, low,
    high, n); readings: for each of `READINGS`, the best head chosen on the selection half under it (layer,
    head, label, selection and held-out accuracy with its interval, n); reading_correct: bool [N, L, H] per
    reading."""

    passages: list[Passage]
    mentions: pd.DataFrame
    choices: np.ndarray
    correct: np.ndarray
    heads: pd.DataFrame
    best: tuple[int, int]
    table: pd.DataFrame
    readings: pd.DataFrame | None = None
    reading_correct: dict[str, np.ndarray] | None = None

    @property
    def best_label(self) -> str:
        return head_label(*self.best)

    def wide(self) -> pd.DataFrame:
        """Accuracy (%) on the held-out half per system (rows) and mention type (columns)."""
        table = self.table.pivot(index="system", columns="type", values="accuracy")
        order = list(dict.fromkeys(self.table["system"]))
        return (100 * table.loc[order, list(COLUMNS)]).rename_axis(None, axis=1)


def best_head_label(best: tuple[int, int], reading: Reading = Reading.MENTION_HEADS) -> str:
    """The system name of a best head: "best head 3-10", or "best head 2-2 (argmax over earlier words)"."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {list(READINGS)}, not {reading!r}")
    return f"best head {head_label(*best)}" + ("" if reading == Reading.MENTION_HEADS else f" (argmax over {reading})")


def analyse(encoder, passages: Sequence[Passage], seed: int = 0, n_boot: int = 1000, from_mode: str = "mean",
            cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True,
            batch_size: int = 32) -> CorefResult:
    """Every head and every baseline on the passages; the best head selected on one half (seeded) and
    every system reported on the other."""
    passages = list(passages)
    mentions = mention_table(passages)
    reducer = AntecedentAttention(passages, from_mode)
    reduce(encoder, [p.words for p in passages], [reducer], batch_size=batch_size, cache_dir=cache_dir,
           progress=progress)
    arrays = reducer.arrays
    choices, weights = arrays["choices"].astype(int), arrays["weights"].astype(np.float32)
    if len(choices) != len(mentions):
        raise ValueError(f"attention for {len(choices)} mentions, expected {len(mentions)}; clear the cache entry")
    correct = is_correct(passages, mentions, choices)
    reading_correct = {Reading.MENTION_HEADS: correct}
    for r, reading in enumerate(WORD_READINGS):
        reading_correct[reading] = lands_on_antecedent(passages, mentions, arrays["words"][..., r].astype(int))
    selection = halves(passages, seed)[mentions["passage"].to_numpy()]
    mentions["half"] = np.where(selection, "selection", "held-out")
    heads = head_scores(correct, mentions, selection)
    heads["held_out"] = head_scores(correct, mentions, ~selection)["all"]
    bests = {}
    for reading, ok in reading_correct.items():
        scores = ok[selection].mean(0)  # [L, H], the selection half
        bests[reading] = tuple(int(i) + 1 for i in np.unravel_index(np.argmax(scores), scores.shape))
        if reading != Reading.MENTION_HEADS:
            heads[f"{reading}: selection"] = scores.ravel()
            heads[f"{reading}: held_out"] = ok[~selection].mean(0).ravel()
    best = bests[Reading.MENTION_HEADS]
    for name, system in SYSTEMS.items():
        mentions[name] = choose(passages, mentions, system)
        mentions[f"{name} ok"] = is_correct(passages, mentions, mentions[name].to_numpy())
    label = best_head_label(best)
    mentions[label] = choices[:, best[0] - 1, best[1] - 1]
    for reading, (layer, head) in bests.items():
        mentions[f"{best_head_label((layer, head), reading)} ok"] = reading_correct[reading][:, layer - 1, head - 1]
    antecedents = antecedent_mask(passages, mentions, weights.shape[-1])
    mentions[System.COMBINED] = combine_heads(weights, antecedents, selection)
    mentions[f"{System.COMBINED} ok"] = is_correct(passages, mentions, mentions[System.COMBINED].to_numpy())
    held = mentions[~selection]
    rows = []
    readings = [best_head_label(b, reading) for reading, b in bests.items()]
    for name in (*SYSTEMS, System.COMBINED, *readings):
        for t in COLUMNS:
            part = held if t == "all" else held[held["type"] == t]
            low, high = bootstrap_interval(part[f"{name} ok"], part["passage"], n_boot, seed)
            rows.append((name, t, float(part[f"{name} ok"].mean()), low, high, len(part)))
    table = pd.DataFrame(rows, columns=["system", "type", "accuracy", "low", "high", "n"])
    by_system = table[table["type"] == "all"].set_index("system")
    summary = pd.DataFrame([dict(reading=reading, layer=b[0], head=b[1], label=head_label(*b),
                                 selection=float(reading_correct[reading][selection][:, b[0] - 1, b[1] - 1].mean()),
                                 **by_system.loc[name, ["accuracy", "low", "high", "n"]].to_dict())
                            for (reading, b), name in zip(bests.items(), readings)])
    summary = summary.rename(columns={"accuracy": "held_out"})
    return CorefResult(passages, mentions, choices, correct, heads, best, table, summary, reading_correct)


# -- reading the result -------------------------------------------------------------------------------
def positions(mentions: pd.DataFrame) -> pd.DataFrame:
    """Per mention type (and all): how far back the nearest antecedent lies. n; share at rank 1 (the
    nearest earlier mention is an antecedent, so "nearest mention" is right), rank 2, rank 3+; mean
    number of candidates; median distance in words."""
    rows = []
    for t in COLUMNS:
        part = mentions if t == "all" else mentions[mentions["type"] == t]
        rank = part["rank"]
        rows.append(dict(type=t, n=len(part), rank_1=(rank == 1).mean(), rank_2=(rank == 2).mean(),
                         rank_3_plus=(rank >= 3).mean(), candidates=part["candidates"].mean(),
                         distance=part["distance"].median()))
    return pd.DataFrame(rows)


def position_baselines(passages: Sequence[Passage], mentions: pd.DataFrame, max_k: int = 5) -> pd.DataFrame:
    """Accuracy of "the k-th previous mention" for k = 1 .. max_k, overall and per type: what position
    alone can do."""
    rows = []
    for k in range(1, max_k + 1):
        ok = is_correct(passages, mentions, choose(passages, mentions, kth_previous(k)))
        rows.append(dict(k=k, **accuracy_by_type(ok, mentions["type"])))
    return pd.DataFrame(rows)


def failures(result: CorefResult, layer: int | None = None, head: int | None = None,
             held_out_only: bool = True) -> pd.DataFrame:
    """The mentions a head (the best by default) gets wrong: text, type, what it picked, whether that is
    the nearest mention, and whether it agrees with the mention in number / gender / animacy (a rival a
    reader could consider) or not (one no reader would pick). layer and head are 1-indexed; give both or neither."""
    layer, head = result.best if layer is None and head is None else (layer, head)
    check_head(layer, head, *result.choices.shape[1:])
    chosen = result.choices[:, layer - 1, head - 1]
    ok = result.correct[:, layer - 1, head - 1]
    rows = []
    for n, row in enumerate(result.mentions.itertuples(index=False)):
        if ok[n] or (held_out_only and row.half != "held-out"):
            continue
        p = result.passages[row.passage]
        j = int(chosen[n])
        rows.append(dict(id=row.id, mention=row.mention, text=row.text, type=row.type, picked=p.mention_text(j),
                         picked_nearest=j == row.mention - 1,
                         picked_agrees=agrees(p.mentions[j], p.mentions[row.mention]),
                         antecedent=p.mention_text(max(p.antecedents(row.mention))), rank=row.rank))
    return pd.DataFrame(rows)


def accuracy_by_rank(result: CorefResult, systems: Sequence[str], max_rank: int = 4,
                     held_out_only: bool = True) -> pd.DataFrame:
    """Accuracy of each system by the rank of the nearest antecedent (1, 2, ..., max_rank = that or more)."""
    m = result.mentions
    m = m[m["half"] == "held-out"] if held_out_only else m
    rank = np.minimum(m["rank"], max_rank)
    frame = pd.DataFrame({"rank": rank, "n": 1})
    for name in systems:
        frame[name] = m[f"{name} ok"].astype(float)
    return frame.groupby("rank").agg({"n": "sum", **{s: "mean" for s in systems}}).reset_index()


class SameWord(StrEnum):
    """`by_head_word`'s split (its `same_word` column): does some antecedent have the mention's own head word?"""

    YES = "an antecedent has the same head word"
    NO = "none has"


def by_head_word(result: CorefResult, systems: Sequence[str], held_out_only: bool = True) -> pd.DataFrame:
    """Accuracy of each system per mention type, split by whether some antecedent has the mention's own
    head word (`SameWord.YES`, a "same word" case, solvable by string matching) or none does."""
    m = result.mentions
    same = []
    for row in m.itertuples(index=False):
        p = result.passages[row.passage]
        same.append(any(_head(p, j) == row.head_word.lower() for j in p.antecedents(row.mention)))
    frame = m.assign(same_word=np.where(same, SameWord.YES, SameWord.NO))
    frame = frame[frame["half"] == "held-out"] if held_out_only else frame
    agg = {"n": ("type", "size"), **{s: (f"{s} ok", "mean") for s in systems}}
    return frame.groupby(["type", "same_word"]).agg(**agg).reset_index()
