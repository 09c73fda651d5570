"""Notebook 13's exercises: the structural probe's distances and UUAS."""
from __future__ import annotations

import numpy as np

from .checker import Case, Exercise, Mistake, REAL_HEAD, RealInputs, given

REAL_LAYER = REAL_HEAD[0]  # the real cases read the word vectors of this layer's output (every model has 2 layers)
REAL_RANK = 32  # rows of the real case's probe B (structural.RANK)
REAL_SEED = 0  # B's draw

# "The cat sat on the mat": the tree the probe's synthetic cases and the UUAS cases start from
CAT_HEADS = [2, 3, 0, 3, 6, 4]


# -- probe_distances ------------------------------------------------------------------------------------
def _probe(B, H, *, project="rows", combine="squared"):
    B, H = np.asarray(B, dtype=np.float64), np.asarray(H, dtype=np.float64)
    P = H if project == "none" else H @ B if project == "columns" else H @ B.T  # [n, k]
    if combine == "norms":  # ‖B h_i‖² - ‖B h_j‖²
        norms = (P ** 2).sum(-1)
        return norms[:, None] - norms[None, :]
    diff = P[:, None, :] - P[None, :, :]  # [n, n, k]
    if combine == "l1":
        return np.abs(diff).sum(-1)
    squared = (diff ** 2).sum(-1)
    return np.sqrt(squared) if combine == "norm" else squared


def tree_vectors(heads) -> np.ndarray:
    """[n, n - 1] 0/1: word i's vector holds a 1 for each edge on its way up to the root (edge e joins the e-th word
    that is not the root to its head), so ‖v_i − v_j‖² counts the edges the two ways up do not share: the tree
    distance (Hewitt & Manning's picture of a tree's distances as squared distances between vectors)."""
    heads = np.asarray(heads)
    edge = {word: e for e, word in enumerate(np.flatnonzero(heads))}  # a non-root word -> its edge to its head
    out = np.zeros((len(heads), len(edge)))
    for word in range(len(heads)):
        node = word
        while heads[node]:
            out[word, edge[node]] = 1
            node = heads[node] - 1
    return out


def _probe_cases() -> list[Case]:
    tree = tree_vectors(CAT_HEADS)  # [6, 5]
    k = tree.shape[1]
    B = np.hstack([2 * np.eye(k), np.zeros((k, 1))])  # [5, 6]: doubles the first 5 dimensions, drops the last
    H = np.hstack([tree / 2, np.array([[0.0], [1.0], [3.0], [0.0], [2.0], [1.0]])])  # [6, 6]
    tree_distances = np.array([[0, 1, 2, 3, 5, 4], [1, 0, 1, 2, 4, 3], [2, 1, 0, 1, 3, 2],
                               [3, 2, 1, 0, 2, 1], [5, 4, 3, 2, 0, 1], [4, 3, 2, 1, 1, 0]], dtype=float)
    plain = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
    along = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, -2.0], [2.0, 2.0, 0.0], [1.0, 1.0, 1.0]])  # b·h: 1, 2, 6, 3
    projected = np.array([1.0, 2.0, 6.0, 3.0])
    shear = np.array([[1.0, 1.0], [0.0, 2.0]])  # B h = (h0 + h1, 2 h1); not symmetric: H @ B differs
    return [Case("a square B = [[1, 1], [0, 2]] (k = D = 2) on (1, 0), (0, 1), (2, 1): B h = (1, 0), (1, 2), (3, 2)",
                 given(shear, np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])),
                 np.array([[0.0, 4.0, 8.0], [4.0, 0.0, 4.0], [8.0, 4.0, 0.0]])),
            Case("'The cat sat on the mat' (heads 2 3 0 3 6 4): 6 words whose vectors B maps onto the tree (one "
                 "dimension per edge, a 1 for each edge up to the root; B doubles them and drops a 6th dimension "
                 "of noise), so the answer is the tree distance", given(B, H), tree_distances),
            Case("B = the 2 x 2 identity: squared Euclidean distances of 3 vectors (0, 0), (3, 4), (1, 0)",
                 given(np.eye(2), plain), np.array([[0.0, 25.0, 1.0], [25.0, 0.0, 20.0], [1.0, 20.0, 0.0]])),
            Case("a rank-1 probe B = [[1, 2, 0]] (k = 1, D = 3): 4 vectors whose projections b·h are 1, 2, 6, 3",
                 given(np.array([[1.0, 2.0, 0.0]]), along), (projected[:, None] - projected[None, :]) ** 2)]


def real_vectors(real: RealInputs) -> tuple[np.ndarray, np.ndarray]:
    """(H [n, D]: the word vectors of REAL_TEXT's first sentence at the output of layer REAL_LAYER, each word the
    mean of its wordpieces (`structural.layer_vectors`); B [REAL_RANK, D]: a probe drawn from REAL_SEED, N(0, 1/D)
    entries), float64."""
    from ...analyses.structural import layer_vectors

    sentence, _ = real.parsed
    H = layer_vectors(real.encoder, [sentence], progress=False)[REAL_LAYER].astype(np.float64)
    B = np.random.default_rng(REAL_SEED).normal(size=(REAL_RANK, H.shape[1])) / np.sqrt(H.shape[1])
    return B, H


def _probe_real(real: RealInputs) -> Case:
    from ...analyses.structural import squared_distances

    B, H = real_vectors(real)
    return Case(f"the real model's word vectors at layer {REAL_LAYER} of {real.parsed[0].text!r} ({len(H)} words) "
                f"and a random probe B [{REAL_RANK}, {H.shape[1]}]", given(B, H), squared_distances(B, H).numpy())


# -- uuas_from_distances --------------------------------------------------------------------------------
def _uuas(dist, heads, is_punct, *, punct=False, tree="minimum", directed=False, root=False, per_word=False):
    from ...analyses.structural import min_spanning_tree

    dist, heads, flags = np.asarray(dist, dtype=np.float64), np.asarray(heads), np.asarray(is_punct, dtype=bool)
    words = np.arange(len(heads)) if punct else np.flatnonzero(~flags)  # the words the predicted tree joins
    among = dist[np.ix_(words, words)]
    if tree == "nearest":  # each word and its nearest other word
        pairs = [(words[a], words[b]) for a, b in enumerate((among + np.diag([np.inf] * len(words))).argmin(1))]
    else:  # each word and the word it joined the tree through (Prim's algorithm from the first word)
        parents = min_spanning_tree(among if tree == "minimum" else -among)
        pairs = [(words[a], words[parents[a]]) for a in range(1, len(words))]
    gold = [(i, heads[i] - 1) for i in range(len(heads)) if heads[i] and not flags[i] and not flags[heads[i] - 1]]
    if directed:
        hits = len(set(gold) & set(pairs))
    else:
        hits = len({frozenset(g) for g in gold} & {frozenset(p) for p in pairs})
    total = len(heads) - 1 if per_word else len(gold) + (root and not flags[list(heads).index(0)])
    return hits / total


def _perturbed(heads) -> np.ndarray:
    """[n, n]: the tree distances of heads plus a small symmetric amount that breaks every tie (below 0.1 in all, so
    the tree's edges stay the shortest links and its minimum spanning tree is that tree)."""
    from ...analyses.structural import tree_distances

    n = len(heads)
    i, j = np.indices((n, n))
    return tree_distances(np.asarray(heads)) + np.where(i == j, 0, 0.01 * abs(i - j) + 0.001 * (i + j))


# "The cat sat on the mat , purring .": 7 words that are not punctuation, 6 edges between them; n - 1 = 8
PURRING_HEADS = [2, 3, 0, 3, 6, 4, 3, 3, 3]
PURRING_PUNCT = [False] * 6 + [True, False, True]


def _uuas_cases() -> list[Case]:
    own = _perturbed(PURRING_HEADS)
    # a predicted tree (heads, 0 = its root) that hangs 'purring' from the comma and the second 'the' from 'on':
    # over the 7 words the comma's two links become 'purring' - 'sat' (distance 2, the nearest), and 5 of the 6
    # edges are found
    comma = _perturbed([2, 3, 0, 3, 4, 4, 3, 7, 3])
    # the cat sat on the mat, no punctuation: a predicted chain the - cat - sat - on - the - mat (left to right)
    chain = _perturbed([0, 1, 2, 3, 4, 5])
    return [Case("'The cat sat on the mat , purring .', distances of a predicted tree that runs 'purring' - ',' - "
                 "'sat' and hangs the second 'the' from 'on' (ties broken by less than 0.1): 5 of the 6 edges",
                 given(comma, PURRING_HEADS, PURRING_PUNCT), 5 / 6),
            Case("the same sentence, the silver tree's own distances (ties broken by less than 0.1): every edge "
                 "found", given(own, PURRING_HEADS, PURRING_PUNCT), 1.0),
            Case("'The cat sat on the mat' (no punctuation), distances of the left-to-right chain: 4 of the 5 edges",
                 given(chain, CAT_HEADS, [False] * 6), 4 / 5)]


def _uuas_real(real: RealInputs) -> Case:
    from ...analyses.structural import uuas

    sentence, _ = real.parsed
    _, H = real_vectors(real)
    dist = ((H[:, None] - H[None]) ** 2).sum(-1)
    return Case(f"the squared Euclidean distances between the real model's word vectors at layer {REAL_LAYER} of "
                f"{sentence.text!r} ({len(sentence)} words, {sum(sentence.is_punct)} of them punctuation) against its "
                "spaCy parse",
                given(dist, list(sentence.heads), list(sentence.is_punct)),
                uuas([dist], [sentence.heads], [sentence.is_punct]))


EXERCISES = (
    Exercise("probe_distances", "13", "The structural probe's squared distances", "B, H",
             ("B [k, D] (the probe), H [n, D] (one sentence's word vectors) -> [n, n]: entry (i, j) is the probe's "
              "squared distance between words i and j, `‖B(h_i − h_j)‖²` (Hewitt & Manning 2019)."),
             1, 10,
             ("B maps a vector h [D] to B @ h [k]; for every row of H at once that is H @ B.T [n, k].",
              "Broadcast the differences: P[:, None, :] - P[None, :, :] is [n, n, k]; square and sum over the last "
              "axis. No square root: the probe predicts the tree distance with the squared distance."),
             _probe_cases, _probe_real,
             (Mistake("squared: ‖B(h_i − h_j)‖² is the sum of the squared differences, without the square root "
                      "(np.linalg.norm gives the length itself)", lambda B, H: _probe(B, H, combine="norm")),
              Mistake("the squared length of the difference, ‖B(h_i − h_j)‖², not the difference of the squared "
                      "lengths ‖B h_i‖² − ‖B h_j‖²: subtract the vectors first, then square and sum",
                      lambda B, H: _probe(B, H, combine="norms")),
              Mistake("B is ignored: project the vectors first (H @ B.T), then take the distances of the projections",
                      lambda B, H: _probe(B, H, project="none")),
              Mistake("a squared Euclidean length: square the differences and sum them (** 2), not their absolute "
                      "values (that is the L1 norm)", lambda B, H: _probe(B, H, combine="l1")),
              Mistake("B is [k, D] and acts on each vector h as B @ h: for the rows of H that is H @ B.T, not H @ B "
                      "(which only runs when k = D, and is another map)",
                      lambda B, H: _probe(B, H, project="columns")))),
    Exercise("uuas_from_distances", "13", "The minimum spanning tree of predicted distances, scored by UUAS",
             "dist, heads, is_punct",
             ("dist [n, n] (predicted distances between a sentence's n words), heads [n] (silver heads, 1-based, 0 "
              "= ROOT), is_punct [n] -> the share (0..1) of the silver edges between non-punctuation words (word i "
              "and its head, both not punctuation; ROOT is no edge) that the minimum spanning tree of dist over the "
              "non-punctuation words holds, in either direction (UUAS)."),
             3, 25,
             ("Keep the words that are not punctuation. The silver edges are word i and word heads[i] - 1 (0-based) "
              "for each kept word whose head is neither 0 nor punctuation; frozenset((i, h)) is an edge with no "
              "direction.",
              "Prim's algorithm: start the tree with one kept word, then add the closest pair (a word in the tree, "
              "a kept word not yet in it), by dist, until every kept word is in; each addition is an edge.",
              "Divide the silver edges the tree holds by the number of silver edges, not by the number of words."),
             _uuas_cases, _uuas_real,
             (Mistake("span only the words that are not punctuation: build the tree on dist restricted to them, not "
                      "on every word (a link through a comma joins no two words)",
                      lambda d, h, p: _uuas(d, h, p, punct=True)),
              Mistake("a minimum spanning tree: join the closest pair (smallest distance) at each step, not the "
                      "farthest", lambda d, h, p: _uuas(d, h, p, tree="maximum")),
              Mistake("a spanning tree, not each word's nearest neighbour: nearest-neighbour links can leave the "
                      "words in separate groups; grow one tree (Prim's algorithm) until it holds every word",
                      lambda d, h, p: _uuas(d, h, p, tree="nearest")),
              Mistake("UUAS is undirected: an edge counts whichever way round the tree holds it (compare "
                      "frozenset({i, j}) or sorted pairs, not (word, head) tuples)",
                      lambda d, h, p: _uuas(d, h, p, directed=True)),
              Mistake("ROOT is no edge: the root word's link to ROOT is not counted, neither found nor in the "
                      "denominator", lambda d, h, p: _uuas(d, h, p, root=True)),
              Mistake("divide by the silver edges between non-punctuation words, not by n - 1 (every word's edge): "
                      "the edges to punctuation are not scored", lambda d, h, p: _uuas(d, h, p, per_word=True)))),
)
