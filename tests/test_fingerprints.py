"""The cache knows what actually ran: the model part of a key follows the configuration, the tokenizer and the
weights as they are in memory, and nothing computed under an attention edit is read from or written to the cache
(issue 29, item 1: each of these returned the original model's cached numbers before)."""
from __future__ import annotations

import copy
import dataclasses
import json
import shutil

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
        with pytest.warns(UserWarning, match="not cached"):
            got = entropies(tiny, cache)
    assert not np.allclose(true, base, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got, true, rtol=1e-9)
    assert entries(cache) == before  # nothing written under the unedited model's key
    np.testing.assert_allclose(entropies(tiny, cache), base, rtol=1e-9)


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
