"""Real text for the analyses: Wikipedia articles shipped with gensim, cut into BERT-style segments.

`wiki_articles()` -> [(title, [paragraph, ...])] in file order; `make_segments(tokenizer, n, seed)` ->
`Segment`s `[CLS] A [SEP] B [SEP]` of about 128 wordpieces, built as BERT's pre-training data was.
"""
from __future__ import annotations

import bz2
import hashlib
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.fingerprints import tokenizer_fingerprint
from ..core.source import code_version

GENSIM_WIKI = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
MIN_PARAGRAPH_CHARS = 200
_MARKUP = re.compile(r"'{2,}|\[\[|\]\]|&nbsp;|<[^>]+>")
_BRACKET_EDGES = re.compile(r"(?<=\()(?:\s*[,;])+\s*|(?:\s*[,;])+\s*(?=\))")
_EMPTY_BRACKETS = re.compile(r"\s*\(\s*\)")
_SPACES = re.compile(r"\s+")
_NOT_PROSE = re.compile(r"^\s*([=*#|{}!:;]|Category:|File:|Image:|thumb\|)")


@dataclass(frozen=True)
class Segment:
    """One input pair: `a` and `b` are consecutive text from one article; `article` names it."""

    article: str
    a: str
    b: str

    @property
    def pair(self) -> tuple[str, str]:
        return self.a, self.b


def gensim_wiki_path() -> Path:
    """The Wikipedia dump excerpt (106 articles) that gensim ships as test data."""
    import gensim

    path = Path(gensim.__file__).parent / GENSIM_WIKI
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall gensim==4.4.0 (`make setup`)")
    return path


def _clean(paragraph: str) -> str:
    text = _MARKUP.sub("", paragraph)
    text = _EMPTY_BRACKETS.sub("", _BRACKET_EDGES.sub("", text))  # left by templates: "(; , Akhilleus, )"
    return _SPACES.sub(" ", text).strip()


@lru_cache(maxsize=1)
def wiki_articles() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(title, paragraphs) of every article with prose, in file order; paragraphs are cleaned prose."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    articles = []
    with bz2.open(gensim_wiki_path()) as f:
        for title, text, _ in extract_pages(f):
            lines = filter_wiki(text).split("\n")
            paragraphs = tuple(_clean(line) for line in lines
                               if len(line) >= MIN_PARAGRAPH_CHARS and not _NOT_PROSE.match(line))
            paragraphs = tuple(p for p in paragraphs if len(p) >= MIN_PARAGRAPH_CHARS)
            if paragraphs:
                articles.append((title, paragraphs))
    return tuple(articles)


@lru_cache(maxsize=1)
def _sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(paragraph: str) -> list[str]:
    """Rule-based sentence split (spaCy's sentencizer): deterministic and fast."""
    return [s.text.strip() for s in _sentencizer()(paragraph).sents if s.text.strip()]


def _word_spans(tokenizer, text: str) -> list[tuple[int, int, int]]:
    """(start char, end char, wordpieces) of every word of `text`, as the tokenizer splits words."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans: dict[int, list[int]] = {}
    for word, (start, end) in zip(enc.word_ids(), enc["offset_mapping"]):
        span = spans.setdefault(word, [start, end, 0])
        span[1], span[2] = end, span[2] + 1
    return [tuple(spans[w]) for w in sorted(spans)]


def _trim_pair(a: list, b: list, budget: int, rng: random.Random) -> None:
    """Drop whole words from the longer side, at its front or back at random, until both fit `budget`.

    Words are (sentence index, start, end, wordpieces)."""
    def pieces(side):
        return sum(w[3] for w in side)

    while pieces(a) + pieces(b) > budget:
        longer = a if pieces(a) > pieces(b) else b
        longer.pop(0 if rng.random() < 0.5 else -1)


def _join(sentences: list[str], words: list) -> str:
    """The text of `words`, sentence by sentence, cut from the original sentences."""
    spans: dict[int, list[int]] = {}
    for sent, start, end, _ in words:
        span = spans.setdefault(sent, [start, end])
        span[1] = end
    return " ".join(sentences[i][start:end] for i, (start, end) in sorted(spans.items()))


def make_segments(tokenizer, n: int = 1000, seed: int = 0, max_len: int = 128,
                  cache_dir: Path | str | None = DEFAULT_CACHE_DIR) -> list[Segment]:
    """`n` segments `[CLS] A [SEP] B [SEP]` of at most `max_len` wordpieces from the gensim Wikipedia articles.

    As BERT's pre-training data (and Clark et al.): walk each article's sentences in order, gather them
    until the chunk reaches max_len - 3 wordpieces, split it at a random sentence boundary into A and B,
    trim the longer side (front or back at random) until A + B fit. Whole words are trimmed (not single
    wordpieces) so that every word stays intact for word-level maps. Chunks of one sentence are skipped
    (BERT would pair them with a random sentence). `n` of all segments are drawn with the seed and kept
    in corpus order; deterministic for (tokenizer, n, seed, max_len), and cached in `cache_dir`."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if cache_dir is not None:
        path = entry_path(cache_dir, "segments", tokenizer_fingerprint(tokenizer), f"{n}/{seed}/{max_len}",
                          version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return [Segment(*fields) for fields in json.loads(str(cached["segments"]))]
        segments = make_segments(tokenizer, n, seed, max_len, cache_dir=None)
        save_result(path, {"segments": np.array(json.dumps([(s.article, s.a, s.b) for s in segments]))})
        return segments
    budget = max_len - 3
    rng = random.Random(seed)
    candidates: list[Segment] = []
    for title, paragraphs in wiki_articles():
        sentences = [s for p in paragraphs for s in split_sentences(p)]
        chunk: list[list] = []  # words of each gathered sentence
        for i, sentence in enumerate(sentences):
            chunk.append([(i, *span) for span in _word_spans(tokenizer, sentence)])
            length = sum(w[3] for words in chunk for w in words)
            if length < budget and i < len(sentences) - 1:
                continue
            if len(chunk) >= 2:
                cut = rng.randint(1, len(chunk) - 1)
                a = [w for words in chunk[:cut] for w in words]
                b = [w for words in chunk[cut:] for w in words]
                _trim_pair(a, b, budget, rng)
                if a and b:
                    candidates.append(Segment(title, _join(sentences, a), _join(sentences, b)))
            chunk = []
    if n > len(candidates):
        raise ValueError(f"asked for {n} segments but the corpus gives only {len(candidates)} at max_len={max_len}")
    chosen = sorted(rng.sample(range(len(candidates)), n))
    return [candidates[i] for i in chosen]


def segments_fingerprint(segments: list[Segment]) -> str:
    """sha256 of the segments' text: the data part of a cache key."""
    payload = json.dumps([(s.article, s.a, s.b) for s in segments], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()
