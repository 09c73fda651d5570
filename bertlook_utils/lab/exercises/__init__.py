"""Exercises the learner implements, checked at once (ARENA style).

    exercises.names()                          # the exercises, in notebook order
    exercises.check("mean_entropy", fn)        # True, or AssertionError with a hint
    print(exercises.get("mean_entropy").stub)  # the empty function the student copy starts from

`check(name, fn, encoder)` runs `fn` first on small synthetic maps whose answers are known by construction,
then on a real map of `encoder` (the default model when None): one pair of real Wikipedia sentences, their
spaCy parse, and one committed coreference story. The real case's answer comes from the kit's own code (the
same definitions the notebooks use). At the first wrong answer it raises AssertionError saying which input,
what was expected and what came back, and, when the answer is what a known mistake gives (log base 2, a mean
where a sum is due, an off-by-one neighbour, [CLS] / [SEP] counted as words, rows not renormalised, ROOT left
out, ...), it names that mistake. A function that still raises NotImplementedError gets "not written yet".

Conventions, as everywhere in the kit: maps are numpy arrays whose rows sum to 1; word 0 of a word-level map is
[CLS] and its last word the final [SEP]; dependency heads are 1-based with 0 for ROOT; `intervene` counts
layers and heads from 0.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
import torch

# Two consecutive sentences of the Wikipedia article "Anarchism" in the kit's corpus (corpora.wiki_articles).
REAL_TEXT = ("Anarchism is a political philosophy that advocates self-governed societies based on voluntary "
             "institutions.", "Many types and traditions of anarchism exist, not all of which are mutually exclusive.")
REAL_HEAD = (2, 3)  # 1-based layer and head whose map the real cases read (every model has at least 2 x 3)
TOLERANCE = 1e-5


@dataclass(frozen=True)
class Case:
    """One input: `call(fn)` runs a function on it; `expected` is the right answer."""

    label: str
    call: Callable[[Callable], object]
    expected: object


def _args(*args) -> Callable[[Callable], object]:
    """A case that calls fn(*args) on fresh copies (a function that edits its input must not spoil the next)."""
    return lambda fn: fn(*copy.deepcopy(args))


@dataclass(frozen=True)
class Mistake:
    """A common wrong implementation (`fn`, same signature as the exercise) and the hint that names it."""

    hint: str
    fn: Callable


@dataclass(frozen=True)
class Exercise:
    name: str
    notebook: str  # "03"
    title: str
    stub: str  # the function the learner completes: signature, docstring, `raise NotImplementedError`
    difficulty: int  # 1 easy, 2 medium, 3 hard
    minutes: int
    hints: tuple[str, ...]
    synthetic: Callable[[], list[Case]]
    real: Callable[["RealInputs"], Case]
    mistakes: tuple[Mistake, ...] = field(default=())


# -- the real inputs ----------------------------------------------------------------------------------
class RealInputs:
    """The real maps every check ends with, built once per encoder."""

    def __init__(self, encoder):
        self.encoder = encoder
        layer, head = REAL_HEAD
        if encoder.n_layers < layer or encoder.n_heads < head:
            raise ValueError(f"the exercises read head {layer}-{head}; {encoder.name} has only "
                             f"{encoder.n_layers} x {encoder.n_heads} heads")

    @cached_property
    def pair(self):
        """The sentence pair, encoded (`models.Encoded`)."""
        return self.encoder.encode(*REAL_TEXT)

    def head_map(self, layer: int = REAL_HEAD[0], head: int = REAL_HEAD[1]) -> np.ndarray:
        return np.asarray(self.pair.attn[layer - 1, head - 1], dtype=np.float64)

    @cached_property
    def parsed(self):
        """(parses.Sentence, syntax.ParsedAttention) of the first sentence."""
        from ...data.parses import parse_texts
        from ...analyses.syntax import parsed_attention

        sentence = parse_texts([REAL_TEXT[0]])[0]
        return sentence, parsed_attention(self.encoder, [sentence], progress=False)[0]

    @cached_property
    def story(self):
        """(corefdata.Passage, word-level attention [L, H, m, m]) of the first committed coreference story."""
        from ...analyses.coref import word_attention
        from ...data.corefdata import read_jsonl

        passage = read_jsonl()[0]
        return passage, word_attention(self.encoder, passage)


_REAL: dict[int, RealInputs] = {}


def _real_inputs(encoder) -> RealInputs:
    if encoder is None:  # the default model, loaded once
        if 0 not in _REAL:
            from ...core.models import load_encoder

            _REAL[0] = RealInputs(load_encoder())
        return _REAL[0]
    if id(encoder) not in _REAL or _REAL[id(encoder)].encoder is not encoder:
        _REAL[id(encoder)] = RealInputs(encoder)
    return _REAL[id(encoder)]


# -- comparing answers --------------------------------------------------------------------------------
def _plain(value):
    """Tensors and numpy scalars -> numpy; dicts, tuples and lists kept as containers."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)) and any(isinstance(v, (dict, torch.Tensor)) for v in value):
        return [_plain(v) for v in value]
    return value


def same(got, expected, tolerance: float = TOLERANCE) -> bool:
    """Whether `got` equals `expected`: the same keys or shape, numbers within `tolerance`."""
    got, expected = _plain(got), _plain(expected)
    if isinstance(expected, dict):
        return isinstance(got, dict) and set(got) == set(expected) and all(
            same(got[k], expected[k], tolerance) for k in expected)
    try:
        g, e = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return g.shape == e.shape and bool(np.all(np.isclose(g, e, rtol=0, atol=tolerance, equal_nan=True)))


def _show(value) -> str:
    value = _plain(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_show(v)}" for k, v in value.items()) + "}"
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return repr(value)
    if array.ndim == 0:
        return f"{float(array):.6g}"
    return f"array of shape {array.shape}:\n" + np.array2string(array, precision=4, suppress_small=True,
                                                                  threshold=40, edgeitems=3)


def _row_sums(value) -> np.ndarray | None:
    """The row sums of an answer that is a stack of maps ([..., n, n]), else None."""
    try:
        array = np.asarray(_plain(value), dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array.sum(-1) if array.ndim >= 2 and array.shape[-1] == array.shape[-2] else None


def _has_nan(value) -> bool:
    value = _plain(value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    try:
        return bool(np.isnan(np.asarray(value, dtype=np.float64)).any())
    except (TypeError, ValueError):
        return False


def _is_zero(value) -> bool:
    value = _plain(value)
    if isinstance(value, dict):
        return bool(value) and all(_is_zero(v) for v in value.values())
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return array.size > 0 and not np.any(array)


# -- the exercises ------------------------------------------------------------------------------------
def _smoothed(attn: np.ndarray, amount: float) -> np.ndarray:
    n = attn.shape[-1]
    return (1 - amount) * attn + amount / n


def _row_entropy(p: np.ndarray, log=np.log) -> np.ndarray:
    return -(p * log(np.where(p > 0, p, 1.0))).sum(-1)


# 00 · word level -------------------------------------------------------------------------------------
def _word_onehot(word_ids) -> np.ndarray:
    ids = np.asarray(word_ids)
    onehot = np.zeros((len(ids), ids.max() + 1))
    onehot[np.arange(len(ids)), ids] = 1
    return onehot


def _word_level_mistake(to: str, rows: str):
    def fn(attn, word_ids):
        onehot = _word_onehot(word_ids)
        to_words = np.asarray(attn) @ onehot
        if to == "mean":
            to_words = to_words / onehot.sum(0)
        if rows == "first":
            return to_words[onehot.argmax(0)]
        summed = onehot.T @ to_words
        return summed if rows == "sum" else summed / onehot.sum(0)[:, None]
    return fn


def _word_level_cases() -> list[Case]:
    split = np.array([[0.1, 0.2, 0.3, 0.4],  # [CLS] play ##ing [SEP]
                      [0.5, 0.25, 0.25, 0.0],
                      [0.0, 0.5, 0.5, 0.0],
                      [0.2, 0.6, 0.0, 0.2]])
    three = np.full((8, 8), 1 / 8)
    return [
        Case("[CLS] play ##ing [SEP] (word ids 0 1 1 2)", _args(split, [0, 1, 1, 2]),
             np.array([[0.1, 0.5, 0.4], [0.25, 0.75, 0.0], [0.2, 0.6, 0.2]])),
        Case("a 5-token identity map with no split word", _args(np.eye(5), [0, 1, 2, 3, 4]), np.eye(5)),
        Case("a uniform 8-token map, word ids 0 1 1 1 2 3 3 4", _args(three, [0, 1, 1, 1, 2, 3, 3, 4]),
             np.tile([1 / 8, 3 / 8, 1 / 8, 2 / 8, 1 / 8], (5, 1))),
    ]


def _word_level_real(real: RealInputs) -> Case:
    from ...core.wordlevel import to_word_level

    attn, ids = real.head_map(), real.pair.word_ids
    return Case(f"the real map of head {_head()} on a sentence pair ({len(ids)} tokens)", _args(attn, ids),
                to_word_level(attn, ids))


# 01 · surface shares ---------------------------------------------------------------------------------
def _surface(attn, tokens, swap=False, divide_by_pairs=False, last_sep_only=False):
    attn = np.asarray(attn, dtype=np.float64)
    n = len(tokens)
    prev, next_ = np.trace(attn, -1), np.trace(attn, 1)
    if swap:
        prev, next_ = next_, prev
    sep_columns = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    if last_sep_only:
        sep_columns = sep_columns[-1:]
    cls_columns = [j for j, t in enumerate(tokens) if t == "[CLS]"]
    divisor = n - 1 if divide_by_pairs else n
    return {"prev": prev / divisor, "next": next_ / divisor, "cls": attn[:, cls_columns].sum(1).mean(),
            "sep": attn[:, sep_columns].sum(1).mean()}


def _surface_cases() -> list[Case]:
    single = ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
    pair = ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "ran", ",", "!", "[SEP]"]
    previous = np.eye(6, k=-1)
    previous[0, 0] = 1  # row 0 has no previous token: it attends to itself ([CLS])
    following = np.eye(6, k=1)
    following[5, 5] = 1
    to_seps = np.zeros((11, 11))
    to_seps[:, [5, 10]] = 0.5
    return [
        Case("a previous-token map of [CLS] the cat sat . [SEP]", _args(previous, single),
             {"prev": 5 / 6, "next": 0.0, "cls": 2 / 6, "sep": 0.0}),  # rows 0 and 1 look at [CLS]
        Case("a next-token map of [CLS] the cat sat . [SEP]", _args(following, single),
             {"prev": 0.0, "next": 5 / 6, "cls": 0.0, "sep": 2 / 6}),
        Case("a pair whose every row splits its mass between its two [SEP]s", _args(to_seps, pair),
             {"prev": 0.5 / 11, "next": 1 / 11, "cls": 0.0, "sep": 1.0}),
    ]


def _surface_real(real: RealInputs) -> Case:
    from dataclasses import replace

    from ...analyses.surface import token_stats

    layer, head = REAL_HEAD
    one_head = replace(real.pair, attn=real.pair.attn[layer - 1:layer, head - 1:head])
    row = token_stats([one_head]).iloc[0]
    return Case(f"the real map of head {_head()} on a sentence pair", _args(real.head_map(), list(real.pair.tokens)),
                {k: float(row[k]) for k in ("prev", "next", "cls", "sep")})


# 02 · disabling a head -------------------------------------------------------------------------------
def _uniform_reference(probs, head, valid, *, zero=False, all_columns=False, heads=None):
    out = probs.clone()
    columns = torch.ones_like(valid, dtype=probs.dtype) if all_columns else valid.to(probs.dtype)  # [B, T]
    rows = torch.zeros_like(columns) if zero else columns / columns.sum(-1, keepdim=True)
    chosen = slice(None) if heads == "all" else slice(head, head + 1)
    out[:, chosen] = rows[:, None, None, :].expand_as(out[:, chosen])
    return out


def _uniform_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(2, 3, 4, 4, generator=generator)
    probs[1, :, :, 3] = 0  # the second input is one token shorter: its last column is padding
    probs = probs / probs.sum(-1, keepdim=True)
    valid = torch.tensor([[True, True, True, True], [True, True, True, False]])
    expected = probs.clone()
    expected[0, 1] = 1 / 4
    expected[1, 1, :, :3], expected[1, 1, :, 3] = 1 / 3, 0.0
    expected_0 = probs.clone()
    expected_0[0, 0] = 1 / 4
    expected_0[1, 0, :, :3], expected_0[1, 0, :, 3] = 1 / 3, 0.0
    return [Case("2 inputs x 3 heads x 4 tokens, head 1 (0-based), the second input padded", _args(probs, 1, valid),
                 expected),
            Case("the same batch, head 0", _args(probs, 0, valid), expected_0)]


def _uniform_real(real: RealInputs) -> Case:
    from ...engine.extract import batches
    from ...core.intervene import edit_attention, uniform_head

    layer, head = REAL_HEAD[0] - 1, REAL_HEAD[1] - 1  # intervene counts from 0
    batch = next(batches(real.encoder, [REAL_TEXT, REAL_TEXT[1]], 2, attention=False))  # the second is padded

    def outputs(fn):
        def edit(current, probs):
            return fn(probs, head, batch.valid) if current == layer else probs
        with torch.inference_mode(), edit_attention(real.encoder.model, edit):
            return real.encoder.model(**batch.model_inputs).last_hidden_state

    with torch.inference_mode(), edit_attention(real.encoder.model, uniform_head(layer, head, batch.valid)):
        expected = real.encoder.model(**batch.model_inputs).last_hidden_state
    return Case(f"the real model with head {_head()} disabled inside intervene.edit_attention (last hidden states; "
                "a pair and a padded single sentence)", outputs, expected)


# 03 · entropy ----------------------------------------------------------------------------------------
def _entropy(attn, smoothing=1e-4, log=np.log, reduce=np.mean):
    return float(reduce(_row_entropy(_smoothed(np.asarray(attn, dtype=np.float64), smoothing), log)))


def _entropy_cases() -> list[Case]:
    s, n = 1e-4, 8
    big, small = 1 - s + s / n, s / n
    one_hot = -(big * np.log(big) + (n - 1) * small * np.log(small))
    halves = np.zeros((6, 6))
    halves[:, :2] = 0.5
    big, small = 0.5 * (1 - s) + s / 6, s / 6
    two = -(2 * big * np.log(big) + 4 * small * np.log(small))
    return [Case("a uniform 5-token map", _args(np.full((5, 5), 0.2)), np.log(5)),
            Case("an 8-token identity map (one-hot rows)", _args(np.eye(8)), one_hot),
            Case("a 6-token map whose rows split their mass over the first two tokens", _args(halves), two)]


def _entropy_real(real: RealInputs) -> Case:
    from dataclasses import replace

    from ...analyses.surface import entropy_stats

    layer, head = REAL_HEAD
    one_head = replace(real.pair, attn=real.pair.attn[layer - 1:layer, head - 1:head])
    return Case(f"the real map of head {_head()} on a sentence pair", _args(real.head_map()),
                float(entropy_stats([one_head]).iloc[0]["entropy"]))


# 04 · a head's accuracy for one relation, and the offset baseline ----------------------------------------
TOY_HEADS = [2, 3, 0, 3, 6, 4]  # the cat sat on the mat
TOY_RELATIONS = ["det", "nsubj", "ROOT", "prep", "det", "pobj"]


def _relation_accuracy(word_attn, heads, relations, relation, *, specials=False, zero_based=False, self_ok=False):
    attn = np.array(word_attn, dtype=np.float64)
    n = len(heads)
    if not self_ok:
        attn[np.arange(1, n + 1), np.arange(1, n + 1)] = -1
    keep = [i for i, r in enumerate(relations) if r == relation]
    if not keep:
        raise ValueError(f"no word has the relation {relation!r}")
    right = 0
    for i in keep:
        row = attn[i + 1] if specials else attn[i + 1, 1:n + 1]
        guess = int(row.argmax()) if specials else int(row.argmax()) + (0 if zero_based else 1)
        right += guess == heads[i]
    return right / len(keep)


def _toy_word_map() -> np.ndarray:
    """[CLS] the cat sat on the mat [SEP] (8 words): every word's largest weight on the next word, the last on
    [SEP] and then on "on"; "cat" gives 0.45 to itself and 0.4 to "sat"."""
    attn = np.zeros((8, 8))
    attn[0, 0] = 1
    for w in range(1, 6):
        attn[w, w + 1] = 0.6
        attn[w, 0] = 0.4
    attn[2] = 0
    attn[2, [2, 3, 0]] = [0.45, 0.4, 0.15]
    attn[6, [7, 4, 0]] = [0.6, 0.3, 0.1]
    attn[7, 7] = 1
    return attn


def _relation_cases() -> list[Case]:
    toy = _toy_word_map()
    return [Case(f'"the cat sat on the mat", relation {r!r}', _args(toy, TOY_HEADS, TOY_RELATIONS, r), acc)
            for r, acc in (("det", 1.0), ("pobj", 1.0), ("nsubj", 1.0), ("prep", 0.0))]


def _relation_real(real: RealInputs) -> Case:
    sentence, parsed = real.parsed
    layer, head = REAL_HEAD
    from ...analyses.syntax import score_example

    own = score_example(parsed)["own"][:, 0, layer - 1, head - 1]  # [n]: dep->head right or not
    relation = "amod" if "amod" in sentence.relations else sentence.relations[0]
    keep = np.array(sentence.relations) == relation
    return Case(f"the real word-level map of head {_head()} on {sentence.text!r}, relation {relation!r} (spaCy parse)",
                _args(parsed.word_attn[layer - 1, head - 1], list(sentence.heads), list(sentence.relations),
                      relation), float(own[keep].mean()))


def _best_offset(heads, relations, relation, offsets, *, sign=1, zero_based=False):
    words = [i + (0 if zero_based else 1) for i, r in enumerate(relations) if r == relation]
    gold = [heads[i] for i, r in enumerate(relations) if r == relation]
    if not words:
        raise ValueError(f"no word has the relation {relation!r}")
    scores = [float(np.mean([w + sign * o == g for w, g in zip(words, gold)])) for o in offsets]
    k = int(np.argmax(scores))
    return offsets[k], scores[k]


def _offset_cases() -> list[Case]:
    return [Case(f'"the cat sat on the mat", relation {r!r}, offsets {o}', _args(TOY_HEADS, TOY_RELATIONS, r, o), e)
            for r, o, e in (("det", [-2, -1, 1, 2], (1, 1.0)), ("pobj", [-2, -1, 1, 2], (-2, 1.0)),
                            ("prep", [-1, 1], (-1, 1.0)), ("nsubj", [-1, 2], (-1, 0.0)))]


def _offset_real(real: RealInputs) -> Case:
    from ...analyses.syntax import CLARK_OFFSETS

    sentence, _ = real.parsed
    relation = "amod" if "amod" in sentence.relations else sentence.relations[0]
    offsets = list(CLARK_OFFSETS)
    n = len(sentence)
    chosen = [i for i, r in enumerate(sentence.relations) if r == relation]
    hits = np.array([[i + 1 + o == sentence.heads[i] and 1 <= i + 1 + o <= n for i in chosen] for o in offsets])
    k = int(hits.mean(1).argmax())
    return Case(f"the spaCy parse of {sentence.text!r}, relation {relation!r}, offsets {offsets}",
                _args(list(sentence.heads), list(sentence.relations), relation, offsets),
                (offsets[k], float(hits[k].mean())))


# 05 · antecedents ------------------------------------------------------------------------------------
def _choose(word_attn, mention_heads, i, *, column=False, later=False, self_ok=False):
    attn = np.asarray(word_attn)
    row = attn[:, mention_heads[i]] if column else attn[mention_heads[i]]
    candidates = [j for j in range(len(mention_heads)) if (j != i or self_ok) and (later or j <= i)]
    return int(max(candidates, key=lambda j: row[mention_heads[j]]))


def _antecedent_cases() -> list[Case]:
    attn = np.zeros((8, 8))  # [CLS] w1 .. w6 [SEP]; mentions' head words 1, 3, 5
    attn[:, 0] = 1
    attn[5, [0, 1, 3, 5, 4]] = [0.1, 0.3, 0.2, 0.35, 0.05]  # from word 5: word 1 beats word 3; itself the most
    attn[3, [0, 1, 5]] = [0.2, 0.3, 0.5]  # from word 3: the later mention (word 5) gets the most
    attn[1, [0, 3]] = [0.4, 0.6]
    attn[3, 0], attn[5, 0] = 0.0, 0.0
    attn[3] /= attn[3].sum()
    attn[5] /= attn[5].sum()
    heads = [1, 3, 5]
    return [Case("a toy map, mention 2 (head word 5) among mentions with head words 1, 3, 5", _args(attn, heads, 2), 0),
            Case("the same map, mention 1 (head word 3)", _args(attn, heads, 1), 0)]


def _antecedent_real(real: RealInputs) -> Case:
    from ...analyses.coref import choose_by_attention

    passage, word_attn = real.story
    layer, head = REAL_HEAD
    k = 0
    i = passage.coreferent()[k]
    heads = [m.head + 1 for m in passage.mentions]  # [CLS] is word 0
    chosen = choose_by_attention(word_attn[layer - 1:layer, head - 1:head], passage)[k, 0, 0]
    return Case(f"the real word-level map of head {_head()} on the story {passage.id!r}, mention {i} "
                f"({passage.mention_text(i)!r})", _args(word_attn[layer - 1, head - 1], heads, i), int(chosen))


# 06 · UAS ------------------------------------------------------------------------------------------
def _uas(predicted, gold, is_punct, *, punct=False, root=True, percent=False):
    p, g, keep = np.asarray(predicted), np.asarray(gold), ~np.asarray(is_punct, dtype=bool)
    if punct:
        keep = np.ones_like(keep)
    if not root:
        keep &= g != 0
    score = float((p[keep] == g[keep]).mean())
    return 100 * score if percent else score


def _uas_cases() -> list[Case]:
    gold = [2, 3, 0, 3, 6, 4, 3]  # the cat sat on the mat .
    punct = [False] * 6 + [True]
    return [Case("7 words, every head right but the final '.'", _args([2, 3, 0, 3, 6, 4, 1], gold, punct), 1.0),
            Case("7 words, only the root word wrong", _args([2, 3, 1, 3, 6, 4, 3], gold, punct), 5 / 6),
            Case("7 words, 'on' and 'mat' wrong", _args([2, 3, 0, 5, 6, 5, 3], gold, punct), 4 / 6)]


def _uas_real(real: RealInputs) -> Case:
    from ...analyses.probes import uas
    from ...analyses.syntax import predictions

    sentence, parsed = real.parsed
    layer, head = REAL_HEAD
    guess = predictions(parsed.word_attn)[0, layer - 1, head - 1]  # dep->head
    return Case(f"head {_head()}'s argmax heads for {sentence.text!r} against its spaCy parse",
                _args(list(guess), list(sentence.heads), list(sentence.is_punct)),
                uas([guess], [sentence.heads], [sentence.is_punct]))


# 07 · the distance between two heads ----------------------------------------------------------------------
def _js_sum(a, b, *, log=np.log, reduce=np.sum, smoothing=1e-3, kl=False):
    p = _smoothed(np.asarray(a, dtype=np.float64), smoothing)
    q = _smoothed(np.asarray(b, dtype=np.float64), smoothing)
    if kl:
        per_row = (p * (log(p) - log(q))).sum(-1)
    else:
        m = (p + q) / 2
        per_row = ((p * (log(p) - log(m))).sum(-1) + (q * (log(q) - log(m))).sum(-1)) / 2
    return float(reduce(per_row))


def _distance_cases() -> list[Case]:
    n, s = 6, 1e-3
    big, small = 1 - s + s / n, s / n  # a one-hot row after smoothing
    middle = (big + small) / 2
    disjoint = (big * np.log(big / middle) + small * np.log(small / middle))  # per row, the same for both rows
    previous, following = np.roll(np.eye(n), -1, 1), np.roll(np.eye(n), 1, 1)  # every row on a different column
    return [Case("a head and itself (6 tokens)", _args(np.eye(n), np.eye(n)), 0.0),
            Case("two one-hot heads that never look at the same token (6 tokens)", _args(previous, following),
                 n * disjoint),
            Case("a uniform head and itself", _args(np.full((4, 4), 0.25), np.full((4, 4), 0.25)), 0.0),
            Case("the same disjoint heads in the other order", _args(following, previous), n * disjoint),
            Case("a one-hot head against a uniform head (4 tokens)", _args(np.eye(4), np.full((4, 4), 0.25)),
                 _js_sum(np.eye(4), np.full((4, 4), 0.25)))]


def _distance_real(real: RealInputs) -> Case:
    from ...analyses.clustering import js_distances

    layer, head = REAL_HEAD
    other = (1, 1)
    distances = js_distances([real.pair])
    n_heads = real.encoder.n_heads
    i, j = (layer - 1) * n_heads + head - 1, (other[0] - 1) * n_heads + other[1] - 1
    return Case(f"heads {_head()} and 1-1 on a real sentence pair",
                _args(real.head_map(), real.head_map(*other)), float(distances[i, j]))


# 08 · the stripes feature ----------------------------------------------------------------------------------
def _stripes(attn, *, columns=3, rescale=True, per_row=False):
    attn = np.asarray(attn, dtype=np.float64)
    n = attn.shape[-1]
    if per_row:
        top = np.sort(attn, -1)[:, -columns:].sum(-1).mean()
    else:
        top = np.sort(attn.mean(0))[-columns:].sum()
    if not rescale:
        return float(top)
    chance = min(columns / n, 1.0)
    return float(max((top - chance) / max(1 - chance, 1e-6), 0.0))


def _stripes_cases() -> list[Case]:
    half = np.full((10, 10), 0.05)
    half[:, 0] += 0.5
    two = np.zeros((10, 10))
    two[:, [0, 9]] = 0.5
    return [Case("a uniform 10-token map", _args(np.full((10, 10), 0.1)), 0.0),
            Case("a 10-token map whose every row splits its mass between columns 0 and 9", _args(two), 1.0),
            Case("a 10-token map: half of every row on column 0, half spread evenly", _args(half), 0.5),
            Case("a 10-token identity map", _args(np.eye(10)), 0.0)]


def _stripes_real(real: RealInputs) -> Case:
    from ...analyses.patterns import map_features

    return Case(f"the real map of head {_head()} on a sentence pair", _args(real.head_map()),
                map_features(real.head_map(), real.pair.tokens, real.pair.segment_ids)["stripes"])


# 09 · vertical stripes ---------------------------------------------------------------------------------
def _stripe_columns(attn, threshold, *, how="mean"):
    attn = np.asarray(attn, dtype=np.float64)
    column = {"mean": attn.mean(0), "sum": attn.sum(0), "min": attn.min(0)}[how if how != "strict" else "mean"]
    found = column > threshold if how == "strict" else column >= threshold
    return [int(j) for j in np.flatnonzero(found)]


def _stripe_column_cases() -> list[Case]:
    split = np.zeros((6, 6))
    split[:, [0, 5]] = 0.5
    mixed = np.eye(6) * 0.6
    mixed[:, 0] += 0.4
    mixed[0, 0] = 1.0
    return [Case("every row splits its mass between columns 0 and 5; threshold 0.5", _args(split, 0.5), [0, 5]),
            Case("0.4 of every row to column 0, 0.6 to the token itself; threshold 0.2", _args(mixed, 0.2), [0]),
            Case("an identity map of 6 tokens; threshold 0.2", _args(np.eye(6), 0.2), [])]


def _stripe_column_real(real: RealInputs) -> Case:
    attn = real.head_map()
    return Case(f"the real map of head {_head()} on a sentence pair, threshold 0.2", _args(attn, 0.2),
                [int(j) for j in np.flatnonzero(attn.mean(0) >= 0.2)])


# 10 · attention rollout ----------------------------------------------------------------------------------
def _rollout(attn, *, residual=True, half=True, reverse=False):
    attn = np.asarray(attn, dtype=np.float64)
    mixed = attn.mean(1)
    if residual:
        eye = np.eye(attn.shape[-1])
        mixed = 0.5 * mixed + 0.5 * eye if half else mixed + eye
    out = [mixed[0]]
    for layer in mixed[1:]:
        out.append(out[-1] @ layer if reverse else layer @ out[-1])
    return np.stack(out)


def _rollout_cases() -> list[Case]:
    n = 4
    uniform = np.full((n, n), 1 / n)
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1
    two = np.stack([np.stack([prev, prev]), np.stack([uniform, uniform])])  # layer 1 previous-token, layer 2 uniform
    first = 0.5 * prev + 0.5 * np.eye(n)
    second = (0.5 * uniform + 0.5 * np.eye(n)) @ first
    return [Case("two layers of identity maps (4 tokens, 2 heads)", _args(np.tile(np.eye(n), (2, 2, 1, 1))),
                 np.tile(np.eye(n), (2, 1, 1))),
            Case("one layer: one identity head and one uniform head", _args(np.stack([[np.eye(n), uniform]])),
                 np.array([0.75 * np.eye(n) + 0.25 * uniform])),
            Case("layer 1 previous-token, layer 2 uniform (2 heads each)", _args(two), np.stack([first, second]))]


def _rollout_real(real: RealInputs) -> Case:
    from ...analyses.attribution import rollout

    return Case(f"every layer and head of the real model on a sentence pair ({real.pair.n_tokens} tokens)",
                _args(np.asarray(real.pair.attn, dtype=np.float64)), rollout(real.pair.attn))


def _head() -> str:
    return "-".join(map(str, REAL_HEAD))


EXERCISES = (
    Exercise("word_level", "00", "Word-level attention", '''def word_level(attn, word_ids):
    """attn [n, n] (rows sum to 1) and word_ids [n] (token -> word) -> the word-level map [w, w]:
    attention TO a word is the SUM over its tokens' columns, attention FROM a word the MEAN of its tokens' rows."""
    raise NotImplementedError''', 1, 10,
             ("Build a one-hot [n, w] matrix M with M[t, word_ids[t]] = 1: then attn @ M sums the columns.",
              "Average rows with M.T @ x divided by the number of tokens per word (M.sum(0))."),
             _word_level_cases, _word_level_real,
             (Mistake("attention TO a word must be the SUM over its tokens' columns, not their mean (rows would no "
                      "longer sum to 1)", _word_level_mistake("mean", "mean")),
              Mistake("attention FROM a word must be the MEAN of its tokens' rows, not their sum",
                      _word_level_mistake("sum", "sum")),
              Mistake("you kept the first token's row (Clark et al.'s released code); the paper takes the MEAN of "
                      "the word's rows", _word_level_mistake("sum", "first")))),
    Exercise("surface_shares", "01", "Previous / next / [CLS] / [SEP] shares of one map", '''def surface_shares(attn, tokens):
    """attn [n, n], tokens [n] -> {"prev", "next", "cls", "sep"}: the mass each row puts on the previous token,
    the next token, [CLS] and any [SEP], averaged over all n rows (a row without a previous / next token adds 0)."""
    raise NotImplementedError''', 1, 10,
             ("The weights on the previous token are the diagonal just below the main one: np.diagonal(attn, -1).",
              "Divide by n, the number of rows (Clark et al.'s code), not by n - 1.",
              "A pair has two [SEP]s: count the mass on both."),
             _surface_cases, _surface_real,
             (Mistake("prev and next are swapped: the previous token of row i is column i - 1, the diagonal BELOW "
                      "the main one", lambda a, t: _surface(a, t, swap=True)),
              Mistake("divide prev / next by n, the number of rows (Clark et al.'s convention), not by n - 1 pairs",
                      lambda a, t: _surface(a, t, divide_by_pairs=True)),
              Mistake("sep must count every [SEP] of a pair, not only the last one",
                      lambda a, t: _surface(a, t, last_sep_only=True)))),
    Exercise("uniform_head", "02", "Disable a head with intervene.edit_attention", '''def uniform_head(probs, head, valid):
    """probs [B, H, T, T] (a torch tensor: one layer's attention, padded columns 0), head (0-based), valid bool [B, T]
    -> a new tensor in which that head's rows are uniform over each input's real tokens; the other heads unchanged.
    Used as `edit_attention(model, lambda layer, probs: uniform_head(probs, head, valid) if layer == L else probs)`."""
    raise NotImplementedError''', 2, 15,
             ("Clone first (probs.clone()), then assign to out[:, head].",
              "Each input's uniform row is valid / valid.sum(-1): broadcast it to [B, T, T] with [:, None, :]."),
             _uniform_cases, _uniform_real,
             (Mistake("the head's rows are all zero: a disabled head must still be a distribution, uniform over the "
                      "real tokens", lambda p, h, v: _uniform_reference(p, h, v, zero=True)),
              Mistake("the padded columns got weight too: spread the rows over each input's real tokens (valid) only",
                      lambda p, h, v: _uniform_reference(p, h, v, all_columns=True)),
              Mistake("`head` is 0-based here, as in intervene: you changed another head",
                      lambda p, h, v: _uniform_reference(p, h - 1, v) if h >= 1 else _uniform_reference(p, h + 1, v)),
              Mistake("only the given head changes; you made every head uniform",
                      lambda p, h, v: _uniform_reference(p, h, v, heads="all")))),
    Exercise("mean_entropy", "03", "The mean entropy of a head", '''def mean_entropy(attn):
    """attn [n, n] -> the mean over rows of each row's entropy in nats, after smoothing every weight to
    0.9999 * a + 0.0001 / n (so that log 0 never happens)."""
    raise NotImplementedError''', 1, 10,
             ("Entropy of a row p: -sum(p * log(p)), natural log.", "Smooth first, then take the entropy, then the "
              "mean over rows."),
             _entropy_cases, _entropy_real,
             (Mistake("entropy here is in nats: use the natural log (np.log), not log base 2",
                      lambda a: _entropy(a, log=np.log2)),
              Mistake("smooth every weight first (0.9999 * a + 0.0001 / n); without it a one-hot row gives 0",
                      lambda a: _entropy(a, smoothing=0.0)),
              Mistake("average over rows (np.mean), not sum", lambda a: _entropy(a, reduce=np.sum)),
              Mistake("the smoothing is 0.0001 / n (notebook 03), not the clustering's 0.001 / n",
                      lambda a: _entropy(a, smoothing=1e-3)))),
    Exercise("relation_accuracy", "04", "A head's accuracy for one relation", '''def relation_accuracy(word_attn, heads, relations, relation):
    """word_attn [m, m]: a word-level map with [CLS] as word 0 and [SEP] as word m - 1; heads [m - 2]: each word's
    gold head (1-based, 0 = ROOT); relations [m - 2] -> the share of words with `relation` whose row's largest
    weight, over the words 1 .. m - 2 other than itself, falls on the gold head."""
    raise NotImplementedError''', 2, 15,
             ("Word i of the sentence (0-based in `heads`) is row i + 1 of word_attn.",
              "Only columns 1 .. m - 2 are candidates: [CLS] and [SEP] are not words, and a word is not its own head."),
             _relation_cases, _relation_real,
             (Mistake("[CLS] and [SEP] are not words: take the argmax over columns 1 .. m - 2 only",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, specials=True)),
              Mistake("off by one: heads are 1-based (word 1 is column 1), so add 1 to an argmax over columns 1 .. m - 2",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, zero_based=True)),
              Mistake("a word is never its own head: leave its own column out of the argmax",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, self_ok=True)))),
    Exercise("best_offset", "04", "The best fixed-offset baseline", '''def best_offset(heads, relations, relation, offsets):
    """heads [n] (1-based, 0 = ROOT), relations [n] -> (offset, accuracy): the offset o in `offsets` for which
    "the head of word i is word i + o" is right most often among the words with `relation` (the first such offset
    on a tie), and that share."""
    raise NotImplementedError''', 1, 10,
             ("Word i (0-based in the list) is word i + 1 in 1-based numbering: its guess is i + 1 + o.",
              "np.argmax returns the first of equal values, which is the tie rule asked for."),
             _offset_cases, _offset_real,
             (Mistake("the guess is word i + o, not i - o: an offset of -1 means the previous word",
                      lambda h, r, rel, o: _best_offset(h, r, rel, o, sign=-1)),
              Mistake("off by one: heads are 1-based, so the word at list position i is word i + 1",
                      lambda h, r, rel, o: _best_offset(h, r, rel, o, zero_based=True)))),
    Exercise("choose_antecedent", "05", "Antecedent selection by attention", '''def choose_antecedent(word_attn, mention_heads, i):
    """word_attn [m, m] (word level), mention_heads: the word index of each mention's head word, in text order;
    i: a mention with at least one earlier mention -> the index j < i of the earlier mention whose head word
    receives the most attention FROM mention i's head word."""
    raise NotImplementedError''', 1, 10,
             ("Read the row of mention i's head word: word_attn[mention_heads[i]].",
              "Only earlier mentions (j < i) are candidates."),
             _antecedent_cases, _antecedent_real,
             (Mistake("read attention FROM mention i (its row), not TO it (its column)",
                      lambda a, h, i: _choose(a, h, i, column=True)),
              Mistake("only EARLIER mentions (j < i) can be antecedents; you allowed later ones",
                      lambda a, h, i: _choose(a, h, i, later=True)),
              Mistake("a mention is not its own antecedent: candidates are j < i, not j <= i",
                      lambda a, h, i: _choose(a, h, i, self_ok=True)))),
    Exercise("uas", "06", "Unlabelled attachment score", '''def uas(predicted, gold, is_punct):
    """predicted, gold [n] heads (1-based, 0 = ROOT), is_punct [n] -> the share (0..1) of non-punctuation words
    whose predicted head is the gold head (the root word counts: its gold head is 0)."""
    raise NotImplementedError''', 1, 5,
             ("Keep the words with is_punct False; the root word stays in.",),
             _uas_cases, _uas_real,
             (Mistake("punctuation is not scored: leave out the words with is_punct True",
                      lambda p, g, q: _uas(p, g, q, punct=True)),
              Mistake("ROOT left out: the root word counts too (its gold head is 0)",
                      lambda p, g, q: _uas(p, g, q, root=False)),
              Mistake("return a share between 0 and 1, not a percentage", lambda p, g, q: _uas(p, g, q, percent=True)))),
    Exercise("head_distance", "07", "The Jensen–Shannon distance between two heads", '''def head_distance(a, b):
    """a, b [n, n]: two heads' maps of the same input -> the SUM over rows of the Jensen-Shannon divergence
    (natural log) between their rows, each row first smoothed to 0.999 * a + 0.001 / n (Clark et al. §6)."""
    raise NotImplementedError''', 2, 15,
             ("JS(P, Q) = (KL(P || M) + KL(Q || M)) / 2 with M = (P + Q) / 2.",
              "scipy.spatial.distance.jensenshannon is something else: the square root, in base 2 by default."),
             _distance_cases, _distance_real,
             (Mistake("use the natural log, not log base 2", lambda a, b: _js_sum(a, b, log=np.log2)),
              Mistake("SUM the divergences over rows (Clark et al. add them over every token), do not average them",
                      lambda a, b: _js_sum(a, b, reduce=np.mean)),
              Mistake("that is KL(P || Q), which is not symmetric; JS compares each row with the mean M = (P + Q) / 2",
                      lambda a, b: _js_sum(a, b, kl=True)),
              Mistake("smooth every row first (0.999 * a + 0.001 / n)", lambda a, b: _js_sum(a, b, smoothing=0.0)))),
    Exercise("stripes_feature", "08", "The stripes feature of a map", '''def stripes_feature(attn):
    """attn [n, n] -> the pattern classifier's `stripes` feature: the mean over rows of the mass on the 3 columns
    that receive the most attention overall (by their mean over rows), rescaled so that a uniform map gives 0 and a
    map on at most 3 columns gives 1: (top - 3/n) / (1 - 3/n), never below 0."""
    raise NotImplementedError''', 2, 10,
             ("First the column means attn.mean(0); the 3 largest of them, summed, are `top`.",
              "A uniform map puts 3/n on any 3 columns: that is the chance level to subtract."),
             _stripes_cases, _stripes_real,
             (Mistake("rescale: (top - 3/n) / (1 - 3/n), so that a uniform map gives 0",
                      lambda a: _stripes(a, rescale=False)),
              Mistake("choose the 3 columns once, by their mean over rows; you took each row's own 3 largest weights",
                      lambda a: _stripes(a, per_row=True)),
              Mistake("the feature sums the 3 largest columns, not only the largest one",
                      lambda a: _stripes(a, columns=1)))),
    Exercise("stripe_columns", "09", "Vertical stripes", '''def stripe_columns(attn, threshold):
    """attn [n, n] -> the sorted list of columns j whose attention, averaged over the n rows, is at least
    `threshold` (Kovaleva et al.'s vertical stripes)."""
    raise NotImplementedError''', 1, 5,
             ("attn.mean(0) is each column's attention averaged over rows.",),
             _stripe_column_cases, _stripe_column_real,
             (Mistake("average each column over the rows; a sum over rows grows with n",
                      lambda a, t: _stripe_columns(a, t, how="sum")),
              Mistake("a stripe needs a large MEAN over rows, not a large weight in every row",
                      lambda a, t: _stripe_columns(a, t, how="min")),
              Mistake("'at least' the threshold: use >=, not >", lambda a, t: _stripe_columns(a, t, how="strict")))),
    Exercise("rollout", "10", "Attention rollout", '''def rollout(attn):
    """attn [L, H, n, n] (one input, every layer and head) -> [L, n, n]: with A_l = 0.5 * (mean over heads) +
    0.5 * identity (the residual), R_1 = A_1 and R_l = A_l @ R_(l-1) (Abnar & Zuidema 2020)."""
    raise NotImplementedError''', 2, 15,
             ("Average the heads first: attn.mean(1) is [L, n, n].",
              "The newer layer multiplies from the left: R_l = A_l @ R_(l-1)."),
             _rollout_cases, _rollout_real,
             (Mistake("add the residual: A_l = 0.5 * mean over heads + 0.5 * identity", lambda a: _rollout(a, residual=False)),
              Mistake("rows not renormalised: mean + identity sums to 2 per row; take 0.5 * mean + 0.5 * identity",
                      lambda a: _rollout(a, half=False)),
              Mistake("the order is reversed: R_l = A_l @ R_(l-1), the newer layer on the left",
                      lambda a: _rollout(a, reverse=True)))),
)
_BY_NAME = {e.name: e for e in EXERCISES}


def names(notebook: str | None = None) -> list[str]:
    """The exercises' names in notebook order (only those of `notebook`, "00" .. "10", when given)."""
    return [e.name for e in EXERCISES if notebook is None or e.notebook == notebook]


def get(name: str) -> Exercise:
    if name not in _BY_NAME:
        raise KeyError(f"no exercise {name!r}; the exercises are {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def cases(name: str, encoder=None) -> list[Case]:
    """Every input `check` runs, the real one last."""
    exercise = get(name)
    return exercise.synthetic() + [exercise.real(_real_inputs(encoder))]


def _verdict(exercise: Exercise, fn: Callable, case: Case) -> None:
    where = f"{exercise.name}, on {case.label}"
    try:
        got = case.call(fn)
    except NotImplementedError:
        raise AssertionError(f"{exercise.name} is not written yet: replace `raise NotImplementedError` with your "
                             "code (the hints are above the cell)") from None
    except Exception as error:  # the learner's code failed: say where, keep the traceback
        raise AssertionError(f"{where}: your function raised {type(error).__name__}: {error}") from error
    if same(got, case.expected):
        return
    named = [m.hint for m in exercise.mistakes if _gives(m, case, got)]
    sums, right = _row_sums(got), _row_sums(case.expected)
    if not named and right is not None and np.allclose(right, 1) and sums is not None and sums.shape == right.shape \
            and not np.allclose(sums, 1, atol=1e-4):
        named.append("rows not renormalised: every row of the answer sums to 1, yours sum to "
                     + ", ".join(f"{v:g}" for v in np.unique(sums.round(4))[:5]))
    if _is_zero(got) and not _is_zero(case.expected):
        named.append("it returns zeros: does the function return the value it computes?")
    if _has_nan(got):
        named.append("the answer holds NaN: a log of 0, or a division by 0?")
    hint = ("\n  likely mistake: " + "\n  likely mistake: ".join(named) if named
            else "\n  hint: " + " ".join(exercise.hints))
    raise AssertionError(f"{where}:\n  expected {_show(case.expected)}\n  got      {_show(got)}{hint}")


def _gives(mistake: Mistake, case: Case, got) -> bool:
    try:
        with np.errstate(all="ignore"):
            return same(case.call(mistake.fn), got)
    except Exception:  # a mistake that cannot run on this input is not the one made
        return False


def check(name: str, fn: Callable, encoder=None) -> bool:
    """Run `fn` on every case of exercise `name` (synthetic, then a real map of `encoder`, the default model when
    None); True when every answer is right, else AssertionError with the first wrong one and a hint."""
    exercise = get(name)
    if not callable(fn):
        raise TypeError(f"check({name!r}, fn): fn must be your function, got {type(fn).__name__}")
    synthetic = exercise.synthetic()
    for case in synthetic:
        _verdict(exercise, fn, case)
    real = exercise.real(_real_inputs(encoder))
    _verdict(exercise, fn, real)
    print(f"✓ {name}: right on {len(synthetic)} inputs with known answers and on {real.label}")
    return True


def markdown(name: str) -> str:
    """The notebook's text for exercise `name`: title, difficulty, time, the task (the stub's docstring) and the
    hints in collapsible blocks."""
    e = get(name)
    header, _, rest = e.stub.partition('"""')
    task = rest.partition('"""')[0]
    hints = "\n".join(f"<details><summary>Hint {k}</summary>\n\n{hint}\n\n</details>"
                       for k, hint in enumerate(e.hints, 1))
    stars = "★" * e.difficulty + "☆" * (3 - e.difficulty)
    return (f"### Implement `{e.name}`: {e.title[0].lower() + e.title[1:]}\n"
            f"{stars} · about {e.minutes} minutes\n\n```python\n{header.rstrip()}\n```\n"
            f"{' '.join(line.strip() for line in task.splitlines())}\n\n{hints}\n\n"
            f"Write the body in the next cell; the cell after it checks your function (`exercises.check`).")

