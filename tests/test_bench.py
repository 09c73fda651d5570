"""benchmarks: the timed kit method runs through extract.reduce (which makes a fresh reducer for each block)
and reports every reducer's time and the same statistics as the list functions."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench import _Timed, run_kit
from bertlook_utils.extract import reduce
from bertlook_utils.surface import TokenStats, token_stats


@pytest.mark.slow
def test_the_kit_method_times_every_reducer_and_gives_the_statistics(encoder, segments, reference_encodeds):
    info, frames = run_kit(encoder, segments[:5], batch_size=2)
    assert info["segments_seen"] == 5
    assert set(info["reducer_seconds"]) == {"token_stats", "entropy_stats"}
    assert all(seconds > 0 for seconds in info["reducer_seconds"].values())
    np.testing.assert_allclose(frames["prev"], token_stats(reference_encodeds[:5])["prev"], atol=1e-5)


@pytest.mark.slow
def test_the_timer_adds_up_over_the_copies_made_for_each_block(encoder, segments):
    _Timed.seconds = {}
    timed = reduce(encoder, segments[:5], [_Timed(TokenStats())], batch_size=2, block_size=2, cache_dir=None,
                   progress=False)[0]
    assert _Timed.seconds["token_stats"] > 0
    assert timed.reducer.count == 5  # the wrapped reducer holds the merged result
