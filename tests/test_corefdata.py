"""The generated coreference set: deterministic, committed as generated, and gold by construction."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from bertlook_utils import corefdata
from bertlook_utils.corefdata import DEFAULT_PASSAGES, DEFAULT_PATH, DEFAULT_SEED, Passage, generate

PRONOUN_CLASS = {"he": "m", "him": "m", "his": "m", "she": "f", "her": "f", "it": "n", "its": "n",
                 "they": "pl", "them": "pl", "their": "pl"}


@pytest.fixture(scope="module")
def committed():
    return corefdata.read_jsonl()


def entity_class(p: Passage, entity: int) -> str:
    """m / f / n / pl, read off the entity's mentions (what a pronoun would have to agree with)."""
    ms = [m for m in p.mentions if m.entity == entity]
    if ms[0].number == "pl":
        return "pl"
    if ms[0].animacy == "inanimate":
        return "n"
    return next(m.gender for m in ms if m.gender in "mf")


def test_committed_file_is_what_the_generator_writes(committed, tmp_path):
    out = tmp_path / "passages.jsonl"
    corefdata.write_jsonl(generate(DEFAULT_PASSAGES, DEFAULT_SEED), out)
    assert out.read_text() == DEFAULT_PATH.read_text(), "run `python -m bertlook_utils.corefdata` and commit"


def test_deterministic_in_the_seed():
    a, b, c = generate(6, seed=5), generate(6, seed=5), generate(6, seed=6)
    assert [p.to_json() for p in a] == [p.to_json() for p in b]
    assert [p.to_json() for p in a] != [p.to_json() for p in c]


def test_json_round_trip(tmp_path):
    passages = generate(3, seed=1)
    corefdata.write_jsonl(passages, tmp_path / "x.jsonl")
    assert [p.to_json() for p in corefdata.read_jsonl(tmp_path / "x.jsonl")] == [p.to_json() for p in passages]
    assert json.loads((tmp_path / "x.jsonl").read_text().splitlines()[0])["id"] == "p0000"


def test_bad_arguments_say_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="at least 1"):
        generate(0)
    with pytest.raises(FileNotFoundError, match="corefdata"):
        corefdata.read_jsonl(tmp_path / "missing.jsonl")


def test_enough_mentions_balanced_over_the_three_types(committed):
    counts = Counter(p.mentions[i].type for p in committed for i in p.coreferent())
    assert sum(counts.values()) >= 600
    assert set(counts) == {"pronoun", "proper", "nominal"}
    assert max(counts.values()) - min(counts.values()) <= 0.05 * sum(counts.values())


def test_mentions_are_well_formed(committed):
    for p in committed:
        assert len(p.words) <= corefdata.MAX_WORDS
        starts = [m.start for m in p.mentions]
        assert starts == sorted(starts)
        for m in p.mentions:
            assert m.start <= m.head < m.end <= len(p.words)
            assert m.type in corefdata.TYPES
            assert "," not in p.words[m.start:m.end] and "." not in p.words[m.start:m.end]


def test_pronouns_have_exactly_one_possible_entity(committed):
    """Gold by construction: among the entities mentioned before a pronoun, only its own agrees with it."""
    n = 0
    for p in committed:
        for i in p.coreferent():
            m = p.mentions[i]
            if m.type != "pronoun":
                continue
            word = p.words[m.head].lower()
            earlier = {x.entity for x in p.mentions[:i]}
            fits = {e for e in earlier if entity_class(p, e) == PRONOUN_CLASS[word]}
            assert fits == {m.entity}, (p.id, i, p.text)
            n += 1
    assert n > 200


def test_names_and_descriptions_point_to_one_entity(committed):
    for p in committed:
        for i in p.coreferent():
            m = p.mentions[i]
            first = p.mentions[p.antecedents(i)[0]]
            if m.type == "proper":  # surname, first name or the full name of the first mention
                full = p.words[first.start:first.end]
                assert p.words[m.start:m.end] in ([full[-1]], [full[0]], full)
            elif m.type == "nominal":  # "the <noun>", and no other entity has a mention with that head
                assert p.words[m.start].lower() == "the"
                head = p.words[m.head]
                others = {x.entity for x in p.mentions if p.words[x.head] == head and x.entity != m.entity}
                assert not others, (p.id, head)


def test_position_alone_cannot_win(committed):
    """The antecedent is the nearest earlier mention for only a minority of mentions."""
    ranks = [i - max(p.antecedents(i)) for p in committed for i in p.coreferent()]
    assert sum(r == 1 for r in ranks) / len(ranks) < 0.35
    assert sum(r >= 3 for r in ranks) / len(ranks) > 0.3


def test_every_passage_fits_in_128_wordpieces(committed, tokenizer):
    lengths = [len(tokenizer(p.words, is_split_into_words=True)["input_ids"]) for p in committed]
    assert max(lengths) <= 128
