"""Notebook 12's exercises: the restored share and Value Zeroing for one layer."""
from __future__ import annotations

import numpy as np
import torch

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, REAL_TEXT, RealInputs, given

# The real pair: REAL_TEXT's first sentence, and the same with "institutions" swapped for the query term.
REAL_QUERY, REAL_REPLACED = "philosophy", "institutions"


# -- restored_share ------------------------------------------------------------------------------------
def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _share(query, base, relevant, patched, *, similarity=_cosine, pool=lambda x: x.mean(0), against="base",
           divide="gap"):
    query = np.asarray(query, dtype=np.float64)
    low, high, mid = (similarity(query, pool(np.asarray(x, dtype=np.float64))) for x in (base, relevant, patched))
    start = low if against == "base" else high
    return (mid - start) / (high - low if divide == "gap" else high)


def _share_cases() -> list[Case]:
    query = np.array([1.0, 0.0])
    base = np.array([[0.0, 1.0], [0.0, 3.0]])  # mean (0, 2): orthogonal to the query, relevance 0
    relevant = np.array([[2.0, 0.0], [4.0, 0.0]])  # mean (3, 0): relevance 1
    halfway = np.array([[1.0, 1.0], [3.0, 3.0]])  # mean (2, 2): relevance cos 45° = 0.7071
    skewed = np.array([[9.0, 0.0], [-1.0, 2.0]])  # mean (4, 1); its first row alone points at the query
    return [Case("2-d states: base orthogonal to the query, relevant along it, patched at 45°",
                 given(query, base, relevant, halfway), np.sqrt(0.5)),
            Case("the patched run equals the base run (a self-patch)", given(query, base, relevant, base), 0.0),
            Case("the patched run equals the relevant run", given(query, base, relevant, relevant), 1.0),
            Case("a patched run whose first token alone points at the query (the mean of the tokens does not)",
                 given(query, base, relevant, skewed), _cosine(query, np.array([4.0, 1.0]))),
            Case("a longer query vector (relevance is a cosine: the query's length must not matter)",
                 given(5 * query, base, relevant, halfway), np.sqrt(0.5))]


def _real_pair():
    from ...data.termpairs import TermPair

    base = tuple(REAL_TEXT[0].removesuffix(".").split()) + (".",)
    position = base.index(REAL_REPLACED)
    relevant = base[:position] + (REAL_QUERY,) + base[position + 1:]
    return TermPair("Anarchism", REAL_QUERY, base, relevant, position, REAL_REPLACED)


def _share_real(real: RealInputs) -> Case:
    from ...analyses.patching import patched_outputs
    from ...analyses.termheads import restored_shares

    encoder, pair = real.encoder, _real_pair()
    component = [("head", REAL_HEAD[0] - 1, REAL_HEAD[1] - 1)]
    with torch.inference_mode():
        query, base, relevant = (encoder.model(**encoder.pad([encoder.prepare(list(words))])).last_hidden_state[0]
                                 for words in ([pair.query], pair.base, pair.relevant))
        patched = patched_outputs(encoder, encoder.pad([encoder.prepare(list(pair.base))]),
                                  encoder.pad([encoder.prepare(list(pair.relevant))]), [component])[0]
    shares, _ = restored_shares(encoder, [pair], [component])
    return Case(f"the real model: head {HEAD_LABEL} patched from the sentence with '{REAL_QUERY}' twice into the one "
                f"with it once (query '{REAL_QUERY}', {len(base)} tokens)",
                given(query.mean(0).double().numpy(), base.double().numpy(), relevant.double().numpy(),
                      patched.double().numpy()), float(shares[0, 0]))


# -- value_zeroing -------------------------------------------------------------------------------------
def _zeroing(outputs, zeroed, *, distance="cosine", transpose=False, normalise="rows"):
    outputs, zeroed = np.asarray(outputs, dtype=np.float64), np.asarray(zeroed, dtype=np.float64)
    if distance == "euclidean":
        scores = np.linalg.norm(zeroed - outputs[None], axis=-1)  # [j, i]
    else:
        cos = (zeroed * outputs[None]).sum(-1) / (np.linalg.norm(zeroed, axis=-1) * np.linalg.norm(outputs, axis=-1))
        scores = 1 - cos if distance == "cosine" else cos
    scores = scores if transpose else scores.T  # [i, j]
    if normalise == "rows":
        return scores / scores.sum(1, keepdims=True)
    return scores / scores.sum(0, keepdims=True) if normalise == "columns" else scores


def _zeroing_cases() -> list[Case]:
    outputs = np.array([[1.0, 0.0], [0.0, 1.0]])
    zeroed = np.array([[[0.0, 1.0], [0.0, 1.0]],  # without token 0: token 0's output turns 90°, token 1's stays
                       [[1.0, 1.0], [1.0, 1.0]]])  # without token 1: both turn 45°
    first = 1 - np.sqrt(0.5)
    three = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    shift = np.array([[0.0, 0.5], [0.5, 0.0], [0.4, -0.2]])
    moved = np.stack([three + shift * (j + 1) for j in range(3)])  # zeroing token j moves every output, j + 1 times
    cos = (moved * three[None]).sum(-1) / (np.linalg.norm(moved, axis=-1) * np.linalg.norm(three, axis=-1))
    expected = (1 - cos).T
    return [Case("2 tokens: zeroing token 0 turns token 0's output by 90° and leaves token 1's; zeroing token 1 "
                 "turns both by 45°", given(outputs, zeroed), np.array([[1 / (1 + first), first / (1 + first)],
                                                                      [0.0, 1.0]])),
            Case("3 tokens, every zeroing moves every output by a different amount",
                 given(three, moved), expected / expected.sum(1, keepdims=True)),
            Case("the same 3 tokens with outputs 10 times longer (a cosine distance ignores length)",
                 given(10 * three, 10 * moved), expected / expected.sum(1, keepdims=True))]


def real_zeroed(real: RealInputs, layer: int = REAL_HEAD[0]) -> tuple[np.ndarray, np.ndarray]:
    """(outputs [n, D], zeroed [n, n, D]) of layer `layer` (1-indexed) on the real sentence pair: the layer's output,
    and that with token j's value vectors zeroed in the layer (every head), for each j."""
    from ...analyses.mixing import value_zeroed_states
    from ...core.conventions import check_index

    check_index(layer, real.encoder.n_layers, "layer")
    hidden = value_zeroed_states(real.encoder, REAL_TEXT, layer - 1)
    return hidden[0].numpy(), hidden[1:].numpy()


def _zeroing_real(real: RealInputs) -> Case:
    from ...analyses.mixing import value_zeroing

    outputs, zeroed = real_zeroed(real)
    return Case(f"the real model's layer {REAL_HEAD[0]} on a sentence pair ({len(outputs)} tokens)",
                given(outputs, zeroed), value_zeroing(real.encoder, REAL_TEXT, [REAL_HEAD[0] - 1])[0])


EXERCISES = (
    Exercise("restored_share", "12", "The share of the relevance gap a patch restores",
             "query, base, relevant, patched",
             ("query [D] (the query's embedding), base, relevant, patched [n, D] (last-layer states of the base "
              "passage, the relevant one, and the base with a component patched in) -> float: with relevance(x) "
              "= the cosine between query and the mean of x's rows, (relevance(patched) - relevance(base)) / "
              "(relevance(relevant) - relevance(base))."),
             1, 10,
             ("The model's embedding of a passage is the mean of its token states: states.mean(axis=0), [D].",
              "Relevance is a cosine, a @ b / (|a| |b|), not a dot product: the states' lengths must not count.",
              "The share is 0 when the patch changes nothing (patched = base) and 1 when it gives the relevant "
              "passage's relevance: measure from the base, and divide by the whole gap."),
             _share_cases, _share_real,
             (Mistake("relevance is a cosine, not a dot product: divide query @ e by |query| |e|",
                      lambda q, b, r, p: _share(q, b, r, p, similarity=lambda a, e: float(a @ e))),
              Mistake("the passage's embedding is the mean of its token states (states.mean(axis=0)), not the first "
                      "token's state", lambda q, b, r, p: _share(q, b, r, p, pool=lambda x: x[0])),
              Mistake("measure from the base run: relevance(patched) - relevance(base), not - relevance(relevant)",
                      lambda q, b, r, p: _share(q, b, r, p, against="relevant")),
              Mistake("divide by the gap, relevance(relevant) - relevance(base), not by relevance(relevant) alone",
                      lambda q, b, r, p: _share(q, b, r, p, divide="relevant")))),
    Exercise("value_zeroing", "12", "Value Zeroing: one layer's context-mixing map", "outputs, zeroed",
             ("outputs [n, D] (a layer's output for one input), zeroed [n, n, D] (zeroed[j]: the same layer's "
              "output with token j's value vectors set to 0 in every head) -> [n, n]: entry (i, j) is the cosine "
              "distance 1 - cos(outputs[i], zeroed[j, i]), each row then divided by its sum (Mohebbi et al. "
              "2023)."),
             2, 15,
             ("zeroed[j, i] is token i's output when token j is zeroed: a map whose row i explains token i needs "
              "entry (i, j) = distance(outputs[i], zeroed[j, i]), so transpose the [j, i] array you compute.",
              "A cosine along the last axis: (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, "
              "axis=-1)); broadcast outputs[None] against zeroed.",
              "Normalise rows: divide by scores.sum(axis=1, keepdims=True) so that each row sums to 1."),
             _zeroing_cases, _zeroing_real,
             (Mistake("entry (i, j) is token i's change when j is zeroed: zeroed[j, i], so the [j, i] array of "
                      "distances must be transposed", lambda o, z: _zeroing(o, z, transpose=True)),
              Mistake("each row must sum to 1: divide every row by its sum (axis=1), not each column",
                      lambda o, z: _zeroing(o, z, normalise="columns")),
              Mistake("each row must sum to 1: divide by the row's sum after computing the distances",
                      lambda o, z: _zeroing(o, z, normalise=None)),
              Mistake("a distance, 1 - cosine: the cosine itself is largest where zeroing changes nothing",
                      lambda o, z: _zeroing(o, z, distance="similarity")),
              Mistake("a cosine distance, not a Euclidean one: Value Zeroing measures the change of direction",
                      lambda o, z: _zeroing(o, z, distance="euclidean")))),
)
