"""Notebook 06's exercise: UAS."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given


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
    return [Case("7 words, every head right but the final '.'", given([2, 3, 0, 3, 6, 4, 1], gold, punct), 1.0),
            Case("7 words, only the root word wrong", given([2, 3, 1, 3, 6, 4, 3], gold, punct), 5 / 6),
            Case("7 words, 'on' and 'mat' wrong", given([2, 3, 0, 5, 6, 5, 3], gold, punct), 4 / 6)]


def _uas_real(real: RealInputs) -> Case:
    from ...analyses.probes import uas
    from ...analyses.syntax import predictions

    sentence, parsed = real.parsed
    layer, head = REAL_HEAD
    guess = predictions(parsed.word_attn)[0, layer - 1, head - 1]  # dep->head
    return Case(f"head {HEAD_LABEL}'s argmax heads for {sentence.text!r} against its spaCy parse",
                given(list(guess), list(sentence.heads), list(sentence.is_punct)),
                uas([guess], [sentence.heads], [sentence.is_punct]))


EXERCISES = (
    Exercise("uas", "06", "Unlabelled attachment score", "predicted, gold, is_punct",
             ("predicted, gold [n] heads (1-based, 0 = ROOT), is_punct [n] -> the share (0..1) of non-punctuation "
              "words whose predicted head is the gold head (the root word counts: its gold head is 0)."),
             1, 5,
             ("Keep the words with is_punct False; the root word stays in.",),
             _uas_cases, _uas_real,
             (Mistake("punctuation is not scored: leave out the words with is_punct True",
                      lambda p, g, q: _uas(p, g, q, punct=True)),
              Mistake("ROOT left out: the root word counts too (its gold head is 0)",
                      lambda p, g, q: _uas(p, g, q, root=False)),
              Mistake("return a share between 0 and 1, not a percentage",
                      lambda p, g, q: _uas(p, g, q, percent=True)))),
)
