"""Computations on a fixed number of threads.

On a laptop's few cores, the threads of a small PyTorch op, a BLAS call or scikit-learn's OpenMP loops mostly
wait for each other, and on busy shared cores they spin: measured on this project's 2-core machine, a CNN
training run took 139 s with 2 threads and 11 s with one, a boosted-trees fit 190 s and 1.3 s, a logistic
regression 1-9 s and 0.03 s. `one_thread` runs such a block on one thread and restores the settings after.

The thread count also changes the order of floating-point sums, hence trained weights, so every training loop of
the kit runs on a count of its own, whatever the machine has: the pattern CNN on one (`one_thread`), the probes
and the toy encoders on one (`probes.deterministic`), fine-tuning on `TRAINING_THREADS` (`fixed_threads`). The
weights are then the same on any laptop with the same vector kernels.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


TRAINING_THREADS = 2  # fine-tuning's: the count the committed notebooks were trained with (one took 81 s, not 49)


@contextmanager
def fixed_threads(count: int) -> Iterator[None]:
    """PyTorch's intra-op threads and the BLAS / OpenMP thread pools (NumPy, scikit-learn) set to `count` inside
    the block, restored after."""
    from threadpoolctl import threadpool_limits

    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        with threadpool_limits(count):
            yield
    finally:
        torch.set_num_threads(threads)


def one_thread():
    """`fixed_threads(1)`: for small ops, whose threads would only wait for each other."""
    return fixed_threads(1)
