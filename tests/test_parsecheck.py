"""The hand check of the silver parses: the Wilson interval, the precision table on known answers, the clear
errors for a bad judgements file, and the shipped sample (complete, and regenerated exactly by the code)."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest

from bertlook_utils import compare, intervals, parsecheck
from bertlook_utils.parses import Sentence
from tools import parsecheck_sample


# -- the Wilson interval ------------------------------------------------------------------------
@pytest.mark.parametrize("k, n, low, high", [
    (0, 10, 0.0, 0.2775),        # z^2 / (n + z^2) with z = 1.96
    (10, 10, 0.7225, 1.0),
    (5, 10, 0.2366, 0.7634),
    (81, 263, 0.2553, 0.3662),
])
def test_wilson_interval_known_values(k, n, low, high):
    got = intervals.wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=1e-4)
    assert got[0] <= k / n <= got[1]


def test_wilson_interval_edges_and_level():
    assert intervals.wilson_interval(0, 10)[0] == 0.0 and intervals.wilson_interval(10, 10)[1] == 1.0
    low90, high90 = intervals.wilson_interval(5, 10, level=0.90)
    low95, high95 = intervals.wilson_interval(5, 10)
    assert low95 < low90 < 0.5 < high90 < high95
    assert all(x != x for x in intervals.wilson_interval(0, 0))  # nan for no trials
    for bad in ((11, 10), (-1, 10)):
        with pytest.raises(ValueError, match="successes"):
            intervals.wilson_interval(*bad)


# -- a tiny synthetic judgements file --------------------------------------------------------------
SENTENCE = "the cat sat on the mat ."  # 7 words


def write(path: Path, rows: list[dict], columns=parsecheck.COLUMNS) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def row(k: int, relation: str, head_ok: str, label_ok: str, correct: str = "") -> dict:
    return {"sentence_id": f"s#{k}", "sentence": SENTENCE, "dep": 1, "dep_word": "the", "head": 2,
            "head_word": "cat", "relation": relation, "head_ok": head_ok, "label_ok": label_ok,
            "correct_head": correct, "note": ""}


@pytest.fixture
def tiny(tmp_path):
    rows = ([row(k, "det", "yes", "yes") for k in range(4)]                      # det: 4 / 4, 4 / 4
            + [row(4, "amod", "yes", "yes"), row(5, "amod", "yes", "no"),        # amod: 2 / 4 heads,
               row(6, "amod", "no", "NA", "6"), row(7, "amod", "no", "NA")]      #       1 / 4 labelled
            + [row(8, "prt", "no", "na", "0")])                                  # prt: 0 / 1
    return write(tmp_path / "arcs.csv", rows)


def test_precision_table_on_known_answers(tiny):
    table = parsecheck.precision_table(parsecheck.load_judgements(tiny)).set_index("relation")
    assert list(table.index) == ["det", "amod", "prt", "all checked"]  # Table 1's order, then the pool
    assert list(table.columns) == ["n", "head_ok", "head_precision", "head_low", "head_high", "labelled_ok",
                                   "labelled_precision", "labelled_low", "labelled_high"]
    assert table.loc["det", ["n", "head_ok", "labelled_ok"]].tolist() == [4, 4, 4]
    assert table.loc["amod", ["n", "head_ok", "labelled_ok"]].tolist() == [4, 2, 1]
    assert table.loc["prt", ["n", "head_ok", "labelled_ok"]].tolist() == [1, 0, 0]
    assert table.loc["all checked", ["n", "head_ok", "labelled_ok"]].tolist() == [9, 6, 5]
    assert table.loc["amod", "head_precision"] == 50.0 and table.loc["amod", "labelled_precision"] == 25.0
    assert table.loc["all checked", "head_precision"] == pytest.approx(100 * 6 / 9)
    low, high = intervals.wilson_interval(2, 4)
    assert (table.loc["amod", "head_low"], table.loc["amod", "head_high"]) == pytest.approx((100 * low, 100 * high))
    low, high = intervals.wilson_interval(5, 9)
    assert (table.loc["all checked", "labelled_low"], table.loc["all checked", "labelled_high"]) == \
        pytest.approx((100 * low, 100 * high))
    assert table.loc["det", "head_high"] == 100.0 and table.loc["prt", "head_low"] == 0.0


def test_load_judgements_types(tiny):
    frame = parsecheck.load_judgements(tiny)
    assert frame["head_ok"].dtype == bool and frame["label_ok"].dtype == bool
    assert str(frame["correct_head"].dtype) == "Int64"
    assert [None if x is pd.NA else int(x) for x in frame["correct_head"].iloc[6:]] == [6, None, 0]
    assert not frame.loc[6, "label_ok"]  # a wrong head is never a right labelled arc


def test_relations_can_be_chosen(tiny):
    table = parsecheck.precision_table(parsecheck.load_judgements(tiny), relations=["prt", "poss"])
    assert table["relation"].tolist() == ["prt", "poss", "all checked"]
    assert table.set_index("relation").loc["poss", "n"] == 0
    assert table.set_index("relation").loc["all checked", "n"] == 9


@pytest.mark.parametrize("change, message", [
    ({"head_ok": ""}, "not judged"),
    ({"head_ok": "maybe"}, "head_ok must be yes or no"),
    ({"head_ok": "yes", "label_ok": "NA"}, "label_ok must be yes or no"),
    ({"head_ok": "no", "label_ok": "yes"}, "label_ok must be NA"),
    ({"head_ok": "no", "label_ok": "NA", "correct_head": "2"}, "correct_head is for a wrong head only"),
    ({"head_ok": "yes", "label_ok": "yes", "correct_head": "3"}, "correct_head is for a wrong head only"),
    ({"head_ok": "no", "label_ok": "NA", "correct_head": "x"}, "whole numbers"),
    ({"dep": "12"}, "word indices 1..7"),
])
def test_malformed_judgements_are_clear_errors(tmp_path, change, message):
    path = write(tmp_path / "arcs.csv", [row(0, "det", "yes", "yes"), {**row(1, "det", "yes", "yes"), **change}])
    with pytest.raises(ValueError, match=message) as error:
        parsecheck.load_judgements(path)
    assert "line 3" in str(error.value)


def test_missing_file_column_duplicates_and_partial(tmp_path):
    with pytest.raises(FileNotFoundError, match="tools.parsecheck_sample"):
        parsecheck.load_judgements(tmp_path / "nothing.csv")
    short = write(tmp_path / "short.csv", [row(0, "det", "yes", "yes")], columns=parsecheck.SAMPLE_COLUMNS)
    with pytest.raises(ValueError, match="missing column"):
        parsecheck.load_judgements(short)
    with pytest.raises(ValueError, match="no arcs"):
        parsecheck.load_judgements(write(tmp_path / "empty.csv", []))
    twice = write(tmp_path / "twice.csv", [row(0, "det", "yes", "yes"), row(0, "det", "no", "NA")])
    with pytest.raises(ValueError, match="listed twice"):
        parsecheck.load_judgements(twice)
    partial = write(tmp_path / "partial.csv", [row(0, "det", "yes", "yes"), row(1, "det", "", "")])
    assert len(parsecheck.load_judgements(partial, complete=False)) == 1


# -- drawing and writing the sample ------------------------------------------------------------
def toy_sentences() -> list[Sentence]:
    out = []
    for k in range(6):
        words = ("the", "cat", "sat", "on", "the", "mat", ".")
        out.append(Sentence(words, (2, 3, 0, 3, 6, 4, 3), ("det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"),
                            ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"),
                            ("DT", "NN", "VBD", "IN", "DT", "NN", "."), f"A{k % 2}", f"A{k % 2}#{k}"))
    return out


def test_draw_sample_is_stratified_seeded_and_sorted():
    sentences = toy_sentences()
    arcs = parsecheck.draw_sample(sentences, per_relation=3, seed=1)
    counts = {r: sum(a.relation == r for a in arcs) for r in ("det", "nsubj", "prep", "pobj")}
    assert counts == {"det": 3, "nsubj": 3, "prep": 3, "pobj": 3}  # 12 det arcs, 6 of each other
    assert arcs == parsecheck.draw_sample(sentences, per_relation=3, seed=1)
    assert arcs != parsecheck.draw_sample(sentences, per_relation=3, seed=2)
    order = [([s.id for s in sentences].index(a.sentence_id), a.dep) for a in arcs]
    assert order == sorted(order)
    a = next(a for a in arcs if a.relation == "pobj")
    assert (a.dep, a.dep_word, a.head, a.head_word) == (6, "mat", 4, "on") and a.sentence == "the cat sat on the mat ."
    everything = parsecheck.draw_sample(sentences, per_relation=50)
    assert len(everything) == 6 * 5  # a relation with fewer arcs gives them all; ROOT and punct are not drawn


def test_write_sample_keeps_judgements(tmp_path):
    arcs = parsecheck.draw_sample(toy_sentences(), per_relation=2)
    path = tmp_path / "arcs.csv"
    assert parsecheck.write_sample(arcs, path) == 0
    assert parsecheck.read_sample(path) == arcs
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    rows[0].update(head_ok="yes", label_ok="yes", note="fine")
    write(path, rows)
    assert parsecheck.write_sample(arcs, path) == 1
    assert list(csv.DictReader(open(path, encoding="utf-8")))[0]["note"] == "fine"
    assert parsecheck.read_sample(path) == arcs


# -- the shipped file ---------------------------------------------------------------------------
def test_relations_are_table_1s():
    assert list(parsecheck.RELATIONS) == [r for r in compare.TABLE1_RELATIONS if r != "all"]


def test_shipped_judgements_are_complete():
    frame = parsecheck.load_judgements()  # complete=True: every sampled arc judged, every field well formed
    assert len(frame) >= 300
    assert set(frame["relation"]) == set(parsecheck.RELATIONS)
    assert (frame.groupby("relation").size() == parsecheck.PER_RELATION).all()
    assert (frame["note"].str.strip() != "")[~frame["head_ok"] | ~frame["label_ok"]].all()  # every error explained
    for r in frame.itertuples():  # the words stored are the words at those indices
        words = r.sentence.split(" ")
        assert words[r.dep - 1] == r.dep_word and words[r.head - 1] == r.head_word


def test_readme_numbers_are_the_files():
    table = parsecheck.precision_table().set_index("relation")
    pooled = table.loc[parsecheck.ALL]
    text = (parsecheck.DEFAULT_PATH.parent / "README.md").read_text()
    found = re.search(r"Head precision ([\d.]+) % \((\d+) / (\d+), Wilson ([\d.]+)–([\d.]+)\), labelled "
                      r"([\d.]+) % \((\d+) / (\d+), ([\d.]+)–([\d.]+)\)", text.replace("\n", " "))
    assert found, "README.md lost its headline sentence"
    n, heads, labelled = int(pooled.n), int(pooled.head_ok), int(pooled.labelled_ok)
    expected = [f"{pooled.head_precision:.1f}", str(heads), str(n), f"{pooled.head_low:.1f}",
                f"{pooled.head_high:.1f}", f"{pooled.labelled_precision:.1f}", str(labelled),
                str(n), f"{pooled.labelled_low:.1f}", f"{pooled.labelled_high:.1f}"]
    assert list(found.groups()) == expected


@pytest.mark.slow
def test_the_code_draws_exactly_the_stored_sample():
    """From the cached parses (parsed first if the cache is cold: about a minute)."""
    assert parsecheck.read_sample() == parsecheck_sample.drawn()
