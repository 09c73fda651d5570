"""Notebook 02's exercise: disabling a head."""
from __future__ import annotations

import torch

from .checker import Case, Exercise, HEAD_LABEL, Mistake, REAL_HEAD, REAL_TEXT, RealInputs, given


def _uniform_reference(probs, head, valid, *, zero=False, all_columns=False, heads=None):
    out = probs.clone()
    columns = torch.ones_like(valid, dtype=probs.dtype) if all_columns else valid.to(probs.dtype)  # [B, T]
    rows = torch.zeros_like(columns) if zero else columns / columns.sum(-1, keepdim=True)
    chosen = slice(None) if heads == "all" else slice(head, head + 1)
    out[:, chosen] = rows[:, None, None, :].expand_as(out[:, chosen])
    return out


def _uniform_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(0)
    probs = torch.rand(2, 3, 4, 4, generator=generator)
    probs[1, :, :, 3] = 0  # the second input is one token shorter: its last column is padding
    probs = probs / probs.sum(-1, keepdim=True)
    valid = torch.tensor([[True, True, True, True], [True, True, True, False]])
    expected = probs.clone()
    expected[0, 1] = 1 / 4
    expected[1, 1, :, :3], expected[1, 1, :, 3] = 1 / 3, 0.0
    expected_0 = probs.clone()
    expected_0[0, 0] = 1 / 4
    expected_0[1, 0, :, :3], expected_0[1, 0, :, 3] = 1 / 3, 0.0
    return [Case("2 inputs x 3 heads x 4 tokens, head 1 (0-based), the second input padded", given(probs, 1, valid),
                 expected),
            Case("the same batch, head 0", given(probs, 0, valid), expected_0)]


def _uniform_real(real: RealInputs) -> Case:
    from ...engine.extract import batches
    from ...core.intervene import edit_attention, uniform_head

    layer, head = REAL_HEAD[0] - 1, REAL_HEAD[1] - 1  # intervene counts from 0
    batch = next(batches(real.encoder, [REAL_TEXT, REAL_TEXT[1]], 2, attention=False))  # the second is padded

    def outputs(fn):
        def edit(current, probs):
            return fn(probs, head, batch.valid) if current == layer else probs
        with torch.inference_mode(), edit_attention(real.encoder.model, edit):
            return real.encoder.model(**batch.model_inputs).last_hidden_state

    with torch.inference_mode(), edit_attention(real.encoder.model, uniform_head(layer, head, batch.valid)):
        expected = real.encoder.model(**batch.model_inputs).last_hidden_state
    return Case(f"the real model with head {HEAD_LABEL} disabled inside intervene.edit_attention (last hidden states; "
                "a pair and a padded single sentence)", outputs, expected)


EXERCISES = (
    Exercise("uniform_head", "02", "Disable a head with intervene.edit_attention", "probs, head, valid",
             ("probs [B, H, T, T] (a torch tensor: one layer's attention, padded columns 0), head (0-based), valid "
              "bool [B, T] -> a new tensor in which that head's rows are uniform over each input's real tokens; the "
              "other heads unchanged. Used as `edit_attention(model, lambda layer, probs: uniform_head(probs, head, "
              "valid) if layer == L else probs)`."),
             2, 15,
             ("Clone first (probs.clone()), then assign to out[:, head].",
              "Each input's uniform row is valid / valid.sum(-1): broadcast it to [B, T, T] with [:, None, :]."),
             _uniform_cases, _uniform_real,
             (Mistake("the head's rows are all zero: a disabled head must still be a distribution, uniform over the "
                      "real tokens", lambda p, h, v: _uniform_reference(p, h, v, zero=True)),
              Mistake("the padded columns got weight too: spread the rows over each input's real tokens (valid) only",
                      lambda p, h, v: _uniform_reference(p, h, v, all_columns=True)),
              Mistake("`head` is 0-based here, as in intervene: you changed another head",
                      lambda p, h, v: _uniform_reference(p, h - 1, v) if h >= 1 else _uniform_reference(p, h + 1, v)),
              Mistake("only the given head changes; you made every head uniform",
                      lambda p, h, v: _uniform_reference(p, h, v, heads="all")))),
)
