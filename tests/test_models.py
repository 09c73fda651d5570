"""models: tokens, word alignment and attention of the real default encoder; loading and bad input."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from builders import TINY_MAX_POSITIONS, save_tiny_model

from bertlook_utils import Encoded, load_encoder
from bertlook_utils import models
from bertlook_utils.models import DEFAULT_SHA256, Encoder

PAIR_A, PAIR_B = "The cat sat unbelievably still.", "It ran, quickly."
PAIR_TOKENS = ["[CLS]", "the", "cat", "sat", "un", "##bel", "##ie", "##va", "##bly", "still", ".", "[SEP]",
               "it", "ran", ",", "quickly", ".", "[SEP]"]
PAIR_WORDS = ["[CLS]", "The", "cat", "sat", "unbelievably", "still", ".", "[SEP]",
              "It", "ran", ",", "quickly", ".", "[SEP]"]
PAIR_WORD_IDS = [0, 1, 2, 3, 4, 4, 4, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]


@pytest.fixture(scope="module")
def pair(encoder):
    return encoder.encode(PAIR_A, PAIR_B)


def assert_valid_attention(enc: Encoded, n_layers: int = 6, n_heads: int = 12) -> None:
    n = len(enc.tokens)
    assert isinstance(enc.attn, np.ndarray)
    assert enc.attn.dtype == np.float32
    assert enc.attn.shape == (n_layers, n_heads, n, n)
    assert np.isfinite(enc.attn).all() and enc.attn.min() >= 0
    np.testing.assert_allclose(enc.attn.sum(-1), 1.0, atol=1e-5)


# -- the default encoder -----------------------------------------------------------------------------
def test_default_encoder_geometry_and_identity(encoder):
    assert encoder.name == "all-MiniLM-L6-v2"
    assert (encoder.n_layers, encoder.n_heads) == (6, 12)
    assert encoder.weights_sha256 == DEFAULT_SHA256
    assert encoder.max_tokens == 512
    assert not encoder.model.training
    assert (encoder.cls_token, encoder.sep_token) == ("[CLS]", "[SEP]")
    assert "6 layers x 12 heads" in repr(encoder)


def test_pair_tokens_start_with_cls_and_end_with_sep(pair):
    assert pair.tokens == PAIR_TOKENS
    assert pair.tokens[0] == "[CLS]" and pair.tokens.count("[SEP]") == 2 and pair.tokens[-1] == "[SEP]"


def test_pair_word_ids_number_words_across_both_segments(pair):
    assert pair.word_ids == PAIR_WORD_IDS
    assert pair.word_ids[0] == 0  # [CLS] is word 0
    sep_positions = [i for i, t in enumerate(pair.tokens) if t == "[SEP]"]
    for pos in sep_positions:  # every [SEP] is a word of its own
        assert pair.word_ids.count(pair.word_ids[pos]) == 1
        assert pair.words[pair.word_ids[pos]] == "[SEP]"
    assert pair.word_ids[sep_positions[0] + 1] == pair.word_ids[sep_positions[0]] + 1  # B continues the count


def test_split_word_is_one_word_with_its_full_original_text(pair):
    assert pair.words == PAIR_WORDS
    pieces = [t for t, w in zip(pair.tokens, pair.word_ids) if w == 4]
    assert pieces == ["un", "##bel", "##ie", "##va", "##bly"]
    assert pair.words[4] == "unbelievably"


def test_pair_segment_ids_are_0_through_the_first_sep_then_1(pair, tokenizer):
    assert pair.segment_ids == [0] * 12 + [1] * 6
    assert pair.segment_ids == tokenizer(PAIR_A, PAIR_B)["token_type_ids"]


def test_pair_attention_is_layers_by_heads_of_row_stochastic_maps(pair):
    assert_valid_attention(pair)


def test_encoded_flags_cls_and_sep(pair):
    assert pair.n_tokens == len(PAIR_TOKENS)
    np.testing.assert_array_equal(pair.is_cls, [t == "[CLS]" for t in PAIR_TOKENS])
    np.testing.assert_array_equal(pair.is_sep, [t == "[SEP]" for t in PAIR_TOKENS])


def test_word_text_comes_from_the_original_string(encoder):
    enc = encoder.encode("  Théorie du   CORPS, unbelievably! ")
    assert enc.tokens[:3] == ["[CLS]", "theo", "##rie"]  # lower-cased, accents stripped by the tokenizer
    assert enc.words == ["[CLS]", "Théorie", "du", "CORPS", ",", "unbelievably", "!", "[SEP]"]
    assert enc.segment_ids == [0] * len(enc.tokens)
    assert enc.tokens.count("[SEP]") == 1 and enc.tokens[-1] == "[SEP]"


def test_pre_split_word_lists(encoder):
    enc = encoder.encode(["The", "unbelievably", "tall"], ["man", "."])
    assert enc.tokens == ["[CLS]", "the", "un", "##bel", "##ie", "##va", "##bly", "tall", "[SEP]", "man", ".",
                          "[SEP]"]
    assert enc.words == ["[CLS]", "The", "unbelievably", "tall", "[SEP]", "man", ".", "[SEP]"]
    assert enc.word_ids == [0, 1, 2, 2, 2, 2, 2, 3, 4, 5, 6, 7]
    assert enc.segment_ids == [0] * 9 + [1] * 3
    assert_valid_attention(enc)


def test_pre_split_words_keep_their_given_text(encoder):
    """A pre-split word the tokenizer would split further (here at the hyphen) stays one word."""
    enc = encoder.encode(["state-of-the-art", "Models"])
    assert enc.words == ["[CLS]", "state-of-the-art", "Models", "[SEP]"]
    assert enc.word_ids[-2] == 2 and set(enc.word_ids[1:-2]) == {1}


def test_pre_split_and_string_give_the_same_attention_when_the_words_agree(encoder, pair):
    enc = encoder.encode(PAIR_WORDS[1:7], PAIR_WORDS[8:13])
    assert enc.tokens == pair.tokens and enc.word_ids == pair.word_ids and enc.words == pair.words
    np.testing.assert_allclose(enc.attn, pair.attn, atol=1e-6)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, error, message", [
    (("",), ValueError, "empty"),
    (("   \n\t",), ValueError, "blank"),
    (([],), ValueError, "non-empty"),
    (("fine", ""), ValueError, "empty"),
    ((["fine", "  "],), ValueError, "blank word"),
    ((["fine", 3],), ValueError, "word strings"),
    (("a string", ["a", "list"]), TypeError, "both"),
    ((["a", "list"], "a string"), TypeError, "both"),
    ((["fine", "\u200b"],), ValueError, "no wordpieces"),
], ids=["empty", "blank", "empty-list", "empty-b", "blank-word", "non-string-word", "str-then-list",
        "list-then-str", "word-without-wordpieces"])
def test_bad_text_is_rejected_with_a_helpful_message(encoder, args, error, message):
    with pytest.raises(error, match=message):
        encoder.encode(*args)


@pytest.mark.parametrize("args", [("\u200b",), ("A real sentence.", "\u200b\u200b")],
                         ids=["a", "b"])
def test_a_string_that_gives_no_wordpieces_is_rejected(encoder, args):
    """A text of only zero-width spaces is not blank to str.strip() but the tokenizer drops every
    character: encoding it must fail (SPEC §6: empty text gets a clear error, never a silent result)."""
    with pytest.raises(ValueError):
        encoder.encode(*args)


def test_an_input_longer_than_512_tokens_is_rejected(encoder):
    with pytest.raises(ValueError, match="512"):
        encoder.encode("word " * 600)


def test_a_pair_too_long_together_is_rejected(encoder):
    """Each text fits alone; together (300 + 300 words + [CLS] and two [SEP]) they do not."""
    encoder.encode("word " * 300)
    with pytest.raises(ValueError, match=r"the input has 603 tokens but .* at most 512; .*split it into pieces"):
        encoder.encode("word " * 300, "word " * 300)


def test_an_input_of_exactly_512_tokens_is_accepted(encoder):
    enc = encoder.encode(["word"] * 510)
    assert len(enc.tokens) == 512
    assert enc.attn.shape[-1] == 512


def test_a_model_without_attentions_is_an_error(encoder, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(encoder.model, "forward", lambda *args, **kwargs: SimpleNamespace(attentions=None))
        with pytest.raises(RuntimeError, match="attention"):
            encoder.encode("Hello there.")
    assert_valid_attention(encoder.encode("Hello there."))  # the shared encoder works again


def test_a_model_returning_empty_attention_slots_is_an_error(encoder, monkeypatch):
    """What an SDPA/flash model does with output_attentions: one None per layer."""
    monkeypatch.setattr(encoder.model, "forward",
                        lambda *args, **kwargs: SimpleNamespace(attentions=(None,) * 6))
    with pytest.raises(RuntimeError, match="attention"):
        encoder.encode("Hello there.")


def test_a_tokenizer_without_cls_and_sep_is_rejected(encoder):
    tokenizer = SimpleNamespace(cls_token=None, sep_token=None, model_input_names=["input_ids"])
    with pytest.raises(ValueError, match="cls_token"):
        Encoder("no-specials", encoder.model, tokenizer, "f" * 64, 512)


# -- loading -----------------------------------------------------------------------------------------
def test_an_uncached_hub_name_fails_fast_offline_with_a_helpful_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(OSError) as info:
        load_encoder("some-hub-name-not-cached")
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert "some-hub-name-not-cached" in message
    assert "load_encoder()" in message
    assert "local folder" in message


def test_a_folder_without_config_is_rejected(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_encoder(tmp_path)


def test_a_missing_local_path_is_rejected(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_encoder(tmp_path / "nothing-here")


def test_the_default_model_is_checked_against_its_sha256(monkeypatch):
    monkeypatch.setattr(models, "DEFAULT_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        load_encoder()


def test_the_default_weights_match_the_published_sha256():
    path = models.default_model_path() / "model.safetensors"
    assert models.file_sha256(path) == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


# -- a locally saved tiny random model (builders: save_tiny_model; conftest: tiny_folder, tiny) ---------


def test_a_local_folder_loads_with_its_own_geometry(tiny, tiny_folder):
    assert (tiny.n_layers, tiny.n_heads) == (2, 4)
    assert tiny.name == tiny_folder.name
    assert tiny.max_tokens == TINY_MAX_POSITIONS
    assert len(tiny.fingerprint) == 64 and tiny.weights_sha256 == models.file_sha256(tiny_folder / "model.safetensors")
    assert not tiny.model.training


def test_a_local_model_encodes_like_the_default_tokenizer(tiny, pair):
    enc = tiny.encode(PAIR_A, PAIR_B)
    assert enc.tokens == pair.tokens and enc.word_ids == pair.word_ids and enc.words == pair.words
    assert enc.segment_ids == pair.segment_ids
    assert_valid_attention(enc, n_layers=2, n_heads=4)


def test_a_local_models_position_limit_is_enforced(tiny):
    with pytest.raises(ValueError, match=str(TINY_MAX_POSITIONS)):
        tiny.encode(["word"] * 70)


def test_the_fingerprint_follows_the_weights(tiny, tokenizer, tmp_path):
    other = load_encoder(save_tiny_model(tmp_path / "other", tokenizer, seed=1))
    assert other.fingerprint != tiny.fingerprint


def test_a_model_folder_without_tokenizer_files_is_rejected(tmp_path):
    """config.json and weights but no vocab.txt / tokenizer.json: loading must fail rather than give a
    tokenizer that turns every word into [UNK]."""
    folder = save_tiny_model(tmp_path / "no-tokenizer")
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        load_encoder(folder)


# -- batches: the one padding routine ------------------------------------------------------------------
def test_pad_pads_on_the_right_and_marks_the_real_tokens(encoder):
    prepared = [encoder.prepare("The cat sat on the mat."), encoder.prepare("Hi.", "Bye.")]
    inputs = encoder.pad(prepared)
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids"}  # BERT reads segments
    n = [len(p.input_ids) for p in prepared]
    assert inputs["input_ids"].shape == (2, max(n))
    assert inputs["attention_mask"].sum(1).tolist() == n
    assert inputs["input_ids"][1, :n[1]].tolist() == prepared[1].input_ids
    assert (inputs["input_ids"][1, n[1]:] == encoder.tokenizer.pad_token_id).all()
    assert inputs["token_type_ids"][1, :n[1]].tolist() == prepared[1].token_type_ids
    with pytest.raises(ValueError, match="empty batch"):
        encoder.pad([])


def test_batches_keep_the_order_and_can_skip_the_forward_pass(encoder):
    items = ["one", ("two", "three"), "four five six"]
    got = list(encoder.batches(items, batch_size=2, attention=False))
    assert [len(prepared) for prepared, _, _ in got] == [2, 1] and all(attn is None for _, _, attn in got)
    assert got[0][0][1].segment_ids[-1] == 1  # the pair is the second input of the first batch
    (_, _, attn), = list(encoder.batches(items[:1], batch_size=4))
    assert attn.shape[:3] == (1, encoder.n_layers, encoder.n_heads)
    with pytest.raises(ValueError, match="batch_size"):
        next(encoder.batches(items, batch_size=0))


def batch_sizes(encoder, lengths, batch_size) -> list[int]:
    """The sizes of the batches `Encoder.batches` makes of texts of the given numbers of tokens, after checking that
    they hold every input in order."""
    items = [" ".join(["the"] * (n - 2)) for n in lengths]  # n tokens with [CLS] and [SEP]
    got = list(encoder.batches(items, batch_size, attention=False))
    assert [len(p.input_ids) for prepared, _, _ in got for p in prepared] == list(lengths)
    return [len(prepared) for prepared, _, _ in got]


def test_batches_hold_at_most_batch_size_times_128_padded_tokens(encoder):
    assert batch_sizes(encoder, [512] * 20, 32) == [8, 8, 4]  # 32 * 128 tokens: 8 inputs of 512
    assert batch_sizes(encoder, [200, 200, 300, 10, 10, 512, 60], 4) == [2, 1, 2, 1, 1]  # 512 tokens, or one input
    assert batch_sizes(encoder, [128] * 9 + [5], 4) == [4, 4, 2]  # inputs of up to 128 tokens: by count, as before


def test_budgeted_batches_give_the_maps_of_one_input_at_a_time(encoder):
    items = ["The cat sat on the mat.", " ".join(["the"] * 298), ("A short pair.", "Its second half."), "Hi."]
    assert [len(p) for p, _, _ in encoder.batches(items, 2, attention=False)] == [1, 1, 2]  # 300 tokens: alone
    for got, item in zip(encoder.encode_many(items, batch_size=2), items, strict=True):
        expected = encoder.encode(*item) if isinstance(item, tuple) else encoder.encode(item)
        assert got.tokens == expected.tokens
        np.testing.assert_allclose(got.attn, expected.attn, atol=1e-5, rtol=0)


def test_attention_equals_the_models_own_maps(encoder):
    import torch

    inputs = encoder.pad([encoder.prepare("The cat sat on the mat."), encoder.prepare("Hi.", "Bye.")])
    with torch.inference_mode():
        expected = torch.stack(encoder.model(**inputs, output_attentions=True).attentions, dim=1)
    assert torch.equal(encoder.attention(inputs), expected)


def test_prepare_cuts_an_input_as_the_tokenizer_does(encoder):
    a, b = "one two three " * 40, "four five " * 40
    cut = encoder.prepare(a, b, max_tokens=64)
    assert len(cut.input_ids) == 64 and cut.tokens[-1] == encoder.sep_token
    assert cut.input_ids == encoder.tokenizer(a, b, truncation=True, max_length=64)["input_ids"]
    assert cut.segment_ids.count(1) > 0 and max(cut.word_ids) + 1 == len(cut.words)


def test_a_copy_has_its_own_weights_and_its_fingerprint_follows_them(tiny):
    import torch

    copy = tiny.copy()
    assert (copy.name, copy.fingerprint, copy.folder, copy.tokenizer) == (tiny.name, tiny.fingerprint, tiny.folder,
                                                                          tiny.tokenizer)
    with torch.no_grad():
        next(copy.model.parameters()).add_(1.0)
    assert not torch.equal(next(copy.model.parameters()), next(tiny.model.parameters()))
    assert copy.fingerprint != tiny.fingerprint


def test_the_loaded_folder_is_kept_and_default_names_the_embedded_model(tiny, tiny_folder):
    assert tiny.folder == tiny_folder
    assert [models.model_name(m) for m in (None, "", " ", "default", "bert-base-uncased")] == \
        [None, None, None, None, "bert-base-uncased"]


def test_the_forward_pass_is_bit_for_bit_the_same_on_any_thread_count(encoder, segments):
    """Why the notebooks' checked outputs hold on a laptop with more cores: PyTorch splits the model's matrix products
    across threads without changing any sum's order, so 1, 2, 4 and 8 threads give identical attention and hidden
    states (measured under the default, AVX2 and AVX-512 kernels). Training, whose sums do move, runs on a fixed
    count (core/threads.py)."""
    inputs = encoder.tokenizer([s.a for s in segments[:4]], [s.b for s in segments[:4]], padding=True,
                               truncation=True, max_length=96, return_tensors="pt")
    outer, runs = torch.get_num_threads(), []
    try:
        for threads in (1, 2, 4, 8):
            torch.set_num_threads(threads)
            with torch.no_grad():
                out = encoder.model(**inputs, output_attentions=True, output_hidden_states=True)
            runs.append([*out.attentions, *out.hidden_states])
    finally:
        torch.set_num_threads(outer)
    assert all(torch.equal(a, b) for run in runs[1:] for a, b in zip(runs[0], run))
