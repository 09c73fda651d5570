"""Activation patching on known answers: a self-patch changes nothing, patching the last layer gives the source's
states, a head patched in the last layer moves only what comes after it, inputs that cannot align are refused."""
import pytest
import torch

from bertlook_utils.analyses import patching

BASE = "The river flooded the old town after the storm."
SOURCE = "The river flooded the old mill after the storm."  # one wordpiece swapped: positions align


def _pad(encoder, text):
    return encoder.pad([encoder.prepare(text)])


def test_a_self_patch_changes_nothing(encoder):
    base = _pad(encoder, BASE)
    with torch.inference_mode():
        plain = encoder.model(**base).last_hidden_state[0]
    sets = [[c] for c in patching.every_component(encoder)[:5]] + [patching.every_component(encoder)]
    out = patching.patched_outputs(encoder, base, base, sets)
    assert out.shape == (len(sets), *plain.shape)
    assert (out - plain).abs().max() < 1e-5


def test_patching_the_last_layer_gives_the_source_states_and_a_head_moves_them(encoder):
    base, source = _pad(encoder, BASE), _pad(encoder, SOURCE)
    with torch.inference_mode():
        plain, target = (encoder.model(**x).last_hidden_state[0] for x in (base, source))
    last = encoder.n_layers - 1
    out = patching.patched_outputs(encoder, base, source, [[("layer", last, None)], [("head", 0, 3)]])
    assert (out[0] - target).abs().max() < 1e-5  # everything, by construction: the machinery's check
    assert (out[1] - plain).abs().max() > 1e-3  # a first-layer head carries something of the swapped word


def test_inputs_that_cannot_align_and_unknown_components_are_refused(encoder):
    base = _pad(encoder, BASE)
    with pytest.raises(ValueError, match="same number of tokens"):
        patching.patched_outputs(encoder, base, _pad(encoder, "A short one."), [[("attention", 0, None)]])
    with pytest.raises(ValueError, match="kind must be one of"):
        patching.patched_outputs(encoder, base, base, [[("neuron", 0, None)]])
    with pytest.raises(ValueError, match="layer 6 is out of range"):
        patching.patched_outputs(encoder, base, base, [[("mlp", 6, None)]])
    with pytest.raises(ValueError, match="head 12 is out of range"):
        patching.patched_outputs(encoder, base, base, [[("head", 0, 12)]])


@pytest.mark.parametrize("component, words", [
    (("head", 1, True), r"head must be an integer \(0-based\), got True"),
    (("head", True, 1), r"layer must be an integer \(0-based\), got True"),
    (("mlp", 1.0, None), r"layer must be an integer \(0-based\), got 1.0"),
    (("attention", 0, 5), r"a component of kind 'attention' takes no head \(None\), got 5"),
])
def test_components_whose_layer_or_head_is_not_a_number_of_theirs_are_refused(encoder, component, words):
    base = _pad(encoder, BASE)
    with pytest.raises(ValueError, match=words):
        patching.patched_outputs(encoder, base, base, [[component]])


def test_all_heads_of_a_layer_together_are_its_attention_block(encoder):
    base, source = _pad(encoder, BASE), _pad(encoder, SOURCE)
    heads = [("head", 1, h) for h in range(encoder.n_heads)]
    out = patching.patched_outputs(encoder, base, source, [heads, [("attention", 1, None)], [("head", 1, 0)]])
    assert (out[0] - out[1]).abs().max() < 1e-5  # the projection is linear: every head's input gives its output
    assert (out[2] - out[1]).abs().max() > 1e-4  # one head is not all of them
