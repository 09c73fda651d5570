"""Notebook 04's exercises: a head's accuracy for one relation, and the offset baseline."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given


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
    return [Case(f'"the cat sat on the mat", relation {r!r}', given(toy, TOY_HEADS, TOY_RELATIONS, r), acc)
            for r, acc in (("det", 1.0), ("pobj", 1.0), ("nsubj", 1.0), ("prep", 0.0))]


def _relation_real(real: RealInputs) -> Case:
    sentence, parsed = real.parsed
    layer, head = REAL_HEAD
    from ...analyses.syntax import score_example

    own = score_example(parsed)["own"][:, 0, layer - 1, head - 1]  # [n]: dep->head right or not
    relation = "amod" if "amod" in sentence.relations else sentence.relations[0]
    keep = np.array(sentence.relations) == relation
    return Case(f"the real word-level map of head {HEAD_LABEL} on {sentence.text!r}, relation {relation!r} "
                "(spaCy parse)",
                given(parsed.word_attn[layer - 1, head - 1], list(sentence.heads), list(sentence.relations), relation),
                float(own[keep].mean()))


def _best_offset(heads, relations, relation, offsets, *, sign=1, zero_based=False):
    words = [i + (0 if zero_based else 1) for i, r in enumerate(relations) if r == relation]
    gold = [heads[i] for i, r in enumerate(relations) if r == relation]
    if not words:
        raise ValueError(f"no word has the relation {relation!r}")
    scores = [float(np.mean([w + sign * o == g for w, g in zip(words, gold)])) for o in offsets]
    k = int(np.argmax(scores))
    return offsets[k], scores[k]


def _offset_cases() -> list[Case]:
    return [Case(f'"the cat sat on the mat", relation {r!r}, offsets {o}', given(TOY_HEADS, TOY_RELATIONS, r, o), e)
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
                given(list(sentence.heads), list(sentence.relations), relation, offsets),
                (offsets[k], float(hits[k].mean())))


EXERCISES = (
    Exercise("relation_accuracy", "04", "A head's accuracy for one relation", "word_attn, heads, relations, relation",
             ("word_attn [m, m]: a word-level map with [CLS] as word 0 and [SEP] as word m - 1; heads [m - 2]: each "
              "word's gold head (1-based, 0 = ROOT); relations [m - 2] -> the share of words with `relation` whose "
              "row's largest weight, over the words 1 .. m - 2 other than itself, falls on the gold head."),
             2, 15,
             ("Word i of the sentence (0-based in `heads`) is row i + 1 of word_attn.",
              "Only columns 1 .. m - 2 are candidates: [CLS] and [SEP] are not words, and a word is not its own head."),
             _relation_cases, _relation_real,
             (Mistake("[CLS] and [SEP] are not words: take the argmax over columns 1 .. m - 2 only",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, specials=True)),
              Mistake("off by one: heads are 1-based (word 1 is column 1), so add 1 to an argmax over columns "
                      "1 .. m - 2",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, zero_based=True)),
              Mistake("a word is never its own head: leave its own column out of the argmax",
                      lambda a, h, r, rel: _relation_accuracy(a, h, r, rel, self_ok=True)))),
    Exercise("best_offset", "04", "The best fixed-offset baseline", "heads, relations, relation, offsets",
             ('heads [n] (1-based, 0 = ROOT), relations [n] -> (offset, accuracy): the offset o in `offsets` for which '
              '"the head of word i is word i + o" is right most often among the words with `relation` (the first such '
              'offset on a tie), and that share.'),
             1, 10,
             ("Word i (0-based in the list) is word i + 1 in 1-based numbering: its guess is i + 1 + o.",
              "np.argmax returns the first of equal values, which is the tie rule asked for."),
             _offset_cases, _offset_real,
             (Mistake("the guess is word i + o, not i - o: an offset of -1 means the previous word",
                      lambda h, r, rel, o: _best_offset(h, r, rel, o, sign=-1)),
              Mistake("off by one: heads are 1-based, so the word at list position i is word i + 1",
                      lambda h, r, rel, o: _best_offset(h, r, rel, o, zero_based=True)))),
)
