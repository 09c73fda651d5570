"""Notebook 11's exercises: the sink rate and softmax1."""
from __future__ import annotations

import math

import numpy as np
import torch

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, REAL_TEXT, RealInputs, given

EPS = 0.3  # Gu et al.'s threshold, as the real case uses it


# -- sink_rate -----------------------------------------------------------------------------------------
def _sink_rate(attn, eps, *, axis=2, strict=True, over=(0, 1), share=True):
    scores = np.asarray(attn, dtype=np.float64).mean(axis=axis)  # [L, H, n]
    above = scores > eps if strict else scores >= eps
    return above.mean(axis=over) if share else above.sum(axis=over)


def _sinks(n: int, sink: int, mass: float) -> np.ndarray:
    """[n, n]: every row puts `mass` on column `sink` and spreads the rest evenly over the other columns."""
    out = np.full((n, n), (1 - mass) / (n - 1))
    out[:, sink] = mass
    return out


def _sink_rate_cases() -> list[Case]:
    n = 4
    planted = np.stack([np.stack([_sinks(n, 0, 0.7), _sinks(n, 0, 0.4)]),  # layer 1: two heads sink on column 0
                        np.stack([_sinks(n, 3, 0.5), np.full((n, n), 1 / n)])])  # layer 2: column 3, and uniform
    half = np.eye(n)
    half[:2] = np.eye(n)[0]  # rows 0 and 1 all on column 0, rows 2 and 3 on themselves: scores 0.5, 0, 0.25, 0.25
    to_one = np.zeros((n, n))
    to_one[:, 1] = 1  # every row on column 1: scores 0, 1, 0, 0
    rows = np.stack([np.stack([half, np.eye(n), to_one])])  # 1 layer x 3 heads; the identity scores 0.25 each
    return [Case("2 layers x 2 heads, 4 tokens: sink scores 0.7 and 0.4 on column 0, 0.5 on column 3, one uniform "
                 "head; eps 0.3", given(planted, 0.3), np.array([2 / 4, 0, 0, 1 / 4])),
            Case("1 layer x 3 heads, 4 tokens: half the rows on column 0, an identity map, every row on column 1; "
                 "eps 0.3", given(rows, 0.3), np.array([1 / 3, 1 / 3, 0, 0])),
            Case("uniform maps, 2 layers x 3 heads, 5 tokens (every score 0.2); eps 0.1",
                 given(np.full((2, 3, 5, 5), 1 / 5), 0.1), np.ones(5)),
            Case("the same 3 heads with eps 0.25, exactly the identity head's scores (exceed, not reach)",
                 given(rows, 0.25), np.array([1 / 3, 1 / 3, 0, 0]))]


def _sink_rate_real(real: RealInputs) -> Case:
    from ...analyses.sinks import sink_rate

    attn = np.asarray(real.pair.attn, dtype=np.float64)
    return Case(f"every layer and head of the real model on a sentence pair ({real.pair.n_tokens} tokens), eps {EPS}",
                given(attn, EPS), sink_rate(attn, EPS))


# -- softmax1 ------------------------------------------------------------------------------------------
def _softmax1(scores, *, slot=0.0, shift="row", shift_slot=True, rowwise_sum=True):
    """exp(x_i) / (exp(slot) + sum_j exp(x_j)), shifted by max(x, 0) per row ("row"), over the whole array
    ("global"), by max(x) per row ("max") or not at all (None); shift_slot=False leaves exp(slot) unshifted."""
    x = np.asarray(scores, dtype=np.float64)
    if shift == "row":
        m = np.maximum(x.max(-1, keepdims=True), slot)
    elif shift == "max":
        m = x.max(-1, keepdims=True)
    elif shift == "global":
        m = np.maximum(x.max(), slot)
    else:
        m = np.zeros(x.shape[:-1] + (1,))
    shifted = np.exp(x - m)
    total = shifted.sum(-1, keepdims=True) if rowwise_sum else shifted.sum()
    return shifted / ((np.exp(slot - m) if shift_slot else np.exp(slot)) + total)


def _softmax(scores):
    x = np.asarray(scores, dtype=np.float64)
    shifted = np.exp(x - x.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def _one_inside(scores):
    x = np.asarray(scores, dtype=np.float64)
    m = x.max(-1, keepdims=True)
    return np.exp(x - m) / np.exp(x + 1 - m).sum(-1, keepdims=True)  # sum_j exp(x_j + 1)


def _softmax1_cases() -> list[Case]:
    two = math.log(2)
    return [Case("[0, 0]", given(np.zeros(2)), np.array([1 / 3, 1 / 3])),
            Case("[log 2]", given(np.array([two])), np.array([2 / 3])),
            Case("two rows, [[0, 0], [log 2, log 2]]", given(np.array([[0.0, 0.0], [two, two]])),
                 np.array([[1 / 3, 1 / 3], [2 / 5, 2 / 5]])),
            Case("huge logits, [1000, 1000]", given(np.array([1000.0, 1000.0])), np.array([0.5, 0.5])),
            Case("very negative logits, [-1000, -1000]", given(np.array([-1000.0, -1000.0])), np.zeros(2)),
            Case("two rows far apart, [[1000, 1000], [0, 0]]", given(np.array([[1000.0, 1000.0], [0.0, 0.0]])),
                 np.array([[0.5, 0.5], [1 / 3, 1 / 3]]))]


def real_logits(real: RealInputs) -> np.ndarray:
    """The logits q_i · k_j / sqrt(d) [n, n] of head REAL_HEAD on the real sentence pair, recomputed from the input
    of its layer with the layer's own query and key projections (their softmax is the head's map)."""
    from ...analyses.sinks.heads import queries_keys

    encoder, (layer, head) = real.encoder, REAL_HEAD
    inputs = encoder.pad([encoder.prepare(*REAL_TEXT)])
    with torch.inference_mode():
        hidden = encoder.model(**inputs, output_hidden_states=True).hidden_states[layer - 1]
        q, k, scaling = queries_keys(encoder.model, layer, hidden, encoder.n_heads)
        logits = q[0, head - 1].double() @ k[0, head - 1].double().T * scaling
    return logits.numpy()


def _softmax1_real(real: RealInputs) -> Case:
    from ...analyses.sinks import softmax1

    logits = real_logits(real)
    return Case(f"the real logits q·k / sqrt(d) of head {HEAD_LABEL} on a sentence pair ({len(logits)} tokens)",
                given(logits), softmax1(logits))


EXERCISES = (
    Exercise("sink_rate", "11", "The sink rate", "attn, eps",
             ("attn [L, H, n, n] (one input, every layer and head), eps -> [n]: for each key position j, the share "
              "of all L x H heads whose sink score, the mean attention j receives over the n query rows, exceeds "
              "eps (Gu et al. 2025)."),
             1, 10,
             ("The sink score of head (l, h) for key j is attn[l, h, :, j].mean(): a mean over the query rows, "
              "axis 2 of attn. A mean over the keys (axis 3) is 1/n in every row, whatever the head does.",
              "'Exceeds' is strict: a score of exactly eps does not count.",
              "The share is over all L x H heads together, one number per key position: (scores > eps) is "
              "[L, H, n]; average it over its first two axes."),
             _sink_rate_cases, _sink_rate_real,
             (Mistake("the sink score averages each key's column over the query rows (axis 2); a mean over the keys "
                      "(axis 3) is 1/n for every row", lambda a, e: _sink_rate(a, e, axis=3)),
              Mistake("'exceeds' eps: use >, not >= (a score of exactly eps does not count)",
                      lambda a, e: _sink_rate(a, e, strict=False)),
              Mistake("the share is over all L x H heads together: average over layers AND heads, axis=(0, 1), not "
                      "per layer", lambda a, e: _sink_rate(a, e, over=1)),
              Mistake("a share, not a count: divide the number of heads above eps by L x H (a mean, not a sum)",
                      lambda a, e: _sink_rate(a, e, share=False)))),
    Exercise("softmax1", "11", "softmax1, a softmax with an empty slot", "scores",
             ("scores [..., n] -> [..., n]: exp(x_i) / (1 + sum_j exp(x_j)) along the last axis (Miller 2023): a "
              "softmax with one more logit, 0, that takes weight but is no token, so a row's weights may sum to "
              "less than 1. In numpy, finite for logits of +-1000."),
             2, 15,
             ("np.exp(x) / (1 + np.exp(x).sum(-1, keepdims=True)) is the formula, but np.exp(1000) is inf and "
              "inf / inf is NaN.",
              "Subtract m = max(max(x), 0) per row (axis=-1, keepdims=True): exp(x - m) / (exp(-m) + sum_j "
              "exp(x_j - m)). The 1 is exp(0), so it shifts too. With m >= 0, exp(-m) <= 1; with m = max(x) "
              "alone, exp(-m) overflows (a warning) when every logit is below -709."),
             _softmax1_cases, _softmax1_real,
             (Mistake("softmax1 is not softmax: the denominator is 1 + the sum, so the weights sum to less than 1 "
                      "(the rest goes to the empty slot)", _softmax),
              Mistake("np.exp(1000) overflows to inf and inf / inf is NaN: subtract m = max(max(x), 0) from the "
                      "logits first, and divide by exp(-m) + sum_j exp(x_j - m)",
                      lambda s: _softmax1(s, shift=None)),
              Mistake("the 1 must shift with the logits: after subtracting m it is exp(-m), so divide exp(x - m) by "
                      "exp(-m) + sum_j exp(x_j - m), not by 1 + sum_j exp(x_j - m)",
                      lambda s: _softmax1(s, shift="max", shift_slot=False)),
              Mistake("along the last axis, row by row: the sum runs over each row (axis=-1, keepdims=True), not "
                      "over the whole array", lambda s: _softmax1(s, shift="global", rowwise_sum=False)),
              Mistake("the shift m is per row (max over axis=-1, keepdims=True): one max for the whole array sends "
                      "a row far below it to exp(-1000) = 0, and 0 / 0 is NaN", lambda s: _softmax1(s, shift="global")),
              Mistake("the empty slot's logit is 0, so it adds exp(0) = 1 to the denominator, not exp(1) = e",
                      lambda s: _softmax1(s, slot=1.0)),
              Mistake("the 1 is added to the sum of the exponentials, outside them: 1 + sum_j exp(x_j), not "
                      "sum_j exp(x_j + 1)", _one_inside))),
)
