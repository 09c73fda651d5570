"""The cache knows what actually ran: the model part of a key follows the configuration, the tokenizer and the
weights as they are in memory, and nothing computed under an attention edit is read from or written to the cache
(issue 29, item 1: each of these returned the original model's cached numbers before)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import shutil
import warnings

import numpy as np
import pytest
import torch

from bertlook_utils import intervene, load_encoder, surface
from bertlook_utils.core.fingerprints import config_fingerprint, tokenizer_fingerprint, weights_fingerprint

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "She said that he would come back.",
         "Attention is what the model looks at."]


def entropies(encoder, cache_dir) -> np.ndarray:
    """Mean row entropy per head, [L * H], through the cached streaming pass."""
    return surface.analyse(encoder, TEXTS, n_examples=0, cache_dir=cache_dir, progress=False
                           ).entropy["entropy"].to_numpy()


def entries(cache_dir) -> set[str]:
    return {p.name for p in cache_dir.glob("*.npz")}


@pytest.fixture
def tiny_copy_folder(tiny_folder, tmp_path):
    """A copy of the tiny model's folder, to edit its config or tokenizer."""
    return shutil.copytree(tiny_folder, tmp_path / "edited")


def test_the_same_weights_under_another_config_are_not_served_the_cached_rows(tiny, tiny_copy_folder, tmp_path):
    cache = tmp_path / "cache"
    entropies(tiny, cache)
    config = json.loads((tiny_copy_folder / "config.json").read_text())
    config["num_attention_heads"] = 2  # same weights, read as 2 heads of 16 dimensions instead of 4 of 8
    (tiny_copy_folder / "config.json").write_text(json.dumps(config))
    other = load_encoder(tiny_copy_folder)
    got = entropies(other, cache)
    assert got.shape == (other.n_layers * 2,)
    np.testing.assert_allclose(got, entropies(other, None), rtol=1e-9)


@pytest.mark.filterwarnings("ignore:every word of text a is the unknown token")
def test_a_tokenizer_that_splits_otherwise_is_not_served_the_cached_numbers(tiny, tiny_copy_folder, tmp_path):
    cache = tmp_path / "cache"
    base = entropies(tiny, cache)
    for name, setting in (("tokenizer.json", "normalizer"), ("tokenizer_config.json", None)):
        spec = json.loads((tiny_copy_folder / name).read_text())  # a cased reading of the same vocabulary
        if setting:
            spec[setting]["lowercase"] = False
        else:
            spec["do_lower_case"] = False
        (tiny_copy_folder / name).write_text(json.dumps(spec))
    cased = load_encoder(tiny_copy_folder)
    assert cased.encode("Paris").tokens != tiny.encode("Paris").tokens
    true = entropies(cased, None)
    assert not np.allclose(true, base, rtol=0, atol=1e-9)
    np.testing.assert_allclose(entropies(cased, cache), true, rtol=1e-9)


def test_an_edited_copy_gets_its_own_numbers_not_the_originals(tiny, tmp_path):
    cache = tmp_path / "cache"
    base = entropies(tiny, cache)
    edited = tiny.copy()
    assert edited.fingerprint == tiny.fingerprint  # same weights so far: same numbers, same key
    with torch.no_grad():
        edited.model.encoder.layer[0].attention.self.query.weight.mul_(5)
    assert edited.fingerprint != tiny.fingerprint
    true = entropies(edited, None)
    assert not np.allclose(true, base, rtol=0, atol=1e-9)
    np.testing.assert_allclose(entropies(edited, cache), true, rtol=1e-9)
    np.testing.assert_allclose(entropies(tiny, cache), base)  # the original keeps its own entries


def test_an_analysis_inside_an_attention_edit_is_computed_afresh_and_not_cached(tiny, tmp_path):
    cache = tmp_path / "cache"
    base = entropies(tiny, cache)
    before = entries(cache)
    with intervene.edit_attention(tiny.model, intervene.uniform_head(0)):
        true = entropies(tiny, None)
        with pytest.warns(UserWarning, match="no cache key names"):
            got = entropies(tiny, cache)
    assert not np.allclose(true, base, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got, true, rtol=1e-9)
    assert entries(cache) == before  # nothing written under the unedited model's key
    np.testing.assert_allclose(entropies(tiny, cache), base, rtol=1e-9)


def _scale_output(module, args, output):  # a foreign hook that changes what the layer hands on
    return output * 1.5 if isinstance(output, torch.Tensor) else output


@pytest.mark.parametrize("state", ["set_hidden", "foreign hook", "global hook", "backward hook", "train mode"])
def test_a_model_in_a_state_no_key_names_is_computed_afresh_and_never_cached(tiny, tmp_path, state):
    """Review reliability-4, problem 1: a hook or training mode poisoned the cache for every later plain call."""
    from bertlook_utils.analyses.sinks import massive

    cache = tmp_path / "cache"
    base = entropies(tiny, cache)
    before = entries(cache)
    fresh = tmp_path / "fresh"  # a cache that has never seen this model: nothing to read, so a write would show
    with contextlib.ExitStack() as stack:
        if state == "set_hidden":
            stack.enter_context(massive.set_hidden(tiny.model, 1, [0], [1], [5], [500.0]))
        elif state == "foreign hook":
            stack.callback(tiny.model.encoder.layer[0].attention.self.query.register_forward_hook(_scale_output).remove)
        elif state == "global hook":
            stack.callback(torch.nn.modules.module.register_module_forward_hook(_scale_output).remove)
        elif state == "backward hook":
            stack.callback(tiny.model.encoder.layer[0].register_full_backward_hook(lambda *args: None).remove)
        else:
            tiny.model.train()
            stack.callback(tiny.model.eval)
        with pytest.warns(UserWarning, match="no cache key names") as caught:
            got = entropies(tiny, cache)
            entropies(tiny, fresh)
    assert any(word in str(caught[0].message) for word in ("hook", "training mode"))
    if state != "backward hook":  # a backward hook changes nothing in a forward pass, but no key can say so
        assert not np.allclose(got, base, rtol=0, atol=1e-9)  # the edited numbers, not the cached ones
    assert entries(cache) == before and not entries(fresh)  # nothing written
    np.testing.assert_allclose(entropies(tiny, cache), base, rtol=1e-9)  # a plain call gets the plain numbers


def test_hooks_marked_as_only_watching_keep_the_cache(tiny, tmp_path):
    cache = tmp_path / "cache"
    calls = []
    hook = intervene.reads_only(lambda module, args, kwargs: calls.append(len(kwargs["input_ids"])))
    handle = tiny.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            entropies(tiny, cache)
        assert calls and entries(cache)
        computed = len(calls)
        entropies(tiny, cache)
        assert len(calls) == computed  # restored from the cache: no forward pass
    finally:
        handle.remove()


def test_a_tokenizer_that_cuts_from_the_left_is_not_served_the_numbers_of_one_that_cuts_from_the_right(tiny):
    left = copy.deepcopy(tiny.tokenizer)
    left.truncation_side = "left"
    cut = tiny.prepare("one two three four five six", max_tokens=5).tokens
    assert dataclasses.replace(tiny, tokenizer=left).prepare("one two three four five six", max_tokens=5).tokens != cut
    assert tokenizer_fingerprint(left) != tokenizer_fingerprint(tiny.tokenizer)
    assert tokenizer_fingerprint(copy.deepcopy(tiny.tokenizer)) == tokenizer_fingerprint(tiny.tokenizer)


def test_each_part_of_the_fingerprint_is_stable_and_sensitive(tiny):
    assert weights_fingerprint(tiny.model) == weights_fingerprint(tiny.copy().model)
    assert config_fingerprint(tiny.model.config) == config_fingerprint(tiny.copy().model.config)
    before = tokenizer_fingerprint(tiny.tokenizer)
    tiny.tokenizer("one two three", truncation=True, max_length=3)  # leaves its truncation setting behind
    assert tokenizer_fingerprint(tiny.tokenizer) == before
    config = tiny.copy().model.config
    config.num_hidden_layers += 1
    assert config_fingerprint(config) != config_fingerprint(tiny.model.config)
