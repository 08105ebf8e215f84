"""Shared pytest fixtures."""

import copy
import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch as th
from pcl_testing import FAST

#: the integrations that are in no default extra (pyproject.toml: integrations): their tests skip without them, unless
#: CI sets SB3_PCL_INTEGRATIONS=required after installing them, where a missing one fails the run instead
INTEGRATIONS = ("ray", "minari", "h5py", "jax", "onnx", "onnxruntime")


def _import_or_fail(modname: str, minversion: str | None = None, reason: str | None = None, **kwargs: object) -> object:
    """``pytest.importorskip`` that raises instead of skipping for the integrations CI requires."""
    if modname.split(".")[0] in INTEGRATIONS:
        import importlib

        return importlib.import_module(modname)
    return _importorskip(modname, minversion=minversion, reason=reason, **kwargs)  # type: ignore[arg-type]


_importorskip = pytest.importorskip
if os.environ.get("SB3_PCL_INTEGRATIONS") == "required":
    pytest.importorskip = _import_or_fail  # type: ignore[assignment]


@pytest.fixture
def fast_settings() -> dict[str, Any]:
    """:return: a copy of :data:`pcl_testing.FAST`, the fast settings of the PCL family, for a test to change"""
    return copy.deepcopy(FAST)


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    """The networks of the tests are tiny: intra-op threading only adds contention (CI machines have 2 cores)."""
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(n_threads)


@pytest.fixture(autouse=True, scope="session")
def _sb3_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """SB3's ``configure()`` makes a new ``SB3-<date>`` folder in the system temp dir for every model that learns
    without a log folder; one test run makes thousands. Point them at one folder under pytest's own temp dir."""
    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3_logdir"))
    yield
    if previous is None:
        del os.environ["SB3_LOGDIR"]
    else:
        os.environ["SB3_LOGDIR"] = previous
