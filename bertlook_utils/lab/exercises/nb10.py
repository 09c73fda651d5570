"""Notebook 10's exercise: attention rollout."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, Mistake, RealInputs, given


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
    return [Case("two layers of identity maps (4 tokens, 2 heads)", given(np.tile(np.eye(n), (2, 2, 1, 1))),
                 np.tile(np.eye(n), (2, 1, 1))),
            Case("one layer: one identity head and one uniform head", given(np.stack([[np.eye(n), uniform]])),
                 np.array([0.75 * np.eye(n) + 0.25 * uniform])),
            Case("layer 1 previous-token, layer 2 uniform (2 heads each)", given(two), np.stack([first, second]))]


def _rollout_real(real: RealInputs) -> Case:
    from ...analyses.attribution import rollout

    return Case(f"every layer and head of the real model on a sentence pair ({real.pair.n_tokens} tokens)",
                given(np.asarray(real.pair.attn, dtype=np.float64)), rollout(real.pair.attn))


EXERCISES = (
    Exercise("rollout", "10", "Attention rollout", "attn",
             ("attn [L, H, n, n] (one input, every layer and head) -> [L, n, n]: with A_l = 0.5 * (mean over heads) + "
              "0.5 * identity (the residual), R_1 = A_1 and R_l = A_l @ R_(l-1) (Abnar & Zuidema 2020)."),
             2, 15,
             ("Average the heads first: attn.mean(1) is [L, n, n].",
              "The newer layer multiplies from the left: R_l = A_l @ R_(l-1)."),
             _rollout_cases, _rollout_real,
             (Mistake("add the residual: A_l = 0.5 * mean over heads + 0.5 * identity",
                      lambda a: _rollout(a, residual=False)),
              Mistake("rows not renormalised: mean + identity sums to 2 per row; take 0.5 * mean + 0.5 * identity",
                      lambda a: _rollout(a, half=False)),
              Mistake("the order is reversed: R_l = A_l @ R_(l-1), the newer layer on the left",
                      lambda a: _rollout(a, reverse=True)))),
)
