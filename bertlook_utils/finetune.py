"""Fine-tune an encoder on the kit's classification tasks (`tasks`), and disable its heads one at a time.

`finetune(encoder, data)` trains a copy of the encoder plus a linear head on [CLS] (seeded, cached under
data/cache as a model folder that `load_encoder(folder)` reads, with the head beside it) and returns a
`FineTuned`. `frozen_baseline` trains the same head on the frozen encoder; `majority_accuracy` is the floor;
`task_scores` puts the three side by side. `disabling_scan` replaces one head's (or one layer's) attention
by uniform 1/n over the real tokens (`intervene.uniform_head` inside `intervene.edit_attention`) and
measures the test accuracy and loss for every head and every layer; `scan_summary` reads the scans.

Every input reaches the model through the engine's padded batches (`extract.batches`), cut to `max_length`
tokens. Training and the scan cannot be streaming reducers over attention maps (one updates the weights,
the other runs the model with edited maps); the [CLS] features and the scan are reducers that run the model
themselves, so they are cached block by block like every pass. Caches are keyed by model, data and the code
version of this module (and what it imports): any edit here retrains, never a stale model.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import intervene
from .cache import DEFAULT_CACHE_DIR, code_version, entry_path
from .conventions import head_label
from .extract import Batch, Reducer, batches, concatenate, reduce
from .models import Encoder, load_encoder, save_folder
from .tasks import Example, TaskData

HEAD_FILE = "classifier_head.pt"
META_FILE = "bertlook_task.json"
SCORE_COLUMNS = ("majority class", "frozen encoder + linear head", "fine-tuned")


def majority_accuracy(data: TaskData) -> float:
    """Test accuracy of always predicting the most frequent training label."""
    majority = Counter(e.label for e in data.train).most_common(1)[0][0]
    return float(np.mean([e.label == majority for e in data.test]))


def _hidden_dropout(config) -> float:
    """The dropout rate on hidden states in a model's config: `hidden_dropout_prob` (BERT, RoBERTa, ELECTRA)
    or `dropout` (DistilBERT)."""
    for name in ("hidden_dropout_prob", "dropout"):
        rate = getattr(config, name, None)
        if isinstance(rate, (int, float)):
            return float(rate)
    raise ValueError(f"{type(config).__name__} names no hidden dropout (hidden_dropout_prob or dropout); finetune "
                     "works with BERT-family encoders (BERT, RoBERTa, ELECTRA, DistilBERT)")


def _cls_states(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, hidden]: the last layer's state of the first token ([CLS])."""
    return model(**inputs).last_hidden_state[:, 0]


def _logits(model: torch.nn.Module, head: torch.nn.Module, batch: Batch,
            disable: tuple[int, int | None] | None) -> torch.Tensor:
    """[B, n_labels] for a batch, with one head (or layer) disabled when `disable` = (layer, head) is given
    (0-based, head None = the whole layer)."""
    if disable is None:
        return head(_cls_states(model, batch.model_inputs))
    with intervene.edit_attention(model, intervene.uniform_head(*disable, valid=batch.valid)):
        return head(_cls_states(model, batch.model_inputs))


# -- fine-tuning ------------------------------------------------------------------------------------
@dataclass
class FineTuned:
    """A fine-tuned encoder and its linear head on [CLS]; `folder` is its cache folder (load_encoder-able;
    None when it was not cached)."""

    task: str
    encoder: Encoder
    head: torch.nn.Linear
    folder: Path | None
    max_length: int
    history: pd.DataFrame  # step, epoch, loss

    def predict(self, examples: Sequence[Example], batch_size: int = 32,
                disable: tuple[int, int | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, n_labels], labels [N]). disable = (layer, head), 0-based, head None = the whole layer:
        that attention is replaced by uniform 1/n over each input's n real tokens (`intervene.uniform_head`)."""
        model = self.encoder.model.eval()
        logits = []
        with torch.inference_mode():
            for batch in batches(self.encoder, [e.item for e in examples], batch_size, attention=False,
                                 max_tokens=self.max_length):
                logits.append(_logits(model, self.head, batch, disable))
        return torch.cat(logits).numpy(), np.array([e.label for e in examples])


def finetune(encoder: Encoder, data: TaskData, epochs: int = 2, batch_size: int = 16, lr: float = 1e-4,
             max_length: int = 64, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
             progress: bool = True) -> FineTuned:
    """Fine-tune a copy of `encoder` (it stays as it is) with a linear head on [CLS] on `data.train`.

    AdamW, linear warm-up (10 % of the steps) and decay, dropout as the model's config; seeded. The result is
    cached as a folder (model + tokenizer, `load_encoder(folder)` reads it, and the head) keyed by the base
    model, the data, the settings and this module's code; a second call loads it."""
    settings = f"{epochs}/{batch_size}/{lr}/{max_length}/{seed}"
    folder = None
    if cache_dir is not None:
        folder = entry_path(cache_dir, f"finetune-{data.name}", encoder.fingerprint, data.fingerprint(), settings,
                            version=code_version("finetune")).with_suffix("")
        if (folder / META_FILE).exists():
            return load_finetuned(folder)
    tuned = encoder.copy()
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = tuned.model
    head = torch.nn.Linear(model.config.hidden_size, len(data.labels))
    dropout = torch.nn.Dropout(_hidden_dropout(model.config))
    params = list(model.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    steps_per_epoch = math.ceil(len(data.train) / batch_size)
    total = epochs * steps_per_epoch
    warmup = max(1, total // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))))
    history = []
    bar = tqdm(total=total, desc=f"fine-tuning on {data.name}", unit="step", disable=not progress)
    model.train()
    for epoch in range(epochs):
        order = list(data.train)
        rng.shuffle(order)
        for batch in batches(tuned, [e.item for e in order], batch_size, attention=False, max_tokens=max_length):
            labels = torch.tensor([e.label for e in order[batch.start:batch.start + len(batch.inputs)]])
            logits = head(dropout(_cls_states(model, batch.model_inputs)))
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            history.append((len(history) + 1, epoch + 1, loss.item()))
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    model.eval()
    history_frame = pd.DataFrame(history, columns=["step", "epoch", "loss"])
    if folder is None:
        return FineTuned(data.name, tuned, head, None, max_length, history_frame)

    def write_head(tmp: Path) -> None:
        torch.save(head.state_dict(), tmp / HEAD_FILE)
        meta = dict(task=data.name, labels=list(data.labels), max_length=max_length,
                    history=history_frame.to_dict(orient="list"))
        (tmp / META_FILE).write_text(json.dumps(meta))

    save_folder(folder, model, tuned.tokenizer, write_head)
    return load_finetuned(folder)


def load_finetuned(folder: Path | str) -> FineTuned:
    """A fine-tuned model saved by `finetune` (its folder in the cache)."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise FileNotFoundError(f"{folder} is not a fine-tuned model folder (no {META_FILE}); run finetune() first")
    meta = json.loads(meta_path.read_text())
    encoder = load_encoder(folder)
    head = torch.nn.Linear(encoder.model.config.hidden_size, len(meta["labels"]))
    head.load_state_dict(torch.load(folder / HEAD_FILE, weights_only=True))
    return FineTuned(meta["task"], encoder, head.eval(), folder, meta["max_length"], pd.DataFrame(meta["history"]))


# -- evaluation -------------------------------------------------------------------------------------
def accuracy_and_loss(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(accuracy, mean cross-entropy in nats) of logits [N, C] against labels [N]."""
    logits = torch.from_numpy(np.asarray(logits, dtype=np.float32))
    targets = torch.from_numpy(np.asarray(labels)).long()
    loss = torch.nn.functional.cross_entropy(logits, targets).item()
    return float((logits.argmax(1) == targets).float().mean()), float(loss)


class ClsStates(Reducer):
    """The last layer's [CLS] state of every input, `states` float32 [N, hidden] (a forward pass of its own:
    the engine's pass returns attention maps, not hidden states)."""

    name = "cls_states"
    needs_attention = False

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.states: list[torch.Tensor] = []

    def fresh(self) -> "ClsStates":
        return ClsStates(self.model)  # shares the model, never copies it

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        self.states.append(_cls_states(self.model.eval(), batch.model_inputs))

    def result(self) -> dict[str, np.ndarray]:
        return {"states": torch.cat(self.states).numpy()}

    merge = staticmethod(concatenate)

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.states = [torch.from_numpy(result["states"])]


def frozen_baseline(encoder: Encoder, data: TaskData, max_length: int = 64, seed: int = 0,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> float:
    """Test accuracy of a linear head (logistic regression) trained on the frozen encoder's [CLS] states."""
    from sklearn.linear_model import LogisticRegression

    features = {}
    for split in ("train", "test"):
        reducer = ClsStates(encoder.model)
        reduce(encoder, [e.item for e in getattr(data, split)], [reducer], batch_size=32, cache_dir=cache_dir,
               progress=progress, max_tokens=max_length, desc=f"frozen features for {data.name} ({split})")
        features[split] = reducer.states[0].numpy()
    classifier = LogisticRegression(max_iter=2000, C=1.0, random_state=seed)
    classifier.fit(features["train"], [e.label for e in data.train])
    return float(classifier.score(features["test"], [e.label for e in data.test]))


def task_scores(encoder: Encoder, tasks: Mapping[str, TaskData], tuned: Mapping[str, FineTuned],
                max_length: int = 64, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                progress: bool = True) -> pd.DataFrame:
    """Test accuracy per task (rows) of the three models in SCORE_COLUMNS: the majority class, a linear head on
    the frozen `encoder` (`frozen_baseline`) and the fine-tuned model (`tuned[task]`)."""
    rows = {name: (majority_accuracy(data), frozen_baseline(encoder, data, max_length, seed, cache_dir, progress),
                   accuracy_and_loss(*tuned[name].predict(data.test))[0]) for name, data in tasks.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SCORE_COLUMNS)).rename_axis("task")


# -- head disabling ---------------------------------------------------------------------------------
def _runs(n_layers: int, n_heads: int) -> list[tuple[int, int, tuple[int, int | None] | None]]:
    """(layer, head, what to disable) of every run of the scan: nothing (0, 0), each head (1-indexed; the
    edit is 0-based), each whole layer (head 0)."""
    runs = [(0, 0, None)]
    runs += [(l + 1, h + 1, (l, h)) for l in range(n_layers) for h in range(n_heads)]
    runs += [(l + 1, 0, (l, None)) for l in range(n_layers)]
    return runs


class DisablingScan(Reducer):
    """For every input, the logits of every run of the scan (`_runs`): `logits` float32 [N, runs, n_labels]."""

    name = "disabling_scan"
    needs_attention = False  # it runs the model with edited maps

    def __init__(self, tuned: FineTuned):
        self.tuned = tuned
        self.runs = _runs(tuned.encoder.n_layers, tuned.encoder.n_heads)
        self.logits: list[torch.Tensor] = []
        self.arrays: dict[str, np.ndarray] = {}

    @property
    def key(self) -> str:
        head = hashlib.sha256(self.tuned.head.weight.detach().numpy().tobytes()).hexdigest()[:16]
        return f"{self.name}-{len(self.runs)}-{head}"

    def fresh(self) -> "DisablingScan":
        return DisablingScan(self.tuned)  # shares the model, never copies it

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        model = self.tuned.encoder.model.eval()
        self.logits.append(torch.stack([_logits(model, self.tuned.head, batch, disable)
                                        for _, _, disable in self.runs], 1))

    def result(self) -> dict[str, np.ndarray]:
        return {"logits": torch.cat(self.logits).numpy()}

    merge = staticmethod(concatenate)

    def load(self, result: dict[str, np.ndarray]) -> None:
        self.arrays = result


def disabling_scan(tuned: FineTuned, data: TaskData, n_examples: int | None = None, batch_size: int = 64,
                   cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> pd.DataFrame:
    """Accuracy and loss on the first `n_examples` test examples (None: all) with each single head disabled,
    then each whole layer (all its heads).

    One row per run: `layer`, `head` (1-indexed; head 0 = the whole layer; layer 0 = nothing disabled),
    `accuracy`, `loss`, and `delta_accuracy`, `delta_loss` against nothing disabled. Cached block by block."""
    examples = data.test[:n_examples]
    scan = DisablingScan(tuned)
    reduce(tuned.encoder, [e.item for e in examples], [scan], batch_size=batch_size, cache_dir=cache_dir,
           progress=progress, max_tokens=tuned.max_length, desc=f"disabling heads ({data.name})")
    labels = np.array([e.label for e in examples])
    rows = [(layer, head, *accuracy_and_loss(scan.arrays["logits"][:, r], labels))
            for r, (layer, head, _) in enumerate(scan.runs)]
    frame = pd.DataFrame(rows, columns=["layer", "head", "accuracy", "loss"])
    frame["delta_accuracy"] = frame["accuracy"] - frame["accuracy"].iloc[0]
    frame["delta_loss"] = frame["loss"] - frame["loss"].iloc[0]
    return frame


def scan_summary(scans: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per task of `disabling_scan` frames: accuracy with nothing disabled; how many single heads
    raise / lower the accuracy when disabled; the best and the worst head (1-indexed label) and their change;
    how many heads lower the loss; the layer whose disabling hurts most and its change (changes as fractions)."""
    rows = {}
    for name, scan in scans.items():
        heads = scan[scan["head"] > 0]
        layers = scan[(scan["head"] == 0) & (scan["layer"] > 0)]
        best, worst = heads.loc[heads["delta_accuracy"].idxmax()], heads.loc[heads["delta_accuracy"].idxmin()]
        worst_layer = layers.loc[layers["delta_accuracy"].idxmin()]
        rows[name] = {"accuracy": scan.iloc[0]["accuracy"],
                      "heads that help when disabled": int((heads["delta_accuracy"] > 0).sum()),
                      "heads that hurt": int((heads["delta_accuracy"] < 0).sum()),
                      "best head": head_label(int(best["layer"]), int(best["head"])),
                      "best gain": best["delta_accuracy"],
                      "worst head": head_label(int(worst["layer"]), int(worst["head"])),
                      "worst loss": worst["delta_accuracy"],
                      "heads lowering the loss": int((heads["delta_loss"] < 0).sum()),
                      "worst layer": int(worst_layer["layer"]), "worst layer change": worst_layer["delta_accuracy"]}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("task")
