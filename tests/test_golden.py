"""
Golden runs: short seeded trainings whose final parameters and logged losses must stay bit-identical.

They pin the algorithms' behaviour through refactors (see :mod:`golden_runs` for the runs). A digest may change
only in a commit that changes behaviour on purpose and says why.
"""

import pytest
from golden_runs import RUNS, run

GOLDEN: dict[str, dict[str, str]] = {
    "pcl_discrete": {"params": "15833fa62b7f28d8", "losses": "a71fb6971c02d66c"},
    "pcl_box": {"params": "7a8cf297cdc173a3", "losses": "c95e5d0de519e4a9"},
    "pcl_replay_options": {"params": "3aa015e9fc45f8df", "losses": "4a5b5c4803ec7481"},
    "pcl_unified": {"params": "408f04bce242b943", "losses": "d4d129530ccf1cb2"},
    "pcl_lstm": {"params": "fe5c411809af4b92", "losses": "21c05d4d9a5159a8"},
    "pcl_unified_lstm": {"params": "9564efdddcd5ec65", "losses": "25cca4395fae7e88"},
    "pcl_value_fit_grad": {"params": "742457d0d6be1c37", "losses": "040d8d8b75857553"},
    "pcl_value_fit_best_fit": {"params": "fb9773ae00f27050", "losses": "701c74f99900ecdc"},
    "pcl_value_fit_lbfgs": {"params": "c216ec674518e697", "losses": "710d3636fe900db1"},
    "pcl_trust_region_consistency": {"params": "1a4e66154c37a2e8", "losses": "8cefc172a49b3daa"},
    "pcl_trust_region_surrogate": {"params": "c1cb81b5373ab686", "losses": "24e70223306ef337"},
    "pcl_gsde": {"params": "38a8027e0446a147", "losses": "04e63180d6171b35"},
    "trust_pcl": {"params": "c026c02705603ba7", "losses": "907f1339ff2e12a7"},
    "trust_pcl_lstm": {"params": "76ebd1db4f7a2ab2", "losses": "44cc18a0bc4a1667"},
    "pcl_expert_seeding": {"params": "0063240099b3b281", "losses": "6a549fcb755da384"},
    "reinforce_discrete": {"params": "1e2b29f3f3c26758", "losses": "4296a837fa745429"},
    "reinforce_box": {"params": "2beaca0ad42b2f85", "losses": "de41d3a8b5a9a577"},
    "urex_lstm": {"params": "b03035dbc8ebf546", "losses": "744dd179b317eba4"},
    "pcl_save_load": {"params": "1a35cbf59beeb3b4", "losses": "da836dc415b5e2b9"},
    "reinforce_save_load": {"params": "58f9eca680f0c4e1", "losses": "ddb15a2b22730324"},
}


def test_every_run_has_a_golden_value() -> None:
    assert set(GOLDEN) == set(RUNS)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_run_is_bit_identical(name: str) -> None:
    assert run(name) == GOLDEN[name]
