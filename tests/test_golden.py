"""
Golden runs: short seeded trainings whose final parameters and logged losses pin the algorithms' behaviour through
refactors (see :mod:`golden_runs` for the runs). Two checks of each run, both marked ``golden`` (in the default run;
``pytest -m golden`` runs only them):

- **bit-identical**, on the kinds of CPU in :data:`GOLDEN`: the digests of the parameters and losses. The last bits of
  a seeded run depend on the CPU as well as on the code (MKL and torch pick their kernels by CPU vendor and vector
  width), so :data:`GOLDEN` holds one set of digests per kind of CPU the project has run on, every set computed from
  the same code; a run passes when its digests are those of one of them, and is skipped on a kind of CPU not listed.
- **close**, on any CPU: the numbers themselves (``golden_values.json``: summaries of the final parameters and every
  logged loss, recorded on one CPU), each quantity within :data:`RTOL` of its largest recorded magnitude, or the
  looser tolerance of :data:`LOOSER` for the runs whose numbers branch on comparisons.

A digest or a recorded value may change only in a commit that changes behaviour on purpose and says why. To record
them, at a commit whose golden runs pass:

- a new kind of CPU: ``python tests/golden_runs.py`` prints its digests, labelled; add them to :data:`GOLDEN` in their
  own commit (a run added since a kind was last available goes into :data:`ADDED_SINCE` for that kind);
- a change of behaviour on purpose: the digests of every kind it can be run on, and ``python tests/golden_runs.py
  --record-values [RUN ...]`` to rewrite the recorded values (every run, or the named ones).

The tolerances come from the spread measured on one Intel Xeon (AVX-512) with the same code under the other numerical
paths a CPU can take: MKL restricted to AVX2, AVX or SSE4.2 (``MKL_ENABLE_INSTRUCTIONS``), torch's non-vectorised
kernels (``ATEN_CPU_CAPABILITY=default``), two torch threads, oneDNN off, and these combined. Of float32's rounding
(unit roundoff 6e-8), a few hundred Adam steps leave at most 2e-5 (relative to each quantity's largest magnitude) in
16 of the 21 runs; the runs of :data:`LOOSER` branch on comparisons and spread more. A 1% change of the learning rate
fails 11 of the 13 runs it reaches (pcl_unified moves by 2e-4, pcl_value_fit_lbfgs's parameters by 2e-2).
"""

import functools

import numpy as np
import pytest
from golden_runs import RUNS, Outcome, cpu_numerics, recorded_values, run

pytestmark = pytest.mark.golden

#: per kind of CPU (its model and, where recorded, torch's CPU capability: ``golden_runs.cpu_numerics()``), the digests
#: of every golden run; the AMD set was recorded before the capability was
GOLDEN: dict[str, dict[str, dict[str, str]]] = {
    "AMD EPYC": {
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
    },
    "Intel(R) Xeon(R) Processor, torch AVX512": {
        "pcl_discrete": {"params": "5555883fd50817bd", "losses": "0eec8c44715d966e"},
        "pcl_box": {"params": "f2a3b1ee3aa324fe", "losses": "757f97fd9e6e0735"},
        "pcl_replay_options": {"params": "48868c80286cb973", "losses": "458fe94056e2eeb1"},
        "pcl_unified": {"params": "220059a2f9d365ac", "losses": "0626560ff170d037"},
        "pcl_lstm": {"params": "5127a217c09eb5f4", "losses": "3afccbc6f26507df"},
        "pcl_unified_lstm": {"params": "3e7f2cb1e15e6e48", "losses": "25cca4395fae7e88"},
        "pcl_value_fit_grad": {"params": "1f3d9ce427ef554b", "losses": "69b13991863af544"},
        "pcl_value_fit_best_fit": {"params": "4d74a2f1ffb71a46", "losses": "39fd640d6b3467c3"},
        "pcl_value_fit_lbfgs": {"params": "e5c490f5e8b1530f", "losses": "4658f56e90d27633"},
        "pcl_trust_region_consistency": {"params": "f0876d0f24468a84", "losses": "d2edb031073f300c"},
        "pcl_trust_region_surrogate": {"params": "c633812613c01f58", "losses": "f2e0035f24f142ad"},
        "pcl_gsde": {"params": "87e9a8b68ab97494", "losses": "c69b8c0db4c5e8fb"},
        "trust_pcl": {"params": "259aca9e1a303bde", "losses": "e5523c7691c02d1c"},
        "trust_pcl_lstm": {"params": "9451de04cbac09d6", "losses": "9c2f3a4104909a2a"},
        "trust_pcl_2018": {"params": "375fbe3f42cc9317", "losses": "38b699457ea9942b"},
        "pcl_expert_seeding": {"params": "23ddc361b9c1cf77", "losses": "025b4725c57a881a"},
        "reinforce_discrete": {"params": "4f08ff6163bb1814", "losses": "01039fa21521ddb7"},
        "reinforce_box": {"params": "4b6ee6b39d012557", "losses": "d1c28b2b006dfc5a"},
        "urex_lstm": {"params": "3c0f0d80d13720d2", "losses": "983d95767869a102"},
        "pcl_save_load": {"params": "7117d3a97328c6bc", "losses": "aecdd9bcc69eabde"},
        "reinforce_save_load": {"params": "1464d7aa0ef5a14a", "losses": "ddb15a2b22730324"},
    },
}


#: runs added after a kind of CPU was last available: that kind has no digests of them yet (record them on it)
ADDED_SINCE: dict[str, set[str]] = {"AMD EPYC": {"trust_pcl_2018"}}


def test_every_cpu_kind_has_every_run() -> None:
    for kind, digests in GOLDEN.items():
        assert set(digests) | ADDED_SINCE.get(kind, set()) == set(RUNS), kind
        assert not set(digests) & ADDED_SINCE.get(kind, set()), f"{kind}: recorded runs are still listed in ADDED_SINCE"


#: the tolerance of :func:`test_golden_run_is_close`, relative to the largest magnitude of each recorded quantity (the
#: parameters' summaries, each loss key): 25x the largest spread measured across the numerical paths (2e-5) in the runs
#: not in :data:`LOOSER`
RTOL = 5e-4
#: runs whose rounding differences are amplified by a comparison (the least-squares solve, a line search's step,
#: L-BFGS's, MuJoCo's contacts): their tolerance, 10-20x the spread measured (in the comment)
LOOSER: dict[str, float] = {
    "pcl_value_fit_best_fit": 2e-3,  # 1e-4
    "pcl_trust_region_consistency": 5e-2,  # 4e-3
    "pcl_trust_region_surrogate": 2e-2,  # 2e-3
    "pcl_value_fit_lbfgs": 0.2,  # params 2e-2
    "trust_pcl_2018": 0.1,  # params 1e-2
}
#: runs whose losses are not compared, no tolerance that would still mean something holding them: a loss of
#: L-BFGS's run differs by 35% between the numerical paths, one of the HalfCheetah run by 100x
PARAMS_ONLY = {"pcl_value_fit_lbfgs", "trust_pcl_2018"}

_run = functools.cache(run)  # each run once for both checks (per process)


def test_every_run_has_recorded_values() -> None:
    assert set(recorded_values()) == set(RUNS), "record them: python tests/golden_runs.py --record-values"
    assert set(LOOSER) | PARAMS_ONLY <= set(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_golden_run_is_bit_identical(name: str) -> None:
    digests = _run(name).digests
    kinds = [kind for kind, runs in GOLDEN.items() if runs.get(name) == digests]
    this_cpu = cpu_numerics()
    own = [kind for kind in GOLDEN if this_cpu.startswith(kind)]  # this CPU's kind, if recorded
    if not kinds and not own:
        pytest.skip(f"{this_cpu} is no kind of CPU in GOLDEN: test_golden_run_is_close checks {name} here")
    if not kinds and all(name in ADDED_SINCE.get(kind, set()) for kind in own):
        pytest.skip(f"{name} gave {digests}: {this_cpu} has no digests of it yet; record them (tests/golden_runs.py)")
    assert kinds, f"{name} gave {digests}, the digests of no kind of CPU in GOLDEN ({', '.join(GOLDEN)}); this CPU: {this_cpu}"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_golden_run_is_close(name: str) -> None:
    outcome: Outcome = _run(name)
    recorded = recorded_values()[name]
    rtol = LOOSER.get(name, RTOL)
    assert set(outcome.values) == set(recorded), f"{name} logged {sorted(outcome.values)}, recorded: {sorted(recorded)}"
    for key in ["params"] if name in PARAMS_ONLY else sorted(recorded):
        expected = np.array(recorded[key])
        np.testing.assert_allclose(
            outcome.values[key], expected, rtol=rtol, atol=rtol * np.abs(expected).max(), err_msg=f"{name}: {key}"
        )
