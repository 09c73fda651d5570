"""Bad input (issue 10): every kind gets a clear exception that says what to do, never a silent wrong number;
odd but valid input (punctuation only, other scripts) gives correct maps; properties of the statistics
that hold for any valid input.

Kept out of here because tests elsewhere cover them: empty / blank texts, pairs and word lists, and a
zero-width space (test_models); a folder without config.json or without tokenizer files, and a model that
returns no attentions (test_models); NaN and unnormalised maps in to_word_level, token_stats and
entropy_stats, unnormalised maps in js_distances and classify_map (the COVERED cells below).
"""
from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from bertlook_utils import load_encoder, syntax
from bertlook_utils.clustering import js_distances
from bertlook_utils.models import DEFAULT_NAME, Encoded
from bertlook_utils.patterns import classify_map
from bertlook_utils.surface import entropy_stats, token_stats, vig_scores
from bertlook_utils.wordlevel import FROM_MODES, to_word_level
from builders import PAIR_TOKENS, make_encoded, random_row_stochastic, save_tiny_model, uniform_map
from test_models import assert_valid_attention

N = len(PAIR_TOKENS)


def assert_valid_word_maps(enc) -> None:
    for mode in FROM_MODES:
        words = to_word_level(enc.attn, enc.word_ids, mode)
        assert words.shape[-1] == len(enc.words)
        np.testing.assert_allclose(words.sum(-1), 1, atol=1e-5)


# -- odd but valid text ------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("...!?",), ("?!", "-- ;"), (["...", "!", "\""],)], ids=["text", "pair", "words"])
def test_punctuation_only_is_valid_and_gives_row_stochastic_maps(encoder, args):
    enc = encoder.encode(*args)
    assert enc.tokens[1] in (".", "?") and len(enc.words) > 2
    assert_valid_attention(enc)
    assert_valid_word_maps(enc)
    stats = token_stats([enc]).join(entropy_stats([enc]), rsuffix="_")
    assert np.isfinite(stats.to_numpy(dtype=float)).all()


@pytest.mark.parametrize("text", ["Привет, мир.", "مرحبا بالعالم", "नमस्ते दुनिया", "你好世界", "Ein 🙂 Tag."],
                         ids=["cyrillic", "arabic", "devanagari", "chinese", "some-emoji"])
def test_other_scripts_encode_without_a_warning_when_some_words_are_known(encoder, text, recwarn):
    enc = encoder.encode(text)
    assert_valid_attention(enc)
    assert_valid_word_maps(enc)
    assert any(t != "[UNK]" for t in enc.tokens[1:-1])
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("args, which", [
    (("🙂 🎉",), "a"),
    ((["🙂", "🎉"],), "a"),
    (("ግዕዝ",), "a"),  # Ge'ez: not in the uncased WordPiece vocabulary
    (("A fine sentence.", "🙂🎉"), "b"),
], ids=["emoji", "emoji-words", "geez", "emoji-b"])
def test_a_text_of_only_unknown_tokens_warns_that_the_script_is_not_covered(encoder, args, which):
    message = (f"every word of text {which} is the unknown token '[UNK]': {DEFAULT_NAME}'s tokenizer does not "
               "cover this script or these symbols")
    with pytest.warns(UserWarning, match=re.escape(message)):
        enc = encoder.encode(*args)
    assert_valid_attention(enc)  # a warning, not an error: the maps are still correct maps of [UNK]s


# -- text the encoder must refuse ---------------------------------------------------------------------
@pytest.mark.parametrize("text", ["word " * 10_000, ["word"] * 10_000], ids=["text", "words"])
def test_a_10000_word_text_names_its_length_the_limit_and_what_to_do(encoder, text):
    message = (f"the input has 10002 tokens but {DEFAULT_NAME} accepts at most 512; "
               "shorten the text or split it into pieces")
    with pytest.raises(ValueError, match=re.escape(message)):
        encoder.encode(text)


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\ufeff", "\u200d", "\u0301"],
                         ids=["nul", "bell", "escape", "bom", "zero-width-joiner", "lone-combining-accent"])
def test_a_word_or_text_of_characters_the_tokenizer_drops_is_refused(encoder, char):
    end = f"gives no wordpieces with {DEFAULT_NAME}'s tokenizer; drop it or replace it before encoding"
    with pytest.raises(ValueError, match=re.escape(f"the word {char!r} {end}")):
        encoder.encode(["Fine", char, "words"])
    with pytest.raises(ValueError, match=re.escape(f"text b {char * 2!r} {end}")):
        encoder.encode("A fine text.", char * 2)


# -- attention maps that are not probabilities ------------------------------------------------------
def _word_level(attn):
    return syntax.ParsedAttention(attn, np.zeros(N - 2, dtype=int), ["root"] * (N - 2), PAIR_TOKENS[1:-1],
                                  [False] * (N - 2), "S#1")


ANALYSES = {
    "token_stats": lambda attn: token_stats([make_encoded(PAIR_TOKENS, attn)]),
    "entropy_stats": lambda attn: entropy_stats([make_encoded(PAIR_TOKENS, attn)]),
    "vig_scores": lambda attn: vig_scores([make_encoded(PAIR_TOKENS, attn)]),
    "js_distances": lambda attn: js_distances([make_encoded(PAIR_TOKENS, attn)]),
    "classify_map": lambda attn: classify_map(attn[1, 0], PAIR_TOKENS, [0] * 6 + [1] * 5),
    "ParsedAttention": _word_level,
    "to_word_level": lambda attn: to_word_level(attn, range(N)),
}


def _defect(kind: str) -> np.ndarray:
    """A [2, 2, N, N] map of uniform rows with one defect (none for "none") in row 2 of head (1, 0)."""
    attn = np.stack([np.stack([uniform_map(N)] * 2)] * 2)
    row = attn[1, 0, 2]
    if kind == "nan":
        row[3] = np.nan
    elif kind == "infinite":
        row[3] = np.inf
    elif kind == "negative":  # the row still sums to 1
        row[3], row[4] = -0.05, row[4] + row[3] + 0.05
    elif kind == "unnormalised":
        row *= 0.5
    return attn


DEFECTS = {"nan": "NaN or infinite", "infinite": "NaN or infinite", "negative": "negative weights",
           "unnormalised": "rows must sum to 1"}
COVERED = {("to_word_level", "nan"), ("to_word_level", "negative"), ("to_word_level", "unnormalised"),
           ("token_stats", "nan"), ("token_stats", "unnormalised"), ("entropy_stats", "nan"),
           ("entropy_stats", "unnormalised"), ("js_distances", "unnormalised"), ("classify_map", "unnormalised")}


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # vig_scores: no token recurs across the segments
@pytest.mark.parametrize("analysis, defect", [(a, d) for a in ANALYSES for d in DEFECTS if (a, d) not in COVERED])
def test_maps_that_are_not_probabilities_are_refused_by_every_analysis(analysis, defect):
    ANALYSES[analysis](_defect("none"))  # the map without its defect is accepted
    with pytest.raises(ValueError, match=DEFECTS[defect]):
        ANALYSES[analysis](_defect(defect))


def _short_segment_ids(enc):
    enc.segment_ids = enc.segment_ids[:3]
    return [enc]


@pytest.mark.parametrize("inputs, message", [
    (lambda enc: [enc, make_encoded(PAIR_TOKENS, uniform_map(N)[None, None])],
     "input 1 has 1 layers x 1 heads but input 0 has 2 x 3: give inputs encoded by one model"),
    (lambda enc: [Encoded([], [], [], [], np.zeros((2, 3, 0, 0), np.float32))], "input 0: an input has no tokens"),
    (_short_segment_ids, f"input 0: an input has {N} tokens but {N} word ids and 3 segment ids"),
    (lambda enc: [], "no inputs: give at least one Encoded input"),
], ids=["mixed-model-sizes", "no-tokens", "short-segment-ids", "none"])
@pytest.mark.parametrize("analysis", [token_stats, entropy_stats, vig_scores, js_distances],
                         ids=lambda f: f.__name__)
def test_inputs_that_disagree_with_each_other_or_themselves_are_refused(analysis, inputs, message):
    enc = make_encoded(PAIR_TOKENS, random_row_stochastic(np.random.default_rng(0), (2, 3, N, N)))
    with pytest.raises(ValueError, match=re.escape(message)):
        analysis(inputs(enc))


def test_vig_scores_checks_the_map_size_against_the_tokens():
    with pytest.raises(ValueError, match=re.escape(f"attn must be [layers, heads, {N}, {N}] for {N} tokens")):
        vig_scores([make_encoded(PAIR_TOKENS, uniform_map(N - 1))])


# -- ParsedAttention and the syntax tables --------------------------------------------------------------
def parsed(**changes):
    """A ParsedAttention of a 3-word sentence (heads 2 0 2), with `changes` applied to its arguments."""
    args = dict(word_attn=random_row_stochastic(np.random.default_rng(0), (1, 2, 5, 5)), heads=[2, 0, 2],
                relations=["det", "ROOT", "punct"], words=["The", "cat", "."], is_punct=[False, False, True],
                id="S#7")
    return syntax.ParsedAttention(**{**args, **changes})


@pytest.mark.parametrize("changes, message", [
    (dict(relations=["det", "ROOT"]), "got 3 heads, 2 relations, 3 words and 3 is_punct flags"),
    (dict(words=["The", "cat", ".", "!"]), "got 3 heads, 3 relations, 4 words and 3 is_punct flags"),
    (dict(is_punct=[False]), "got 3 heads, 3 relations, 3 words and 1 is_punct flags"),
    (dict(heads=[2, 0, 2, 1], relations=["a"] * 4, words=["w"] * 4, is_punct=[False] * 4),
     "word_attn must be [layers, heads, 6, 6] for 4 words plus [CLS] and [SEP], got (1, 2, 5, 5)"),
    (dict(heads=[2, 0, 4]), "heads must be 0 (ROOT) or a 1-based word index up to 3, got values from 0 to 4"),
    (dict(heads=[2, -1, 2]), "up to 3, got values from -1 to 2"),
    (dict(heads=[2.0, 0.0, 2.5]), "heads must be a flat list of integers"),
    (dict(heads=[[2, 0, 2]]), "heads must be a flat list of integers"),
    (dict(word_attn=np.zeros((2, 5, 5), np.float32)), "word_attn must be [layers, heads, 5, 5]"),
], ids=["relations-short", "words-long", "is-punct-short", "attn-narrower-than-heads", "head-beyond-n",
        "negative-head", "float-heads", "nested-heads", "three-dimensional-attn"])
def test_parsed_attention_names_the_sentence_and_the_mismatch(changes, message):
    with pytest.raises(ValueError, match=re.escape("sentence 'S#7': ") + ".*" + re.escape(message)):
        parsed(**changes)


def test_parsed_attention_accepts_nested_lists_of_weights():
    example = parsed(word_attn=np.full((1, 1, 5, 5), 0.2).tolist())
    assert example.word_attn.shape == (1, 1, 5, 5)


@pytest.mark.parametrize("call, error, message", [
    (lambda e: syntax.head_accuracy(e[0]), TypeError, "wrap a single sentence in a list"),
    (lambda e: syntax.head_accuracy([]), ValueError, "no examples to score"),
    (lambda e: syntax.head_accuracy(e, relations="det"), TypeError, "e.g. ['det'], not a string"),
    (lambda e: syntax.head_accuracy(e, relations=[]), ValueError, "relations is empty; pass None"),
    (lambda e: syntax.head_accuracy(e, n_boot=0), ValueError, "n_boot must be at least 1"),
    (lambda e: syntax.head_accuracy(e, relations=["nsubj"]), ValueError, "no dependent has the relation 'nsubj'"),
    (lambda e: syntax.offset_baseline(e, offsets=()), ValueError, "offsets is empty"),
    (lambda e: syntax.offset_baseline(e[0]), TypeError, "wrap a single sentence in a list"),
    (lambda e: syntax.offset_baseline(e, relations="det"), TypeError, "not a string"),
], ids=["single-example", "no-examples", "relation-string", "no-relations", "no-bootstrap", "unknown-relation",
        "no-offsets", "offsets-single-example", "offsets-relation-string"])
def test_syntax_tables_refuse_bad_arguments(call, error, message):
    examples = [parsed(), parsed(id="S#8")]
    with pytest.raises(error, match=re.escape(message)):
        call(examples)
    assert len(syntax.head_accuracy(examples, n_boot=10)) == 3  # all, det, punct: the same examples work


# -- model folders with missing or broken files --------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_folder(tokenizer, tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", tokenizer)


def _broken(folder, tmp_path, damage):
    copy = tmp_path / "broken"
    shutil.copytree(folder, copy)
    damage(copy)
    return copy


def _truncate(path):
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _foreign_weights(folder):
    from safetensors.torch import save_file

    save_file({"classifier.weight": torch.zeros(2, 32)}, str(folder / "model.safetensors"))


@pytest.mark.parametrize("damage, error, message", [
    (lambda f: (f / "model.safetensors").unlink(), FileNotFoundError,
     r"holds no weights \(model.safetensors or pytorch_model.bin\): save the model into it with "
     r"model.save_pretrained\(folder\) or download its weights"),
    (lambda f: (f / "config.json").write_text(""), ValueError,
     r"config.json cannot be read as a model configuration \(.*\); save the model again"),
    (lambda f: (f / "config.json").write_text('{"model_type": "bert", '), ValueError,
     r"config.json cannot be read as a model configuration \(.*\); save the model again"),
    (lambda f: (f / "config.json").write_text("[1, 2]"), ValueError,
     r"config.json cannot be read as a model configuration \(it is not a JSON object\)"),
    (lambda f: _truncate(f / "model.safetensors"), OSError,
     r"model.safetensors is truncated or corrupt \(\d+ bytes\); download it or save the model again"),
    (lambda f: (f / "model.safetensors").write_bytes(b""), OSError, r"is truncated or corrupt \(0 bytes\)"),
    (lambda f: ((f / "model.safetensors").rename(f / "pytorch_model.bin"), _truncate(f / "pytorch_model.bin")),
     OSError, r"pytorch_model.bin is truncated or corrupt"),
], ids=["no-weights", "empty-config", "corrupt-config", "config-not-an-object", "truncated-weights",
        "empty-weights", "truncated-bin"])
def test_a_broken_model_folder_is_refused_before_anything_loads(tiny_folder, tmp_path, monkeypatch, damage, error,
                                                                message):
    def never(*args, **kwargs):
        raise AssertionError("the folder should have been refused before transformers loads it")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", never)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", never)
    with pytest.raises(error, match=message):
        load_encoder(_broken(tiny_folder, tmp_path, damage))


def test_weights_of_another_architecture_are_refused_not_initialised_at_random(tiny_folder, tmp_path):
    """The tiny BERT has 39 weight tensors; the checkpoint holds none of them, and the 2 of the pooler are
    not needed."""
    with pytest.raises(ValueError, match=r"broken: 37 weights of the model are missing from its checkpoint "
                                         r"\(e.g. embeddings.*\), so they would be random"):
        load_encoder(_broken(tiny_folder, tmp_path, _foreign_weights))


def test_a_checkpoint_without_the_pooler_loads_and_gives_the_same_attention(tiny_folder, tmp_path, tokenizer):
    """Like roberta-base and ELECTRA checkpoints: the pooler plays no part in the attention."""
    from safetensors.torch import load_file, save_file

    def drop_pooler(folder):
        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.startswith("pooler.")}, str(folder / "model.safetensors"),
                  metadata={"format": "pt"})

    full, pooler_free = load_encoder(tiny_folder), load_encoder(_broken(tiny_folder, tmp_path, drop_pooler))
    np.testing.assert_array_equal(pooler_free.encode("A cat.").attn, full.encode("A cat.").attn)


# -- properties of the statistics over any valid input --------------------------------------------------
@st.composite
def encoded_inputs(draw):
    """An Encoded of [CLS] a [SEP] (b [SEP]) with random tokens (some "." and ","), 1-2 layers x 1-3 heads of
    random, one-hot or sparse rows."""
    vocab = st.sampled_from(["the", "cat", ".", ",", "!"])
    a = draw(st.lists(vocab, min_size=1, max_size=6))
    b = draw(st.lists(vocab, max_size=4))
    tokens = ["[CLS]", *a, "[SEP]"] + ([*b, "[SEP]"] if b else [])
    n = len(tokens)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), n, n)
    kind = draw(st.sampled_from(["dense", "one-hot", "sparse"]))
    if kind == "dense":
        attn = random_row_stochastic(rng, shape)
    elif kind == "one-hot":
        attn = np.eye(n, dtype=np.float32)[rng.integers(0, n, size=shape[:-1])]
    else:
        raw = rng.random(shape) * (rng.random(shape) < 0.3)
        raw[..., 0] += 1e-3  # every row keeps some mass
        attn = (raw / raw.sum(-1, keepdims=True)).astype(np.float32)
    return make_encoded(tokens, attn)


@settings(max_examples=40)
@given(encoded_inputs())
def test_token_stats_are_shares_of_each_rows_mass(enc):
    stats = token_stats([enc])
    n = enc.n_tokens
    columns = stats.drop(columns=["layer", "head"])
    assert ((columns >= -1e-6) & (columns <= 1 + 1e-6)).all().all()
    # self, prev and next are different columns of each row; prev and next average over the n-1 rows that have
    # such a neighbour, so n·self + (n-1)·(prev + next) <= n (self + prev + next itself can reach 2 when n = 2)
    assert (stats["self"] + (n - 1) / n * (stats["prev"] + stats["next"]) <= 1 + 1e-5).all()
    assert (stats["cls"] + stats["sep"] + stats["punct"] <= 1 + 1e-5).all()  # disjoint targets, every row
    n_sep = int(enc.is_sep.sum())
    np.testing.assert_allclose(stats["sep"], (n_sep * stats["sep_sep"] + (n - n_sep) * stats["rest_sep"]) / n,
                               atol=1e-5)


@settings(max_examples=40)
@given(encoded_inputs())
def test_entropy_lies_between_zero_and_log_n(enc):
    stats = entropy_stats([enc])
    log_n = math.log(enc.n_tokens)
    for column in ("entropy", "cls_entropy"):
        assert ((stats[column] >= 0) & (stats[column] <= log_n + 1e-5)).all()
    np.testing.assert_allclose(stats["uniform"], log_n)
    assert ((stats["max_weight"] >= 1 / enc.n_tokens - 1e-6) & (stats["max_weight"] <= 1 + 1e-6)).all()
