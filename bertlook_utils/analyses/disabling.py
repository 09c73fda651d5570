"""Disable heads of a fine-tuned model (Kovaleva et al. §4.6), exactly and fast, and judge the effect on fresh inputs.

A head is disabled as Kovaleva et al. did it: its attention becomes uniform 1/n over the input's n real tokens
(`intervene.uniform_head` inside `intervene.edit_attention`); a whole layer: all its heads at once.

`disabling_scan(tuned, data)` -> `Scan`: for every test input, the logits with nothing disabled, with each
single head disabled and with each whole layer disabled (runs in `runs`; layer 0 = nothing, head 0 = the whole
layer). Exact, but cheaper than one edited forward pass per run (`scan_logits`): one unedited pass keeps the
hidden state entering each layer, and a head or layer of layer l is disabled by running only layers l..L from
that state, the variants of one layer stacked in one batch, the last layer for the [CLS] row alone. Inputs go
through the model in order of length (less padding); cached block by block (`extract.reduce`).

Held-out selection (the winner's curse: the best of 72 heads on the inputs that chose it looks better than it
is): `split_halves` splits the inputs (seeded, stratified by label) into a selection and an evaluation half;
`choose` picks the best and worst single head and layer from the selection half alone; `held_out` reports
their change on both halves, the evaluation change with a paired (McNemar-style) interval, beside the changes of
all single heads on the evaluation half ("random heads"). `held_out_table` puts several
results side by side (tasks), `seeds_table` adds the mean and spread over fine-tuning seeds.

Which inputs move: `input_flips` counts, per input, the single heads whose disabling turns it right or wrong,
beside its logit margin with nothing disabled; `near_ties` sums how many of those flips come from inputs whose
top two classes are nearly tied (a near tie flips under almost any edit, whatever the head).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats

from ..core import intervene
from ..core.cache import DEFAULT_CACHE_DIR
from ..core.conventions import head_label
from ..engine.extract import Batch, RowReducer, reduce
from . import clspass
from .finetune import FineTuned
from ..data.tasks import TaskData

PICKS = ("best head", "worst head", "best layer", "worst layer")
COUNTS = ("gained", "lost")  # the evaluation inputs a pick turns right and wrong
LEVEL = 0.95  # of the paired intervals (`paired_interval`)


def runs(n_layers: int, n_heads: int) -> pd.DataFrame:
    """The runs of a scan, in order: `layer`, `head` (1-indexed): nothing disabled (0, 0), each single head
    (layer-major), each whole layer (head 0)."""
    pairs = [(0, 0)] + [(layer, h) for layer in range(1, n_layers + 1) for h in range(1, n_heads + 1)]
    return pd.DataFrame(pairs + [(layer, 0) for layer in range(1, n_layers + 1)], columns=["layer", "head"])


def run_label(layer: int, head: int) -> str:
    """"3-8" for head 8 of layer 3, "layer 3" for the whole layer, "none" for nothing disabled."""
    if layer == 0:
        return "none"
    return f"layer {layer}" if head == 0 else head_label(layer, head)


# -- the scan ---------------------------------------------------------------------------------------
def _unchanged(layer: int, probs: torch.Tensor) -> torch.Tensor:
    return probs


def _disable_variants(layer: int, heads: Sequence[int | None], valid: torch.Tensor) -> intervene.Edit:
    """An edit for a batch of len(heads) stacked copies of a batch of B inputs (`valid` bool [B, T]): copy v gets
    `intervene.uniform_head(layer, heads[v], valid)` (0-based; None = every head of the layer)."""
    edits = [intervene.uniform_head(layer, head, valid) for head in heads]

    def edit(current: int, probs: torch.Tensor) -> torch.Tensor:
        if current != layer:
            return probs
        return torch.cat([e(current, part) for e, part in zip(edits, probs.chunk(len(edits)))])
    edit.layer = layer  # checked by edit_attention
    return edit


def _tiled(value, batch_size: int, copies: int):
    """A layer's argument for `copies` stacked copies of the batch: tensors with one row per input repeated."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch_size:
        return value.repeat(copies, *[1] * (value.dim() - 1))
    return value


def _hidden(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


@torch.inference_mode()
def scan_logits(model: torch.nn.Module, head: torch.nn.Module, inputs: dict[str, torch.Tensor],
                valid: torch.Tensor) -> torch.Tensor:
    """float32 [B, R, C]: the classifier `head`'s logits on the last layer's [CLS] state for every run of
    `runs(L, H)`, of a padded batch (`inputs`, `valid` bool [B, T]).

    Equal (to float rounding) to one forward pass per run inside `intervene.edit_attention(model,
    intervene.uniform_head(layer, head, valid))`, at under half the cost: one unedited pass records what
    enters each layer; for layer l its H single heads and the whole layer are disabled in H + 1 stacked copies
    of the batch that run layers l..L only, and the last layer computes the [CLS] row alone where the layer is
    BERT-style (`clspass.first_token_step`; checked against the unedited pass, else the whole layer runs). Needs an
    encoder whose last hidden state is its last layer's output (BERT, RoBERTa, ELECTRA, DistilBERT)."""
    layers = intervene.encoder_layers(model.eval())
    n_heads = model.config.num_attention_heads
    entering: dict[int, tuple[tuple, dict]] = {}
    leaving: list[torch.Tensor] = []

    def keep_inputs(index):
        def hook(module, args, kwargs):
            entering[index] = (args, kwargs)
        return hook

    hooks = [layer.register_forward_pre_hook(keep_inputs(i), with_kwargs=True) for i, layer in enumerate(layers)]
    hooks.append(layers[-1].register_forward_hook(lambda module, args, output: leaving.append(_hidden(output))))
    try:
        with intervene.edit_attention(model, _unchanged):
            last = model(**inputs).last_hidden_state
    finally:
        for hook in hooks:
            hook.remove()
    if len(entering) != len(layers) or not torch.equal(leaving[0].cpu(), last):  # `last`: on the CPU (`models.place`)
        raise ValueError(f"{type(model).__name__}'s last hidden state is not its last layer's output (or a layer "
                         "ran without its inputs passing through it): the fast scan needs a BERT-family encoder "
                         "(BERT, RoBERTa, ELECTRA, DistilBERT)")
    batch_size, top = last.shape[0], len(layers) - 1
    variants = [*range(n_heads), None]  # each head of the layer, then the whole layer

    def arguments(index: int, copies: int) -> tuple[tuple, dict]:
        args, kwargs = entering[index]
        return (tuple(_tiled(a, batch_size, copies) for a in args[1:]),
                {k: _tiled(v, batch_size, copies) for k, v in kwargs.items()})

    def last_mask(copies: int) -> torch.Tensor | None:
        args, kwargs = arguments(top, copies)
        return args[0] if args else kwargs.get("attention_mask")

    first_token = clspass.first_token_step(layers[top])
    if first_token is not None and not torch.allclose(
            first_token(entering[top][0][0], last_mask(1), _unchanged, top).cpu(), last[:, 0], rtol=1e-4, atol=1e-5):
        first_token = None  # BERT-like names, other computation: run the whole last layer
    logits = [head(last[:, 0]).unsqueeze(1)]
    whole_layers = []
    for start in range(len(layers)):
        hidden = _tiled(entering[start][0][0], batch_size, len(variants))
        edit = _disable_variants(start, variants, valid)
        with intervene.edit_attention(model, edit):
            for index in range(start, top if first_token is not None else top + 1):
                args, kwargs = arguments(index, len(variants))
                hidden = _hidden(layers[index](hidden, *args, **kwargs))
        cls = first_token(hidden, last_mask(len(variants)), edit, top) if first_token is not None else hidden[:, 0]
        out = head(cls.cpu()).view(len(variants), batch_size, -1).transpose(0, 1)  # [B, H + 1, C]; the head: CPU
        logits.append(out[:, :n_heads])
        whole_layers.append(out[:, n_heads:])
    return torch.cat(logits + whole_layers, 1).float()


class DisablingScan(RowReducer):
    """`scan_logits` of every input: `logits` float32 [N, R, C] (runs as in `runs`)."""

    name = "disabling_scan"
    needs_attention = False  # it runs the model with edited maps

    def __init__(self, tuned: FineTuned):
        super().__init__()
        self.tuned = tuned

    @property
    def key(self) -> str:
        head = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in self.tuned.head.parameters()))
        return f"{self.name}-{self.tuned.encoder.n_layers}x{self.tuned.encoder.n_heads}-{head.hexdigest()[:16]}"

    def update(self, batch: Batch) -> None:
        self.add(logits=scan_logits(self.tuned.encoder.model, self.tuned.head, batch.model_inputs, batch.valid).numpy())


@dataclass(frozen=True)
class Scan:
    """A task's scan: `logits` float32 [N, R, C] of N inputs under the R `runs` (layer, head; 1-indexed, row 0 =
    nothing disabled, head 0 = the whole layer), `labels` int [N]."""

    task: str
    runs: pd.DataFrame
    logits: np.ndarray
    labels: np.ndarray

    def __post_init__(self):
        shape = self.logits.shape
        if len(shape) != 3 or shape[1] != len(self.runs) or self.labels.shape != shape[:1]:
            raise ValueError(f"logits must be [inputs, {len(self.runs)} runs, labels] and labels [inputs]; got logits "
                             f"{shape} and labels {self.labels.shape}")

    @property
    def correct(self) -> np.ndarray:
        """bool [N, R]: whether each run classifies each input right."""
        return self.logits.argmax(-1) == self.labels[:, None]

    @property
    def losses(self) -> np.ndarray:
        """float [N, R]: each input's cross-entropy (nats) under each run."""
        logits = torch.from_numpy(self.logits.astype(np.float64))
        targets = torch.from_numpy(self.labels).long()[:, None].expand(logits.shape[:2])
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none").numpy()

    def frame(self, inputs: np.ndarray | None = None) -> pd.DataFrame:
        """One row per run over the given inputs (indices; None: all): `layer`, `head`, `accuracy`, `loss` (mean
        cross-entropy, nats) and `delta_accuracy`, `delta_loss` against nothing disabled (fractions)."""
        rows = slice(None) if inputs is None else _indices(inputs, len(self.labels), "inputs")
        frame = self.runs.copy()
        frame["accuracy"] = self.correct[rows].mean(0)
        frame["loss"] = self.losses[rows].mean(0)
        frame["delta_accuracy"] = frame["accuracy"] - frame["accuracy"].iloc[0]
        frame["delta_loss"] = frame["loss"] - frame["loss"].iloc[0]
        return frame


def disabling_scan(tuned: FineTuned, data: TaskData, n_examples: int | None = None, batch_size: int = 8,
                   cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> Scan:
    """The `Scan` of the first `n_examples` test examples (None: all) of `data` by the fine-tuned model `tuned`
    (each input cut to its max_length). Cached block by block."""
    examples = data.test[:n_examples]
    if not examples:
        raise ValueError("no test examples to scan; give n_examples >= 1 or a task with test examples")
    encoder = tuned.encoder
    order = clspass.length_order(tuned, examples)  # short with short: less padding
    scan = DisablingScan(tuned)
    reduce(encoder, [examples[i].item for i in order], [scan], batch_size=batch_size, cache_dir=cache_dir,
           progress=progress, max_tokens=tuned.max_length, desc=f"disabling heads ({data.name})")
    logits = np.empty_like(scan.arrays["logits"])
    logits[order] = scan.arrays["logits"]
    return Scan(data.name, runs(encoder.n_layers, encoder.n_heads), logits,
                np.array([e.label for e in examples]))


# -- held-out selection -----------------------------------------------------------------------------
def _indices(values, n: int, what: str) -> np.ndarray:
    """Sorted int indices into N inputs, checked: one-dimensional, in range, no repeats, at least one."""
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must be a non-empty 1-d array of input indices, got {array!r}")
    if array.min() < 0 or array.max() >= n or len(np.unique(array)) != len(array):
        raise ValueError(f"{what} must hold distinct indices in 0..{n - 1}")
    return np.sort(array)


def split_halves(labels: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(selection, evaluation): sorted indices of the inputs with `labels` [N] split in two halves, stratified
    (each label's inputs shuffled with `seed` and dealt half to each; a label's odd one out goes to the half
    that is smaller so far, the selection half on a tie)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) < 2:
        raise ValueError("split_halves needs at least two inputs (a 1-d array of labels)")
    rng = np.random.default_rng(seed)
    halves: tuple[list[int], list[int]] = ([], [])
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        half = len(members) // 2
        halves[0].extend(members[:half])
        halves[1].extend(members[half:2 * half])
        if len(members) % 2:
            halves[int(len(halves[1]) < len(halves[0]))].append(members[-1])
    return np.sort(np.array(halves[0], dtype=int)), np.sort(np.array(halves[1], dtype=int))


def _check_halves(scan: Scan, selection, evaluation) -> tuple[np.ndarray, np.ndarray]:
    n = len(scan.labels)
    selection, evaluation = _indices(selection, n, "selection"), _indices(evaluation, n, "evaluation")
    shared = np.intersect1d(selection, evaluation)
    if shared.size:
        raise ValueError(f"the selection and evaluation halves share {shared.size} inputs (e.g. "
                         f"{shared[:5].tolist()}); they must be disjoint: use split_halves")
    return selection, evaluation


def choose(scan: Scan, selection: np.ndarray) -> pd.DataFrame:
    """The best and worst single head and whole layer to disable, judged on the `selection` inputs alone.

    Best: the largest accuracy change; ties go to the larger drop in loss, then to the earlier run; worst: the
    largest accuracy drop, ties to the larger rise in loss, then the earlier run. One row per PICKS: `run`
    (index into scan.runs), `layer`, `head`, `label`, `selection` and `selection_loss` (the changes in
    accuracy and mean loss on the selection inputs: the winner's-curse numbers)."""
    selection = _indices(selection, len(scan.labels), "selection")
    hits = scan.correct[selection].sum(0)  # counts: exact ties
    gain = hits - hits[0]
    losses = scan.losses[selection].mean(0)
    loss_change = losses - losses[0]
    layer, head = scan.runs["layer"].to_numpy(), scan.runs["head"].to_numpy()
    groups = {"head": np.flatnonzero(head > 0), "layer": np.flatnonzero((head == 0) & (layer > 0))}
    rows = {}
    for pick in PICKS:
        best, kind = pick.split()
        candidates = groups[kind]
        sign = 1 if best == "best" else -1
        run = min(candidates, key=lambda r: (-sign * gain[r], sign * loss_change[r], r))
        rows[pick] = (run, layer[run], head[run], run_label(layer[run], head[run]), gain[run] / len(selection),
                      loss_change[run])
    return pd.DataFrame.from_dict(rows, orient="index",
                                  columns=["run", "layer", "head", "label", "selection", "selection_loss"])


@dataclass(frozen=True)
class HeldOut:
    """Disabling judged on fresh inputs.

    picks: one row per PICKS (`choose`'s columns, plus on the evaluation half: `evaluation` and `evaluation_loss`,
    the changes in accuracy and mean loss; `low`, `high`, its paired interval (`paired_interval`);
    `gained`, `lost`, the evaluation inputs the disabling turns right and wrong). heads: the accuracy change on
    the evaluation half of every single head (indexed by label, "3-8"). accuracy: with nothing disabled, on
    the `selection` and `evaluation` halves; n_selection, n_evaluation: their sizes."""

    task: str
    picks: pd.DataFrame
    heads: pd.Series
    accuracy: dict[str, float]
    n_selection: int
    n_evaluation: int

    def random_heads(self) -> dict[str, float]:
        """The distribution of `heads` (every single head disabled, evaluation half): mean, 5th and 95th
        percentile, and the share of heads whose disabling raises the accuracy."""
        values = self.heads.to_numpy()
        return {"mean": float(values.mean()), "p5": float(np.percentile(values, 5)),
                "p95": float(np.percentile(values, 95)), "share > 0": float(np.mean(values > 0))}


def paired_interval(gained: int, lost: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Interval of the accuracy change (gained - lost) / n of n paired outcomes (each input scored with and
    without the edit), from the discordant counts alone, as McNemar's test uses them: Bonett & Price's (2012)
    adjusted Wald interval, which adds one pseudo-input to each discordant cell. Unlike a paired bootstrap it is
    not [0, 0] when no input changes (a bound like the rule of three instead); coverage near `level` from small n.
    """
    if n < 1 or gained < 0 or lost < 0 or gained + lost > n:
        raise ValueError(f"need n >= 1 and 0 <= gained + lost <= n; got gained {gained}, lost {lost}, n {n}")
    up, down = (gained + 1) / (n + 2), (lost + 1) / (n + 2)
    half = stats.norm.ppf(0.5 + level / 2) * np.sqrt((up + down - (up - down) ** 2) / (n + 2))
    return float(max(-1.0, up - down - half)), float(min(1.0, up - down + half))


def evaluate(scan: Scan, chosen: Sequence[int], evaluation: np.ndarray) -> pd.DataFrame:
    """The changes that disabling the `chosen` runs (indices into scan.runs) makes on the `evaluation` inputs
    alone, one row per run: `evaluation` (accuracy change) and `evaluation_loss` (mean loss change); `gained`,
    `lost`: the inputs the disabling turns right and wrong (the discordant pairs); `low`, `high`: the paired
    interval of the accuracy change (`paired_interval`, at LEVEL)."""
    evaluation = _indices(evaluation, len(scan.labels), "evaluation")
    correct = scan.correct[evaluation].astype(int)
    change = correct - correct[:, :1]  # [n, R] in {-1, 0, 1}
    losses = scan.losses[evaluation]
    rows = []
    for run in chosen:
        gained, lost = int((change[:, run] > 0).sum()), int((change[:, run] < 0).sum())
        rows.append((change[:, run].mean(), (losses[:, run] - losses[:, 0]).mean(),
                     *paired_interval(gained, lost, len(evaluation)), gained, lost))
    return pd.DataFrame(rows, columns=["evaluation", "evaluation_loss", "low", "high", "gained", "lost"])


def held_out(scan: Scan, selection: np.ndarray, evaluation: np.ndarray) -> HeldOut:
    """Choose on `selection` (`choose`), measure on `evaluation` (`evaluate`): disjoint, non-empty input
    indices, e.g. from `split_halves`. `heads` is every single head's accuracy change on the evaluation half."""
    selection, evaluation = _check_halves(scan, selection, evaluation)
    picks = choose(scan, selection)
    measured = evaluate(scan, picks["run"].tolist(), evaluation).set_index(picks.index)
    frame = scan.frame(evaluation)
    heads = frame[frame["head"] > 0]
    labels = [run_label(layer, head) for layer, head in zip(heads["layer"], heads["head"])]
    return HeldOut(scan.task, picks.join(measured), pd.Series(heads["delta_accuracy"].to_numpy(), index=labels),
                   {"selection": float(scan.frame(selection)["accuracy"].iloc[0]),
                    "evaluation": float(frame["accuracy"].iloc[0])}, len(selection), len(evaluation))


def held_out_table(results: Mapping[object, HeldOut]) -> pd.DataFrame:
    """One row per result (a task, a seed): accuracy with nothing disabled on each half; for each of PICKS its
    `choice` (label) and its accuracy change on the `selection` half, on the `evaluation` half and the
    evaluation change's interval (`low`, `high`), and the evaluation inputs it turns right and wrong (`gained`,
    `lost`: counts); the `random heads` distribution (`HeldOut.random_heads`).
    Columns are (group, quantity) pairs; changes are fractions (1 = 100 points)."""
    if not results:
        raise ValueError("no held-out results to tabulate")
    rows = {}
    for key, result in results.items():
        row = {("accuracy", half): result.accuracy[half] for half in ("selection", "evaluation")}
        for pick, values in result.picks.iterrows():
            row.update({(pick, "choice"): values["label"], **{(pick, q): values[q] for q in
                                                              ("selection", "evaluation", "low", "high")},
                        **{(pick, q): int(values[q]) for q in COUNTS}})
        row.update({("random heads", q): v for q, v in result.random_heads().items()})
        rows[key] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def seeds_table(results: Mapping[int, HeldOut]) -> pd.DataFrame:
    """`held_out_table` of one task's results under several fine-tuning seeds (keys), plus a `mean` and an `sd`
    row (standard deviation over seeds) of every number; the mean row's choice says how often the most common
    choice was made ("3-8 (2 of 3)"); intervals are not averaged (NaN in those rows); counts are averaged."""
    if len(results) < 2:
        raise ValueError(f"a spread over seeds needs at least two seeds' results, got {len(results)}")
    if len({result.task for result in results.values()}) != 1:
        raise ValueError("seeds_table compares seeds of one task; tabulate several tasks with held_out_table")
    table = held_out_table(results)
    table.index = [f"seed {key}" for key in table.index]
    numbers = [c for c in table.columns if c[1] not in ("choice", "low", "high")]
    mean, sd = table[numbers].astype(float).mean().to_dict(), table[numbers].astype(float).std(ddof=1).to_dict()
    for pick in PICKS:
        label, count = Counter(table[(pick, "choice")]).most_common(1)[0]
        mean[(pick, "choice")], sd[(pick, "choice")] = f"{label} ({count} of {len(results)})", ""
    summary = pd.DataFrame.from_dict({"mean": mean, "sd": sd}, orient="index")
    return pd.concat([table, summary.reindex(columns=table.columns)])


# -- which inputs move ------------------------------------------------------------------------------
def input_flips(scan: Scan, inputs: np.ndarray) -> pd.DataFrame:
    """One row per input of `inputs` (indices into the scan), the most often flipped first (ties: by input):
    input, label, correct (nothing disabled), margin (the top class's logit minus the runner-up's, nothing
    disabled), runner_up_true (wrong, with the label second), gained and lost (how many single heads, disabled
    one at a time, turn it right and wrong), flips (gained + lost)."""
    inputs = _indices(inputs, len(scan.labels), "inputs")
    logits, labels = scan.logits[inputs], scan.labels[inputs]
    ranked = np.argsort(-logits[:, 0], axis=-1, kind="stable")  # [n, C] classes by logit, nothing disabled
    top = np.take_along_axis(logits[:, 0], ranked[:, :2], -1)  # [n, 2]
    correct = scan.correct[inputs]
    heads = (scan.runs["head"] > 0).to_numpy()
    change = correct[:, heads].astype(int) - correct[:, :1]  # [n, heads] in {-1, 0, 1}
    frame = pd.DataFrame({"input": inputs, "label": labels, "correct": correct[:, 0], "margin": top[:, 0] - top[:, 1],
                          "runner_up_true": ~correct[:, 0] & (ranked[:, 1] == labels),
                          "gained": (change > 0).sum(1), "lost": (change < 0).sum(1)})
    frame["flips"] = frame["gained"] + frame["lost"]
    return frame.sort_values(["flips", "input"], ascending=[False, True], ignore_index=True)


@dataclass(frozen=True)
class NearTies:
    """How much of the accuracy change under single disabled heads comes from nearly tied inputs, on one set of
    inputs: `close` inputs have a logit margin below `margin` (nothing disabled). Counts of (input, head) pairs
    unless said; changes are fractions, the mean over single heads (`HeldOut.random_heads`' mean)."""

    task: str
    n_inputs: int
    n_heads: int
    margin: float
    close: int  # inputs whose margin is below `margin`
    close_right: int  # of those, classified right with nothing disabled (a flip can only lose them)
    flips: int  # pairs in which disabling the head changes the input's outcome
    close_flips: int  # of those, on the close inputs
    gained: int  # pairs turned right
    lost: int  # pairs turned wrong
    mean_change: float  # mean accuracy change over single heads
    mean_change_far: float  # the same with the close inputs' outcomes kept as they were

    @property
    def close_share(self) -> float:
        """The share of the flips that the close inputs make (NaN without flips)."""
        return self.close_flips / self.flips if self.flips else float("nan")


def near_ties(scan: Scan, inputs: np.ndarray, margin: float) -> NearTies:
    """`NearTies` of the scan's single heads on `inputs` (e.g. the evaluation half), with `margin` (logits, > 0)
    the bound below which an input counts as nearly tied."""
    if not margin > 0:
        raise ValueError(f"margin is a logit difference above 0, not {margin}")
    table = input_flips(scan, inputs)
    close = table["margin"] < margin
    n_heads = int((scan.runs["head"] > 0).sum())
    far = table[~close]
    return NearTies(
        task=scan.task, n_inputs=len(table), n_heads=n_heads, margin=float(margin), close=int(close.sum()),
        close_right=int((close & table["correct"]).sum()), flips=int(table["flips"].sum()),
        close_flips=int(table.loc[close, "flips"].sum()), gained=int(table["gained"].sum()),
        lost=int(table["lost"].sum()),
        mean_change=float((table["gained"].sum() - table["lost"].sum()) / (len(table) * n_heads)),
        mean_change_far=float((far["gained"].sum() - far["lost"].sum()) / (len(table) * n_heads)))
