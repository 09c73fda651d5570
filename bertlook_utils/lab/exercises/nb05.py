"""Notebook 05's exercise: antecedents."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, RealInputs, given


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
    return [Case("a toy map, mention 2 (head word 5) among mentions with head words 1, 3, 5", given(attn, heads, 2), 0),
            Case("the same map, mention 1 (head word 3)", given(attn, heads, 1), 0)]


def _antecedent_real(real: RealInputs) -> Case:
    from ...analyses.coref import choose_by_attention

    passage, word_attn = real.story
    layer, head = REAL_HEAD
    k = 0
    i = passage.coreferent()[k]
    heads = [m.head + 1 for m in passage.mentions]  # [CLS] is word 0
    chosen = choose_by_attention(word_attn[layer - 1:layer, head - 1:head], passage)[k, 0, 0]
    return Case(f"the real word-level map of head {HEAD_LABEL} on the story {passage.id!r}, mention {i} "
                f"({passage.mention_text(i)!r})", given(word_attn[layer - 1, head - 1], heads, i), int(chosen))


EXERCISES = (
    Exercise("choose_antecedent", "05", "Antecedent selection by attention", "word_attn, mention_heads, i",
             ("word_attn [m, m] (word level), mention_heads: the word index of each mention's head word, in text "
              "order; i: a mention with at least one earlier mention -> the index j < i of the earlier mention whose "
              "head word receives the most attention FROM mention i's head word."),
             1, 10,
             ("Read the row of mention i's head word: word_attn[mention_heads[i]].",
              "Only earlier mentions (j < i) are candidates."),
             _antecedent_cases, _antecedent_real,
             (Mistake("read attention FROM mention i (its row), not TO it (its column)",
                      lambda a, h, i: _choose(a, h, i, column=True)),
              Mistake("only EARLIER mentions (j < i) can be antecedents; you allowed later ones",
                      lambda a, h, i: _choose(a, h, i, later=True)),
              Mistake("a mention is not its own antecedent: candidates are j < i, not j <= i",
                      lambda a, h, i: _choose(a, h, i, self_ok=True)))),
)
