"""Dependency trees from head scores: the maximum spanning tree (Chu–Liu–Edmonds) and checks.

Words are numbered 1..n and 0 is ROOT. `scores[d - 1, h]` is how much word d wants head h
(e.g. a log-probability), so `scores` is [n, n + 1]; -inf marks an edge that is not allowed.
A well-formed tree gives every word one head, has no cycle and hangs exactly one word from ROOT.
"""
from __future__ import annotations

import numpy as np


def is_tree(heads) -> bool:
    """True when heads [n] (1-based heads, 0 = ROOT) form one tree: no cycle, exactly one word under ROOT."""
    heads = np.asarray(heads)
    n = len(heads)
    if n == 0 or heads.min() < 0 or heads.max() > n or np.any(heads == np.arange(1, n + 1)):
        return False
    if np.count_nonzero(heads == 0) != 1:
        return False
    for start in range(1, n + 1):  # walking up from any word must reach ROOT within n steps
        node, steps = start, 0
        while node != 0:
            node, steps = int(heads[node - 1]), steps + 1
            if steps > n:
                return False
    return True


def tree_score(scores: np.ndarray, heads) -> float:
    """Sum of scores[d - 1, heads[d - 1]] over the words."""
    heads = np.asarray(heads)
    return float(np.asarray(scores)[np.arange(len(heads)), heads].sum())


def mst_heads(scores: np.ndarray) -> np.ndarray:
    """heads [n] (0 = ROOT) of the highest-scoring tree with a single word under ROOT.

    scores: [n, n + 1] (word d's row, candidate heads 0..n); the diagonal (a word heading itself) is ignored.
    Every ROOT edge is lowered by the same constant, larger than any difference between trees, so the
    best tree has one ROOT edge and, among such trees, the order of scores is unchanged."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != scores.shape[0] + 1 or scores.shape[0] == 0:
        raise ValueError(f"scores must be [n, n + 1] for n >= 1 words (column 0 = ROOT), got {scores.shape}")
    n = scores.shape[0]
    if np.isnan(scores).any() or np.isposinf(scores).any():
        raise ValueError("scores contain NaN or +inf; pass finite scores (-inf only for forbidden edges)")
    if not np.isfinite(scores[:, 0]).any():
        raise ValueError("no word may attach to ROOT (column 0 is all -inf), so no tree exists")
    graph = np.full((n + 1, n + 1), -np.inf)  # graph[h, d]: edge h -> d
    graph[:, 1:] = scores.T
    finite = graph[np.isfinite(graph)]
    penalty = (n + 1) * (finite.max() - finite.min() + 1.0)
    graph[0, 1:] -= penalty
    heads = _chu_liu_edmonds(graph)
    if not is_tree(heads[1:]):
        raise ValueError("the allowed edges (finite scores) do not connect every word to ROOT")
    return heads[1:]


def _find_cycle(heads: np.ndarray) -> list[int] | None:
    """A cycle of the head graph (heads[0] = -1 for ROOT) as a list of nodes, or None."""
    state = np.zeros(len(heads), dtype=np.int8)  # 0 unvisited, 1 on the current path, 2 done
    state[0] = 2
    for start in range(1, len(heads)):
        path, node = [], start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = int(heads[node])
        if state[node] == 1:  # the walk came back to its own path
            return path[path.index(node):]
        state[path] = 2
    return None


def _chu_liu_edmonds(graph: np.ndarray) -> np.ndarray:
    """heads [N] (heads[0] = -1) of the maximum spanning arborescence rooted at node 0; graph[h, d] [N, N]."""
    size = graph.shape[0]
    graph = graph.copy()
    graph[:, 0] = -np.inf
    np.fill_diagonal(graph, -np.inf)
    heads = graph.argmax(axis=0)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    in_cycle = np.zeros(size, dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)  # node 0 first
    cycle = np.asarray(cycle)
    k = len(rest)  # the contracted cycle becomes node k
    small = np.full((k + 1, k + 1), -np.inf)
    small[:k, :k] = graph[np.ix_(rest, rest)]
    # entering the cycle at v replaces v's cycle edge: gain graph[u, v] - graph[heads[v], v]
    enter = graph[np.ix_(rest, cycle)] - graph[heads[cycle], cycle]
    enter_at = enter.argmax(axis=1)
    small[:k, k] = enter.max(axis=1)
    leave = graph[np.ix_(cycle, rest)]
    leave_from = leave.argmax(axis=0)
    small[k, :k] = leave.max(axis=0)
    sub = _chu_liu_edmonds(small)
    result = heads.copy()
    for i in range(1, k):
        node, head = rest[i], sub[i]
        result[node] = cycle[leave_from[i]] if head == k else rest[head]
    outside = sub[k]
    result[cycle[enter_at[outside]]] = rest[outside]
    return result
