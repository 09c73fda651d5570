"""Rollout and flow (Abnar & Zuidema 2020), and "does attention explain?" on a fine-tuned classifier.

For one input's `attn [L, H, n, n]`, with the residual folded in as half of each layer:
    Â_l = ½ · mean_h(A_l) + ½ · I
`rollout(attn)` -> [L, n, n]: R_1 = Â_1, R_l = Â_l @ R_{l-1} (row i of R_l: how much of output position i at
layer l comes from each input position, if attention were the only way information moved).
`flow(attn)` -> [n, n]: entry (i, j) is the maximum flow from position i at the last layer to input position j
in the layered graph whose edge from position a at layer l to position b at layer l-1 has capacity Â_l[a, b]
(scipy's max-flow). It solves n² max-flow problems: `flow_seconds` measures what that costs.

`explanations` scores the words of each input of a fine-tuned classifier five ways — last-layer attention from
[CLS], rollout, flow (inputs up to `max_flow_tokens`), gradient × input and leave-one-out (drop a word, measure
the fall of the predicted class's probability) — and `correlations` gives each method's Spearman correlation
with leave-one-out, per input, with an interval over inputs: the kit's own test, on the [CLS] row.
`released_correlations` is Abnar & Zuidema's released reading (`compute_corel_distilbert_sst.py`): per token
(special tokens included), the maximum over all rows of the layer's head-mean attention, rollout or row-normalised
flow, against |Σ_d ∂logit/∂h| (h: the embedding block's output). `outflow` is what leaves [CLS] for other
positions in each layer of flow's graph, `paired_difference` compares two methods' correlations input by input.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from ..core.conventions import check_attention
from .finetune import FineTuned
from ..core.intervals import bootstrap_interval, mean_interval

METHODS = ("attention", "rollout", "flow", "grad_x_input")


def _checked(attn: np.ndarray) -> np.ndarray:
    attn = np.asarray(attn, dtype=np.float64)
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"attn must be one input's [layers, heads, n, n] maps, got shape {attn.shape}")
    check_attention(attn)
    return attn


def residual_attention(attn: np.ndarray) -> np.ndarray:
    """attn [L, H, n, n] -> Â [L, n, n] = ½ · mean over heads + ½ · identity (rows still sum to 1)."""
    attn = _checked(attn)
    return 0.5 * attn.mean(1) + 0.5 * np.eye(attn.shape[-1])


def rollout(attn: np.ndarray) -> np.ndarray:
    """attn [L, H, n, n] (one input, row-stochastic) -> [L, n, n]: R_1 = Â_1, R_l = Â_l @ R_{l-1}."""
    mixed = residual_attention(attn)
    out = np.empty_like(mixed)
    out[0] = mixed[0]
    for layer in range(1, len(mixed)):
        out[layer] = mixed[layer] @ out[layer - 1]
    return out


def flow_graph(attn: np.ndarray) -> tuple[csr_array, int]:
    """The layered graph of `flow` as a sparse capacity matrix over (L+1)·n nodes (node l·n + a: position a
    after layer l, l = 0 the input; an edge from l·n + a to (l-1)·n + b with capacity Â_l[a, b]) in integer
    units, and the number of units per 1.0 of attention."""
    mixed = residual_attention(attn)
    n_layers, n = mixed.shape[0], mixed.shape[-1]
    scale = (2 ** 30) // n  # every flow is at most 1, every cut at most n: no int32 overflow
    rows, cols, caps = [], [], []
    for layer, matrix in enumerate(mixed, start=1):
        a, b = np.nonzero(matrix > 0)
        rows.append(layer * n + a)
        cols.append((layer - 1) * n + b)
        caps.append(np.rint(matrix[a, b] * scale))
    nodes = (n_layers + 1) * n
    graph = csr_array((np.concatenate(caps).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(nodes, nodes))
    return graph, scale


def flow_rows(attn: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    """The given rows of `flow(attn)`: [len(rows), n] (for one output position, n max-flow problems, not n²)."""
    attn = _checked(attn)
    n_layers, n = attn.shape[0], attn.shape[-1]
    graph, scale = flow_graph(attn)
    out = np.zeros((len(rows), n))
    for r, i in enumerate(rows):
        if not 0 <= i < n:
            raise ValueError(f"row {i} does not exist: the input has positions 0-{n - 1}")
        for j in range(n):
            out[r, j] = maximum_flow(graph, n_layers * n + i, j).flow_value / scale
    return out


def flow(attn: np.ndarray) -> np.ndarray:
    """attn [L, H, n, n] (one input) -> [n, n]: (i, j) the maximum flow from position i at layer L to input
    position j, edge capacities Â_l (see the module docstring); scipy's max-flow on integer capacities, so
    exact to about n · 2⁻³⁰ per edge of a minimum cut."""
    return flow_rows(attn, range(np.shape(attn)[-1]))


def flow_to_words(attn: np.ndarray, source: int, words: np.ndarray) -> np.ndarray:
    """The maximum flow from position `source` at layer L into each word's wordpieces together at the input
    (words: bool [W, n], a word's pieces; each word gets its own sink fed by its pieces without limit):
    [W]. Unlike a sum of per-piece flows, it never exceeds 1."""
    attn = _checked(attn)
    n_layers, n = attn.shape[0], attn.shape[-1]
    words = np.asarray(words, dtype=bool)
    if words.ndim != 2 or words.shape[1] != n:
        raise ValueError(f"words must be bool [words, {n}], got shape {words.shape}")
    graph, scale = flow_graph(attn)
    nodes = graph.shape[0]
    rows, cols = np.nonzero(words)
    edges = graph.tocoo()
    size = nodes + len(words)
    graph = csr_array((np.concatenate([edges.data, np.full(len(rows), 2 ** 30, dtype=np.int32)]),
                       (np.concatenate([edges.row, cols]), np.concatenate([edges.col, nodes + rows]))),
                      shape=(size, size))
    return np.array([maximum_flow(graph, n_layers * n + source, nodes + w).flow_value / scale
                     for w in range(len(words))])


def outflow(attn: np.ndarray, position: int = 0) -> np.ndarray:
    """attn [L, H, n, n] -> [L]: 1 − Â_l[position, position], the capacity from `position` to every other position
    in each layer of flow's graph (what its self-loop does not keep)."""
    mixed = residual_attention(attn)
    return 1.0 - mixed[:, position, position]


def flow_seconds(n_layers: int, n_heads: int, lengths: Sequence[int], seed: int = 0) -> pd.DataFrame:
    """Seconds `flow` takes on random row-stochastic maps of each length: `tokens, seconds, problems` (n²)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in lengths:
        attn = rng.dirichlet(np.full(n, 0.3), size=(n_layers, n_heads, n))
        start = time.perf_counter()
        flow(attn)
        rows.append((n, time.perf_counter() - start, n * n))
    return pd.DataFrame(rows, columns=["tokens", "seconds", "problems"])


# -- does attention explain? -------------------------------------------------------------------------
@dataclass
class Explanation:
    """One input of a fine-tuned classifier: `words` (special tokens left out), `predicted` (label) with
    `probability`; `scores` one row per word, a column per METHODS entry (flow NaN for an input longer than
    max_flow_tokens), `leave_one_out` (the fall of the predicted class's probability without the word) and `zeroed`
    (its fall when the word's word embeddings, the vectors gradient × input multiplies, are set to 0);
    `by_layer` "attention" and "rollout" -> [L, words]: the [CLS] row at every layer. Token scores are summed
    over each word's wordpieces. `by_token`: Abnar & Zuidema's released reading over the n tokens (special
    tokens included): "attention" and "rollout" [L, n], the maximum over rows; "flow" [n], the maximum over rows
    of the last layer's row-normalised flow (NaN when too long); "gradient" [n], |Σ_d ∂logit/∂h|."""

    words: list[str]
    predicted: int
    probability: float
    scores: pd.DataFrame
    by_layer: dict[str, np.ndarray]
    by_token: dict[str, np.ndarray] = field(default_factory=dict)


def _probabilities(tuned: FineTuned, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.softmax(tuned.head(tuned.encoder.model(**inputs).last_hidden_state[:, 0]), -1)


@torch.inference_mode()
def scaled_probabilities(tuned: FineTuned, prepared, scales: np.ndarray) -> np.ndarray:
    """One prepared input run with its word embeddings (`get_input_embeddings`, before positions and LayerNorm)
    multiplied token by token: scales [K, n] -> class probabilities [K, labels] (one batch of K copies)."""
    encoder = tuned.encoder
    scales = torch.as_tensor(np.asarray(scales, dtype=np.float32))
    if scales.ndim != 2 or scales.shape[1] != len(prepared.tokens):
        raise ValueError(f"scales must be [K, {len(prepared.tokens)}], got {tuple(scales.shape)}")
    hook = encoder.model.get_input_embeddings().register_forward_hook(
        lambda module, args, out: out * scales[..., None].to(out))  # on the model's device
    try:
        return _probabilities(tuned, encoder.pad([prepared] * len(scales))).double().numpy()
    finally:
        hook.remove()


def _released(attn: np.ndarray, flow_too: bool) -> dict[str, np.ndarray]:
    """Abnar & Zuidema's relevances of one input's tokens (attn [L, H, n, n]): max over rows (see Explanation)."""
    out = {"attention": attn.mean(1).max(1), "rollout": rollout(attn).max(1)}
    if flow_too:
        flowed = flow(attn)
        out["flow"] = (flowed / flowed.sum(1, keepdims=True)).max(0)
    else:
        out["flow"] = np.full(attn.shape[-1], np.nan)
    return out


def explain(tuned: FineTuned, item, max_flow_tokens: int = 64) -> Explanation:
    """Score the words of one input (a text or an (a, b) pair, cut to the model's max_length) five ways, and its
    tokens Abnar & Zuidema's way (`Explanation.by_token`)."""
    encoder = tuned.encoder
    a, b = item if isinstance(item, tuple) else (item, None)
    prepared = encoder.prepare(a, b, max_tokens=tuned.max_length)
    special = np.array([t in (encoder.cls_token, encoder.sep_token) for t in prepared.tokens])
    word_of = np.array(prepared.word_ids)
    words = sorted(set(word_of[~special].tolist()))
    if len(words) < 2:
        raise ValueError(f"the input {item!r} has fewer than two words to compare")
    to_words = np.stack([(word_of == w) & ~special for w in words]).astype(float)  # [words, n]
    captured = {}
    hooks = [encoder.model.get_input_embeddings().register_forward_hook(  # the word embeddings, as a leaf
        lambda module, args, out: captured.setdefault("e", out.detach().requires_grad_())),
        encoder.model.embeddings.register_forward_hook(  # the embedding block's output (A & Z's gradient)
        lambda module, args, out: captured.setdefault("h", out))]
    try:
        with torch.enable_grad():
            out = encoder.model(**encoder.pad([prepared]), output_attentions=True)
            logits = tuned.head(out.last_hidden_state[:, 0])[0]
            probs = torch.softmax(logits, -1)
            predicted = int(probs.argmax())
            (gradient,) = torch.autograd.grad(probs[predicted], captured["e"], retain_graph=True)
            (logit_gradient,) = torch.autograd.grad(logits[predicted], captured["h"])
    finally:
        for hook in hooks:
            hook.remove()
    grad_x_input = (gradient * captured["e"]).sum(-1)[0].detach().cpu().double().numpy()  # captured on the device
    attn = torch.stack(out.attentions, 1)[0].detach().double().numpy()  # [L, H, n, n]
    short = len(prepared.tokens) <= max_flow_tokens
    by_layer = {"attention": attn.mean(1)[:, 0] @ to_words.T, "rollout": rollout(attn)[:, 0] @ to_words.T}
    by_token = {**_released(attn, short), "gradient": logit_gradient.sum(-1)[0].abs().cpu().double().numpy()}
    flow_row = flow_to_words(attn, 0, to_words > 0) if short else np.full(len(words), np.nan)
    dropped = []
    for w in words:
        keep = [k for k, word in enumerate(prepared.word_ids) if word != w or special[k]]
        dropped.append(type(prepared)([prepared.input_ids[k] for k in keep], [prepared.token_type_ids[k] for k in keep],
                                      [prepared.tokens[k] for k in keep], [prepared.word_ids[k] for k in keep],
                                      prepared.words, [prepared.segment_ids[k] for k in keep]))
    with torch.inference_mode():
        without = _probabilities(tuned, encoder.pad(dropped))[:, predicted].double().numpy()
    zeroed = scaled_probabilities(tuned, prepared, 1.0 - to_words)[:, predicted]
    probability = float(probs[predicted].detach())
    scores = pd.DataFrame({"word": [prepared.words[w] for w in words],
                           "attention": by_layer["attention"][-1], "rollout": by_layer["rollout"][-1],
                           "flow": flow_row, "grad_x_input": to_words @ grad_x_input,
                           "leave_one_out": probability - without, "zeroed": probability - zeroed})
    return Explanation([prepared.words[w] for w in words], predicted, probability, scores, by_layer, by_token)


def explanations(tuned: FineTuned, items: Sequence, max_flow_tokens: int = 64, progress: bool = True
                 ) -> list[Explanation]:
    """`explain` for every item, in order."""
    if not items:
        raise ValueError("no inputs to explain")
    return [explain(tuned, item, max_flow_tokens) for item in tqdm(items, desc=f"explaining ({tuned.task})",
                                                                    disable=not progress)]


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 or not np.isfinite(x).all():
        return np.nan
    return float(spearmanr(x, y).statistic)


def per_input(explained: Sequence[Explanation]) -> pd.DataFrame:
    """The kit's test input by input: Spearman correlation of each method's word scores with leave-one-out:
    input (index), method, layer (the [CLS] row of that layer; flow and gradient × input: the whole
    model, layer = L), rho (NaN for fewer than 3 words, constant scores or no flow)."""
    n_layers = explained[0].by_layer["attention"].shape[0]
    rows = []
    for i, e in enumerate(explained):
        loo = e.scores["leave_one_out"].to_numpy()
        for method in ("attention", "rollout"):
            rows += [(i, method, layer + 1, _spearman(e.by_layer[method][layer], loo)) for layer in range(n_layers)]
        rows += [(i, method, n_layers, _spearman(e.scores[method].to_numpy(), loo))
                 for method in ("flow", "grad_x_input")]
    return pd.DataFrame(rows, columns=["input", "method", "layer", "rho"])


def _summary(frame: pd.DataFrame) -> pd.DataFrame:
    """input, method, layer, rho -> method, layer, spearman (mean over inputs), low, high (95 % t-interval),
    inputs (finite rho)."""
    rows = []
    for (method, layer), part in frame.groupby(["method", "layer"], sort=False):
        rhos = part["rho"].to_numpy()
        finite = np.isfinite(rhos).sum()
        mean, low, high = mean_interval(rhos) if finite >= 2 else (np.nan, np.nan, np.nan)
        rows.append((method, int(layer), mean, low, high, int(finite)))
    return pd.DataFrame(rows, columns=["method", "layer", "spearman", "low", "high", "inputs"])


def correlations(explained: Sequence[Explanation]) -> pd.DataFrame:
    """The kit's test (`per_input`): the mean over inputs and a 95 % t-interval: method, layer, spearman, low,
    high, inputs."""
    return _summary(per_input(explained))


def agreement(explained: Sequence[Explanation], first: str, second: str) -> tuple[float, float, float, int]:
    """Spearman correlation of two columns of `Explanation.scores` (e.g. "grad_x_input" and "zeroed") per input:
    (mean, low, high, inputs), 95 % t-interval over inputs."""
    rhos = np.array([_spearman(e.scores[first].to_numpy(), e.scores[second].to_numpy()) for e in explained])
    return (*mean_interval(rhos), int(np.isfinite(rhos).sum()))


def released_per_input(explained: Sequence[Explanation]) -> pd.DataFrame:
    """Abnar & Zuidema's released reading input by input: the Spearman correlation over tokens of each `by_token`
    relevance with |gradient|: input, method, layer (flow: the last), rho."""
    rows = []
    for i, e in enumerate(explained):
        reference = e.by_token["gradient"]
        for method in ("attention", "rollout"):
            rows += [(i, method, layer + 1, _spearman(values, reference))
                     for layer, values in enumerate(e.by_token[method])]
        rows.append((i, "flow", len(e.by_token["attention"]), _spearman(e.by_token["flow"], reference)))
    return pd.DataFrame(rows, columns=["input", "method", "layer", "rho"])


def released_correlations(explained: Sequence[Explanation]) -> pd.DataFrame:
    """`released_per_input`, the mean over inputs and a 95 % t-interval: method, layer, spearman, low, high,
    inputs."""
    return _summary(released_per_input(explained))


def paired_difference(frame: pd.DataFrame, first: tuple[str, int], second: tuple[str, int], n_boot: int = 2000,
                      seed: int = 0) -> tuple[float, float, float, int]:
    """frame: `per_input` or `released_per_input`; first, second: (method, layer). The mean over inputs of
    rho(first) − rho(second), on the inputs where both are finite, and a 95 % paired bootstrap interval over
    inputs: (mean, low, high, inputs)."""
    table = frame.pivot_table(index="input", columns=["method", "layer"], values="rho", dropna=False)
    difference = (table[first] - table[second]).dropna().to_numpy()
    if len(difference) < 2:
        raise ValueError(f"{first} and {second} share fewer than two inputs with finite correlations")
    low, high = bootstrap_interval(difference, np.arange(len(difference)), n_boot, seed)
    return float(difference.mean()), low, high, len(difference)
