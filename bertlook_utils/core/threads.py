"""Small computations on one thread.

On a laptop's few cores, the threads of a small PyTorch op, a BLAS call or scikit-learn's OpenMP loops mostly
wait for each other, and on busy shared cores they spin: measured on this project's 2-core machine, a CNN
training run took 139 s with 2 threads and 11 s with one, a boosted-trees fit 190 s and 1.3 s, a logistic
regression 1-9 s and 0.03 s. `one_thread` runs the block on one thread and restores the settings after. Every
training loop of the kit runs on one thread (fine-tuning and the pattern CNN inside `one_thread`, the probes and
the toy encoders inside `probes.deterministic`): the thread count changes the order of floating-point sums, hence
the weights, and one fixed count makes them the same on any laptop with the same vector kernels.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch's intra-op threads and the BLAS / OpenMP thread pools (NumPy, scikit-learn) set to one inside the
    block, restored after."""
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(threads)
