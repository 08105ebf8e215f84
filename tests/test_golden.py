"""
Golden runs: short seeded trainings whose final parameters and logged losses must stay bit-identical.

They pin the algorithms' behaviour through refactors (see :mod:`golden_runs` for the runs). A digest may change
only in a commit that changes behaviour on purpose and says why.
"""

import pytest
from golden_runs import RUNS, run

GOLDEN: dict[str, dict[str, str]] = {
    "pcl_discrete": {"params": "6f96fe1d99a8eb59", "losses": "e703fa825e3e4ef5"},
    "pcl_box": {"params": "2dd5390434e20bec", "losses": "19db3a8a79a0cc2f"},
    "pcl_replay_options": {"params": "28190b100d8e974e", "losses": "13310ecdb46d01db"},
    "pcl_unified": {"params": "1f82c6206bf2bcaf", "losses": "014a6960dc5c6bad"},
    "pcl_lstm": {"params": "fe5c411809af4b92", "losses": "21c05d4d9a5159a8"},
    "pcl_unified_lstm": {"params": "9564efdddcd5ec65", "losses": "25cca4395fae7e88"},
    "pcl_value_fit_grad": {"params": "742457d0d6be1c37", "losses": "040d8d8b75857553"},
    "pcl_value_fit_best_fit": {"params": "fb9773ae00f27050", "losses": "701c74f99900ecdc"},
    "pcl_value_fit_lbfgs": {"params": "c216ec674518e697", "losses": "710d3636fe900db1"},
    "pcl_trust_region_consistency": {"params": "1a4e66154c37a2e8", "losses": "8cefc172a49b3daa"},
    "pcl_trust_region_surrogate": {"params": "c1cb81b5373ab686", "losses": "24e70223306ef337"},
    "pcl_gsde": {"params": "ea8f938ae10b1fd8", "losses": "77774c5aba9301c0"},
    "trust_pcl": {"params": "0ce582e3f5ffb751", "losses": "6227aa4ea3bff6da"},
    "trust_pcl_lstm": {"params": "76ebd1db4f7a2ab2", "losses": "44cc18a0bc4a1667"},
    "pcl_expert_seeding": {"params": "ec09a2d6317711ef", "losses": "6a549fcb755da384"},
    "reinforce_discrete": {"params": "1e2b29f3f3c26758", "losses": "4296a837fa745429"},
    "reinforce_box": {"params": "2beaca0ad42b2f85", "losses": "de41d3a8b5a9a577"},
    "urex_lstm": {"params": "b03035dbc8ebf546", "losses": "744dd179b317eba4"},
    "pcl_save_load": {"params": "77b4165fde39a5a6", "losses": "2bf7903ccf771508"},
    "reinforce_save_load": {"params": "58f9eca680f0c4e1", "losses": "ddb15a2b22730324"},
}


def test_every_run_has_a_golden_value() -> None:
    assert set(GOLDEN) == set(RUNS)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_run_is_bit_identical(name: str) -> None:
    assert run(name) == GOLDEN[name]
