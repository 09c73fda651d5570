"""Fine-tune an encoder on the kit's classification tasks (`tasks`), and the baselines that say what it gained.

`finetune(encoder, data)` trains a copy of the encoder plus a linear head on [CLS] (seeded, cached under
data/cache as a model folder that `load_encoder(folder)` reads, with the head beside it) and returns a
`FineTuned`. `task_scores` puts the fine-tuned model's test accuracy beside four baselines (`Score`):
the majority class; the pre-trained encoder with an untrained linear head on [CLS] (no task training at all,
Kovaleva et al.'s "pre-trained" row); and a linear head (logistic regression) trained on the frozen encoder's
[CLS] state, and on its mean-pooled last-layer states (the pooling the default model was trained with). Both
frozen features come from one forward pass (`FrozenStates`). Disabling heads is `disabling`.

Every input reaches the model through the engine's padded batches (`extract.batches`), cut to `max_length`
tokens. Training cannot be a streaming reducer (it updates the weights); the frozen features are a reducer
that runs the model itself, cached block by block like every pass. Caches are keyed by model, data and the
code version of this module (and what it imports): any edit here retrains, never a stale model.
"""
from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR, entry_path
from ..core.intervene import usable_cache
from ..core.source import code_version
from ..engine.extract import Batch, RowReducer, batches, reduce
from ..core.models import Encoder, cached_folder, load_encoder, save_folder
from ..data.tasks import Example, TaskData
from ..core.threads import TRAINING_THREADS, fixed_threads, one_thread

HEAD_FILE = "classifier_head.pt"
META_FILE = "bertlook_task.json"
UNTRAINED_HEADS = 10  # seeded random heads averaged in the "untrained head" column


class Score(StrEnum):
    """The columns of `task_scores`, in order: four baselines and the fine-tuned model. Look a column up by its
    member; its value is the label the tables show."""

    MAJORITY = "majority class"
    UNTRAINED = "untrained head"
    FROZEN_CLS = "frozen [CLS]"
    FROZEN_MEAN = "frozen mean-pooled"
    FINE_TUNED = "fine-tuned"


class Stage(StrEnum):
    """An encoder before and after fine-tuning, as tables and figures name the two; the value is the label."""

    PRETRAINED = "pre-trained"
    FINE_TUNED = "fine-tuned"


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

    def predict(self, examples: Sequence[Example], cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, n_labels], labels [N]) of the examples, in their order: the head on the fine-tuned
        encoder's [CLS] states (`frozen_states`), cached under the fine-tuned weights' fingerprint."""
        states = frozen_states(self.encoder, examples, self.max_length, cache_dir, progress,
                               desc=f"{self.task} logits")
        with torch.inference_mode():
            logits = self.head(torch.from_numpy(states["cls"]))
        return logits.numpy(), np.array([e.label for e in examples])


def finetune(encoder: Encoder, data: TaskData, epochs: int = 2, batch_size: int = 16, lr: float = 1e-4,
             max_length: int = 64, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
             progress: bool = True) -> FineTuned:
    """Fine-tune a copy of `encoder` (it stays as it is) with a linear head on [CLS] on `data.train`.

    AdamW, linear warm-up (10 % of the steps) and decay, dropout as the model's config; seeded; on
    `TRAINING_THREADS` threads, so that the weights are the same on any core count. The result is cached as a
    folder (model + tokenizer, `load_encoder(folder)` reads it, and the head) keyed by the base model, the data,
    the settings and this module's code; a second call loads it. The CPU's vector kernels (`trained_on`) change
    the last bits of the weights too; the key leaves them out, so that a cache pack filled on one laptop serves a
    class of others, and the folder's metadata records them."""
    settings = f"{epochs}/{batch_size}/{lr}/{max_length}/{seed}"
    folder = None
    cache_dir = usable_cache(encoder.model, cache_dir)
    if cache_dir is not None:
        folder = entry_path(cache_dir, f"finetune-{data.name}", encoder.fingerprint, data.fingerprint(), settings,
                            version=code_version(__name__)).with_suffix("")
        if (folder / META_FILE).exists():
            with cached_folder(folder):
                return load_finetuned(folder, encoder.device, encoder.precision)
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
    with fixed_threads(TRAINING_THREADS):  # the same weights whatever the machine's core count (`core.threads`)
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
                    history=history_frame.to_dict(orient="list"), trained_on=trained_on())
        (tmp / META_FILE).write_text(json.dumps(meta))

    save_folder(folder, model, tuned.tokenizer, write_head)
    return load_finetuned(folder, encoder.device, encoder.precision)


def trained_on() -> dict[str, str | int]:
    """What besides the key shapes the trained weights: the thread count of training (`TRAINING_THREADS`), the
    CPU's vector kernels PyTorch uses and PyTorch's version."""
    return {"threads": TRAINING_THREADS, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__}


def load_finetuned(folder: Path | str, device: str | torch.device | None = None,
                   precision: str | None = None) -> FineTuned:
    """A fine-tuned model saved by `finetune` (its folder in the cache), its encoder on `device` with `precision`
    (`load_encoder`); its head stays on the CPU, where the encoder's outputs are (`models.place`)."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.exists():
        raise FileNotFoundError(f"{folder} is not a fine-tuned model folder (no {META_FILE}); run finetune() first")
    meta = json.loads(meta_path.read_text())
    encoder = load_encoder(folder, device, precision)
    head = torch.nn.Linear(encoder.model.config.hidden_size, len(meta["labels"]))
    head.load_state_dict(torch.load(folder / HEAD_FILE, weights_only=True))
    return FineTuned(meta["task"], encoder, head.eval(), folder, meta["max_length"], pd.DataFrame(meta["history"]))


# -- baselines and evaluation -----------------------------------------------------------------------
def accuracy_and_loss(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(accuracy, mean cross-entropy in nats) of logits [N, C] against labels [N]."""
    logits = torch.from_numpy(np.asarray(logits, dtype=np.float32))
    targets = torch.from_numpy(np.asarray(labels)).long()
    loss = torch.nn.functional.cross_entropy(logits, targets).item()
    return float((logits.argmax(1) == targets).float().mean()), float(loss)


class FrozenStates(RowReducer):
    """The last layer's states of every input, from one forward pass (the engine's pass returns attention
    maps, not hidden states): `cls` float32 [N, hidden], the first token's ([CLS]) state, and `mean` float32
    [N, hidden], the mean over the input's real tokens (special tokens included, padding excluded: the
    pooling sentence-transformers models are trained with)."""

    name = "frozen_states"
    needs_attention = False

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    @torch.inference_mode()
    def update(self, batch: Batch) -> None:
        states = self.model.eval()(**batch.model_inputs).last_hidden_state
        weights = batch.valid.unsqueeze(-1).to(states.dtype)
        self.add(cls=states[:, 0].numpy(), mean=((states * weights).sum(1) / weights.sum(1)).numpy())


def frozen_states(encoder: Encoder, examples: Sequence[Example], max_length: int = 64,
                  cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True,
                  desc: str | None = None) -> dict[str, np.ndarray]:
    """`FrozenStates` of the examples cut to max_length tokens: {"cls": [N, hidden], "mean": [N, hidden]}."""
    reducer = FrozenStates(encoder.model)
    reduce(encoder, [e.item for e in examples], [reducer], batch_size=32, cache_dir=cache_dir, progress=progress,
           max_tokens=max_length, desc=desc)
    return reducer.arrays


def untrained_head(n_features: int, n_labels: int, seed: int) -> torch.nn.Linear:
    """The linear head `finetune(..., seed=seed)` starts from (PyTorch's default initialisation after
    torch.manual_seed(seed)); the global random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Linear(n_features, n_labels)


def untrained_head_accuracies(cls_states: np.ndarray, labels: np.ndarray, n_labels: int,
                              n_heads: int = UNTRAINED_HEADS) -> np.ndarray:
    """[n_heads]: the accuracy of `untrained_head(hidden, n_labels, seed)` for seeds 0 .. n_heads - 1 on the
    [CLS] states [N, hidden] of inputs with `labels` [N]: the model with no task training at all."""
    if n_heads < 1:
        raise ValueError(f"n_heads must be at least 1, not {n_heads}")
    states = torch.from_numpy(np.asarray(cls_states, dtype=np.float32))
    with torch.inference_mode():
        predictions = [untrained_head(states.shape[1], n_labels, seed)(states).argmax(1).numpy()
                       for seed in range(n_heads)]
    return np.array([float(np.mean(p == np.asarray(labels))) for p in predictions])


def probe_accuracy(train: np.ndarray, train_labels: np.ndarray, test: np.ndarray, test_labels: np.ndarray,
                   seed: int = 0) -> float:
    """Test accuracy of a linear head (logistic regression, C = 1) fitted on frozen features train [N, D].

    The fit runs on one BLAS thread: its result then does not depend on the machine's thread count, and it is
    faster (0.03 s instead of 1-9 s on 2 shared cores, where BLAS threads wait for each other)."""
    from sklearn.linear_model import LogisticRegression

    with one_thread():
        classifier = LogisticRegression(max_iter=2000, C=1.0, random_state=seed).fit(train, train_labels)
        return float(classifier.score(test, test_labels))


def task_scores(encoder: Encoder, tasks: Mapping[str, TaskData], tuned: Mapping[str, FineTuned],
                max_length: int = 64, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
                progress: bool = True, untrained_heads: int = UNTRAINED_HEADS) -> pd.DataFrame:
    """Test accuracy per task (rows) in the columns of `Score`:

    - majority class: always the most frequent training label (`majority_accuracy`);
    - untrained head: the pre-trained `encoder` with a random linear head on [CLS], no task training at all
      (Kovaleva et al.'s "pre-trained"); the mean over `untrained_heads` seeded heads
      (`untrained_head_accuracies`);
    - frozen [CLS] / frozen mean-pooled: a linear head (logistic regression) trained on the frozen encoder's
      [CLS] state / mean-pooled last-layer states (`FrozenStates`, one cached pass per split);
    - fine-tuned: `tuned[task]`, the whole encoder and its head trained on the task."""
    rows = {}
    for name, data in tasks.items():
        if name not in tuned:
            raise ValueError(f"no fine-tuned model for task {name!r}; pass tuned[{name!r}] = finetune(...)")
        states = {split: frozen_states(encoder, getattr(data, split), max_length, cache_dir, progress,
                                       desc=f"frozen states for {name} ({split})") for split in ("train", "test")}
        train_labels = np.array([e.label for e in data.train])
        test_labels = np.array([e.label for e in data.test])
        untrained = untrained_head_accuracies(states["test"]["cls"], test_labels, len(data.labels), untrained_heads)
        probes = [probe_accuracy(states["train"][kind], train_labels, states["test"][kind], test_labels, seed)
                  for kind in ("cls", "mean")]
        rows[name] = (majority_accuracy(data), float(untrained.mean()), *probes,
                      accuracy_and_loss(*tuned[name].predict(data.test, cache_dir, progress))[0])
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(Score)).rename_axis("task")
