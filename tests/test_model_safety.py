"""models (issue 29, items 2, 4 and 10): no code from a model folder, no decoder taken for an encoder, and a clear
error for inputs of the wrong type or shape: a pair passed as one tuple, a tuple that is no pair, None or a number
as a text or a model, a lone surrogate, a max_tokens that cannot cut an input.
"""
from __future__ import annotations

import builtins
import json
import re
import shutil

import pytest
import torch
import transformers

from bertlook_utils import load_encoder

TEXT_A, TEXT_B = "The cat sat on the mat.", "It purred."


# -- no code from a model folder ------------------------------------------------------------------------
EVIL_CODE = """\
from pathlib import Path

Path({marker!r}).write_text("the folder's code ran")

from transformers import BertConfig, BertModel, BertTokenizerFast


class EvilConfig(BertConfig):
    model_type = "evil"


class EvilModel(BertModel):
    config_class = EvilConfig


class EvilTokenizer(BertTokenizerFast):
    pass
"""
CUSTOM_CODE = {  # what each settings file gets to ask for the folder's code
    "config.json": {"model_type": "evil", "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}},
    "tokenizer_config.json": {"auto_map": {"AutoTokenizer": [None, "evil.EvilTokenizer"]}}}


@pytest.mark.parametrize("settings", list(CUSTOM_CODE))
def test_a_folder_asking_to_run_its_own_code_is_refused_without_a_prompt(tiny_folder, tmp_path, monkeypatch,
                                                                         settings):
    """The folder's module writes a marker file when imported. For a model type transformers does not know, it
    asks [y/N] (answered y here) and runs the module; a tokenizer's auto_map beside a known model type is not
    followed today, but the folder asks for it all the same."""
    folder, marker = tmp_path / "custom-code", tmp_path / "marker"
    shutil.copytree(tiny_folder, folder)
    (folder / "evil.py").write_text(EVIL_CODE.format(marker=str(marker)))
    path = folder / settings
    path.write_text(json.dumps({**json.loads(path.read_text()), **CUSTOM_CODE[settings]}))
    prompts = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "y")
    with pytest.raises(ValueError, match=rf"{settings} has an auto_map .*: the folder asks to run its own Python "
                                         r"code, and BERTLook never runs code from a model folder"):
        load_encoder(folder)
    assert not marker.exists() and prompts == []


def test_transformers_is_told_never_to_run_code_from_a_folder(tiny_folder, monkeypatch):
    calls = {}
    for auto in (transformers.AutoTokenizer, transformers.AutoModel):
        def spy(*args, _auto=auto, _load=auto.from_pretrained, **kwargs):
            calls[_auto.__name__] = kwargs.get("trust_remote_code")
            return _load(*args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", spy)
    load_encoder(tiny_folder)
    assert calls == {"AutoTokenizer": False, "AutoModel": False}


# -- decoders are not encoders --------------------------------------------------------------------------
def test_a_config_marked_is_decoder_is_refused_before_loading(tokenizer, tmp_path, monkeypatch):
    from transformers import BertConfig, BertModel

    folder = tmp_path / "bert-decoder"
    BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                         max_position_embeddings=64, is_decoder=True)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    def never(*args, **kwargs):
        raise AssertionError("the folder should have been refused before transformers loads it")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", never)
    with pytest.raises(ValueError, match=r"config.json sets is_decoder: true, .*causal attention\); BERTLook "
                                         r"analyses bidirectional encoders"):
        load_encoder(folder)


def test_a_decoder_saved_with_a_bert_tokenizer_is_refused_by_its_causal_attention(tokenizer, tmp_path):
    """GPT-2's config says nothing of causality: its attention, on the check's forward pass, does."""
    from transformers import GPT2Config, GPT2Model

    folder = tmp_path / "gpt2-with-bert-tokenizer"
    torch.manual_seed(0)
    GPT2Model(GPT2Config(vocab_size=tokenizer.vocab_size, n_embd=32, n_layer=2, n_head=4,
                         n_positions=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"gpt2-with-bert-tokenizer's attention is causal: .* no token attends to a "
                                         r"later one in any head of any layer \(a decoder; its model type is 'gpt2'\); "
                                         r"BERTLook analyses bidirectional encoders"):
        load_encoder(folder)


def test_the_bidirectional_check_passes_the_default_model_and_a_random_bert(encoder, tiny):
    from bertlook_utils.core.models import _check_bidirectional

    for model in (encoder, tiny):
        _check_bidirectional(model)
        assert (model.encode(TEXT_A).attn[..., 0, 1:].sum(-1) > 0).all()  # [CLS] attends to later tokens


# -- inputs of the wrong type or shape ------------------------------------------------------------------
def test_a_pair_passed_as_one_tuple_is_read_as_the_pair_like_encode_many_does(encoder):
    together, apart = encoder.encode((TEXT_A, TEXT_B)), encoder.encode(TEXT_A, TEXT_B)
    (many,) = encoder.encode_many([(TEXT_A, TEXT_B)])
    for enc in (together, many):
        assert enc.tokens == apart.tokens and enc.segment_ids == apart.segment_ids
        torch.testing.assert_close(torch.from_numpy(enc.attn), torch.from_numpy(apart.attn))
    assert encoder.encode(["The", "cat"]).tokens == encoder.encode("The cat").tokens  # a list stays one text


@pytest.mark.parametrize("item", [("The cat.",), ("The", "cat", "sat")], ids=["1-tuple", "3-tuple"])
@pytest.mark.parametrize("entry", ["encode_many", "batches", "encode"])
def test_a_tuple_that_is_not_a_pair_names_the_item(encoder, item, entry):
    call = {"encode_many": lambda: list(encoder.encode_many([item])),
            "batches": lambda: list(encoder.batches([item], attention=False)),
            "encode": lambda: encoder.encode(item)}[entry]
    with pytest.raises(ValueError, match=re.escape(f"the item {item!r} is a tuple of {len(item)}: an item is a text "
                                                   "or an (a, b) pair; give pre-split words as a list")):
        call()


@pytest.mark.parametrize("args, which, kind", [
    ((None,), "a", "NoneType"), ((123,), "a", "int"), ((4.5,), "a", "float"), ((b"The cat",), "a", "bytes"),
    (("The cat", 123), "b", "int"),
], ids=["None", "int", "float", "bytes", "int-b"])
def test_a_text_of_the_wrong_type_names_the_argument_and_the_accepted_types(encoder, args, which, kind):
    with pytest.raises(TypeError, match=rf"^text {which} must be a string or a list of word strings, not {kind}$"):
        encoder.encode(*args)


@pytest.mark.parametrize("value, kind", [(123, "int"), (1.5, "float"), ([], "list")])
def test_a_model_of_the_wrong_type_names_the_argument_and_the_accepted_types(value, kind):
    with pytest.raises(TypeError, match=rf"name_or_path must be None \(the embedded default\), a Hugging Face model "
                                        rf"name or a folder \(str or os.PathLike\), not {kind}"):
        load_encoder(value)


@pytest.mark.parametrize("args, what", [
    (("The cat \ud800 sat.",), "text a"), ((TEXT_A, "It \udfff purred."), "text b"),
    ((["The", "c\ud800t"],), r"the word 'c\\ud800t' of text a"),
], ids=["text-a", "text-b", "word"])
def test_a_lone_surrogate_is_refused_naming_the_text(encoder, args, what):
    with pytest.raises(ValueError, match=rf"^{what} contains a lone surrogate .*; it is not valid Unicode"):
        encoder.encode(*args)


def _least_max_tokens(encoder, *texts) -> int:
    """The smallest max_tokens that `prepare` accepts for `texts`."""
    for max_tokens in range(16):
        try:
            encoder.prepare(*texts, max_tokens=max_tokens)
            return max_tokens
        except ValueError:
            continue
    raise AssertionError("no max_tokens below 16 is accepted")


@pytest.mark.parametrize("texts", [(TEXT_A,), (TEXT_A, TEXT_B)], ids=["text", "pair"])
def test_the_least_max_tokens_is_the_least_that_keeps_a_token_of_every_text(encoder, texts):
    """Below it the tokenizer returns the input uncut or drops a text of the pair; at it, each text keeps one token."""
    least = _least_max_tokens(encoder, *texts)
    cut = encoder.prepare(*texts, max_tokens=least)
    specials = (encoder.cls_token, encoder.sep_token)
    kept = [sum(seg == s and token not in specials for seg, token in zip(cut.segment_ids, cut.tokens))
            for s in range(len(texts))]
    assert len(cut.input_ids) == least and kept == [1] * len(texts)
    below = encoder.tokenizer(*texts, truncation=True, max_length=least - 1)
    whole = encoder.tokenizer(*texts)["input_ids"]
    assert below["input_ids"] == whole or set(below.sequence_ids()) != {None, *range(len(texts))}
    for bad in (least - 1, 0, -1):
        with pytest.raises(ValueError, match=rf"^max_tokens={bad} is too small: a cut .*; give at least {least}"):
            encoder.prepare(*texts, max_tokens=bad)
    with pytest.raises(ValueError, match=rf"give at least {least}"):
        next(encoder.batches([texts if len(texts) == 2 else texts[0]], attention=False, max_tokens=least - 1))


@pytest.mark.parametrize("value, kind", [(3.0, "float"), ("64", "str"), (True, "bool")])
def test_a_max_tokens_that_is_not_an_int_is_refused(encoder, value, kind):
    with pytest.raises(TypeError, match=rf"^max_tokens must be an int or None, not {kind}$"):
        encoder.prepare(TEXT_A, max_tokens=value)
