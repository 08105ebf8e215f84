"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
import torch as th


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    """The networks of the tests are tiny: intra-op threading only adds contention (CI machines have 2 cores)."""
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(n_threads)
