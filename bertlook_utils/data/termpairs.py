"""Term pairs: one real Wikipedia sentence holding the query term once (the "base") and twice (the "relevant").

The relevant passage is the base with another noun swapped for the query term; both words are one wordpiece
each, so every token keeps its position.

    pairs = term_pairs(encoder.tokenizer, n=40, seed=0)
    pairs[0].query, pairs[0].base, pairs[0].relevant   # "harbour", (words ...), (words ..., "harbour", ...)
    first_copy(pairs[0])   # the same swap one step earlier: the term absent -> present once

A sentence qualifies when it has MIN_WORDS-MAX_WORDS words and at least two different nouns (spaCy's tagger,
`parses.load_parser`) that occur once each and are one wordpiece each; the query term and the replaced noun are
drawn from those with a generator seeded by `seed`, articles in a seeded order, one pair per sentence.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .corpora import split_sentences, wiki_articles
from .parses import load_parser

MIN_WORDS, MAX_WORDS = 12, 40


@dataclass(frozen=True)
class TermPair:
    """One pair: `query` (the term), `base` and `relevant` (word tuples differing at `position` only, where
    `relevant` has the query term and `base` has `replaced`), and the article it comes from."""

    article: str
    query: str
    base: tuple[str, ...]
    relevant: tuple[str, ...]
    position: int
    replaced: str


def _single_piece(tokenizer, word: str) -> bool:
    return len(tokenizer.tokenize(word)) == 1


def term_pairs(tokenizer, n: int, seed: int = 0) -> list[TermPair]:
    """`n` pairs (see the module docstring), in a deterministic order; ValueError when the corpus has fewer."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = random.Random(seed)
    articles = list(wiki_articles())
    rng.shuffle(articles)
    nlp = load_parser()
    pairs: list[TermPair] = []
    for title, paragraphs in articles:
        for sentence in (s for p in paragraphs for s in split_sentences(p)):
            doc = nlp(sentence)
            words = tuple(t.text for t in doc)
            if not MIN_WORDS <= len(words) <= MAX_WORDS:
                continue
            counts: dict[str, int] = {}
            for word in words:
                counts[word.lower()] = counts.get(word.lower(), 0) + 1
            nouns = [i for i, t in enumerate(doc) if t.pos_ == "NOUN" and t.text.isalpha()
                     and counts[t.text.lower()] == 1 and _single_piece(tokenizer, t.text)]
            if len(nouns) < 2:
                continue
            term, swapped = rng.sample(nouns, 2)
            query = words[term].lower()
            relevant = words[:swapped] + (query,) + words[swapped + 1:]
            pairs.append(TermPair(title, query, words, relevant, swapped, words[swapped]))
            if len(pairs) == n:
                return pairs
            break  # one sentence per article: many articles, not many sentences of a few
    raise ValueError(f"the corpus gives only {len(pairs)} pairs, fewer than n={n}")


def first_copy(pair: TermPair) -> TermPair:
    """The pair one step earlier: `base` is the pair's base with its one occurrence of the query term swapped for
    the replaced noun (the term absent), `relevant` is the pair's base (the term once). Like the pair, its two
    passages differ by one swap of the replaced noun for the term; only whether the term was already there
    differs (Chen et al. add the term where it was absent)."""
    at = [i for i, word in enumerate(pair.base) if word.lower() == pair.query]
    if len(at) != 1:
        raise ValueError(f"pair must hold its query term {pair.query!r} once in its base, found {len(at)}")
    (i,) = at
    absent = pair.base[:i] + (pair.replaced,) + pair.base[i + 1:]
    return TermPair(pair.article, pair.query, absent, pair.base, i, pair.replaced)
