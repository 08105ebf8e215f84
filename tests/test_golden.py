"""
Golden runs: short seeded trainings whose final parameters and logged losses must stay bit-identical.

They pin the algorithms' behaviour through refactors (see :mod:`golden_runs` for the runs). A digest may change
only in a commit that changes behaviour on purpose and says why.
"""

import pytest
from golden_runs import RUNS, run

GOLDEN: dict[str, dict[str, str]] = {
    "pcl_discrete": {"params": "7a95e7d143b6d74a", "losses": "b67d187aa17875bd"},
    "pcl_box": {"params": "c89ef6513fe1a51a", "losses": "b89c49b4a939e64c"},
    "pcl_replay_options": {"params": "d2c64326ac15e2b9", "losses": "0efedf8c80fe48bf"},
    "pcl_unified": {"params": "9a40b5fbca11c3f0", "losses": "4a92e6fac113f52b"},
    "pcl_lstm": {"params": "477ca4a38fa8411d", "losses": "108408e69a818d02"},
    "pcl_unified_lstm": {"params": "1120d534656fe6eb", "losses": "25cca4395fae7e88"},
    "pcl_value_fit_grad": {"params": "dc201dd366101a3c", "losses": "1f34ff5202622779"},
    "pcl_value_fit_best_fit": {"params": "1b3d16f1d027c7cd", "losses": "a2cf112902eebb93"},
    "pcl_value_fit_lbfgs": {"params": "aaf25ea02dcf075f", "losses": "0eb8adb00c0744c7"},
    "pcl_trust_region_consistency": {"params": "b4f7536beeb0e9c7", "losses": "aababa428ff1b93d"},
    "pcl_trust_region_surrogate": {"params": "88d8b2bc29355902", "losses": "0ef8c0b8c27496cf"},
    "pcl_gsde": {"params": "b29923a08e41d591", "losses": "c0e7238f9a0eb836"},
    "trust_pcl": {"params": "9306e7c5fb6b9431", "losses": "74b2305a35dc5d64"},
    "trust_pcl_lstm": {"params": "e98551ba23818a8f", "losses": "6e700d23604282ca"},
    "pcl_expert_seeding": {"params": "10bb0ebcfd1a408e", "losses": "bcb4fd46304da70b"},
    "reinforce_discrete": {"params": "1e2b29f3f3c26758", "losses": "4296a837fa745429"},
    "reinforce_box": {"params": "2beaca0ad42b2f85", "losses": "de41d3a8b5a9a577"},
    "urex_lstm": {"params": "b03035dbc8ebf546", "losses": "744dd179b317eba4"},
    "pcl_save_load": {"params": "b766ab642f25083b", "losses": "d1e42f485145af03"},
    "reinforce_save_load": {"params": "58f9eca680f0c4e1", "losses": "ddb15a2b22730324"},
}


def test_every_run_has_a_golden_value() -> None:
    assert set(GOLDEN) == set(RUNS)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_run_is_bit_identical(name: str) -> None:
    assert run(name) == GOLDEN[name]
