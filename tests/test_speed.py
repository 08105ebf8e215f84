"""benchmarks/experiments/speed.py: the throughput benchmark's timers and report (tiny budgets; no timing is asserted)."""

import json
import time
from pathlib import Path

import pytest

from benchmarks.experiments import speed

pytestmark = pytest.mark.experiments


def test_part_timer_counts_each_call_to_its_own_part_only() -> None:
    timer = speed.PartTimer()
    with timer.part("outer"):
        time.sleep(0.02)
        with timer.part("inner"):
            time.sleep(0.03)
    assert timer.totals["inner"] >= 0.03
    assert 0.02 <= timer.totals["outer"] < 0.03 + 0.02  # the inner part's time is not counted twice


def test_speed_writes_the_table_and_the_breakdown(tmp_path: Path) -> None:
    args = ["--configs", "pcl:CartPole-v1", "--reps", "2", "--steps", "64", "--warmup", "0", "--out", str(tmp_path)]
    args += ["--json", str(tmp_path / "raw.json")]
    assert speed.main(args) == 0
    raw = json.loads((tmp_path / "raw.json").read_text())
    run = raw["runs"]["pcl:CartPole-v1"]
    assert len(run["steps_per_s"]) == 2 and run["n_envs"] == 8
    assert run["breakdown"]["env_steps"] >= 64 and set(run["breakdown"]["parts_s"]) == set(speed.PARTS)
    parts = run["breakdown"]["parts_s"]
    assert run["breakdown"]["iterations"] >= 1 and run["breakdown"]["batches"] >= 1
    assert parts["backward"] > 0 and parts["optimizer"] > 0  # autograd and the optimiser's step hooks were timed
    assert parts["env"] > 0 and parts["acting"] > 0 and parts["training"] > 0  # the VecEnv, the actor, train itself
    # matrix products of 2 x 64 tanh MLPs: an iteration's FLOPs are counted, the matmul rate measured in the run
    assert run["breakdown"]["flops_per_iteration"] > 0 and run["matmul_gflops"] > 0
    report = (tmp_path / "results.md").read_text()
    assert "The training step against the matmul rate" in report
    assert "| pcl:CartPole-v1 | PCL | 8 |" in report and "where the time goes" in report and "wall-clock" in report
    assert (tmp_path / "speed.png").is_file()
    # a later run reports the earlier one as "before"
    assert speed.main([*args[:10], "--no-breakdown", "--baseline", str(tmp_path / "raw.json")]) == 0
    assert "After / before" in (tmp_path / "results.md").read_text()
    # the report again from the saved numbers, without measuring
    assert speed.main(["--from-json", str(tmp_path / "raw.json"), "--out", str(tmp_path / "again")]) == 0
    assert "| pcl:CartPole-v1 | PCL | 8 |" in (tmp_path / "again" / "results.md").read_text()


def test_speed_rejects_a_malformed_configuration() -> None:
    with pytest.raises(ValueError, match="'algo:env'"):
        speed.main(["--configs", "pcl-CartPole-v1"])


def test_configurations_name_their_torch_threads_and_a_load_runs_alongside() -> None:
    assert speed._configure("pcl:CartPole-v1") == ("pcl", "CartPole-v1", 1, None, None)
    assert speed._configure("trust_pcl:HalfCheetah-v5@2") == ("trust_pcl", "HalfCheetah-v5", 2, None, None)
    assert speed._configure("trust_pcl[mujoco-2018]:Hopper-v5") == ("trust_pcl", "Hopper-v5", 1, "mujoco-2018", None)
    urex = ("recurrent_urex", "sb3_pcl/Copy-v0", 2, None, "algorithmic")
    assert speed._configure("recurrent_urex:sb3_pcl/Copy-v0[algorithmic]@2") == urex
    bad_specs = ("pcl:CartPole-v1@0", "pcl:CartPole-v1@x", ":CartPole-v1", "pcl[]:CartPole-v1", "pcl:CartPole-v1[fast]")
    for bad in bad_specs:
        with pytest.raises(ValueError, match="algo:env@threads"):
            speed._configure(bad)
    with speed.machine_load(1):
        pass  # the busy process is started, then stopped
    assert speed.load_text(2).startswith("Machine loaded with 2")


def test_a_configuration_on_another_vec_env_is_compared_with_its_default_one() -> None:
    def run(cpu: float, vec_env: str) -> dict:
        return {"median_steps_per_cpu_s": cpu, "median_steps_per_s": cpu / 2, "vec_env": vec_env}

    runs = {"urex:sb3_pcl/Copy-v0": run(1000, "DummyVecEnv"), "urex:sb3_pcl/Copy-v0[algorithmic]": run(1700, "Alg")}
    runs["urex:sb3_pcl/Reverse-v0[algorithmic]"] = run(900, "Alg")  # no default-VecEnv run: no row
    table = "\n".join(speed._vec_env_table(runs))
    assert "| urex:sb3_pcl/Copy-v0 | DummyVecEnv | 1000 | Alg | 1700 | 1.70x |" in table and "Reverse" not in table
    assert speed._vec_env_table({"urex:sb3_pcl/Copy-v0": run(1000, "DummyVecEnv")}) == []


def test_the_env_limit_steps_every_env_with_random_actions() -> None:
    limit = speed.EnvLimit("Pendulum-v1", seed=0, n_envs=3)
    limit.learn(10)
    assert limit.num_timesteps == 12  # whole vector steps
    with pytest.raises(ValueError, match="Box actions"):
        speed.EnvLimit("CartPole-v1", seed=0)


def test_the_mujoco_table_compares_trust_pcl_with_trpo_and_a_quarter_of_the_env_limit() -> None:
    def run(cpu: float) -> dict:
        return {"median_steps_per_cpu_s": cpu, "median_steps_per_s": cpu / 2}

    runs = {"trust_pcl:Hopper-v5": run(2000), "trpo:Hopper-v5": run(1800), "env:Hopper-v5": run(9000)}
    runs |= {"trust_pcl:Ant-v5": run(900), "trpo:Ant-v5": run(1200), "env:Ant-v5": run(3200)}
    runs["trust_pcl:Walker2d-v5"] = run(1)  # no TRPO or env-limit run: not in the table
    text = "\n".join(speed._mujoco_table(runs, {"trust_pcl:Hopper-v5": {"median_steps_per_s": 1000}}))
    assert "| Hopper-v5 | 9000 | 2000 | 1800 | 1.11 | 0.22 | 1000 | - | - |" in text
    assert "| Ant-v5 | 3200 | 900 | 1200 | 0.75 | 0.28 |" in text and "Walker2d" not in text
    assert "TRPO's throughput on 1 of 2 tasks; at least a quarter of the env's limit on 1 of 2." in text
    assert speed._mujoco_table({"pcl:CartPole-v1": run(1)}, {}) == []


def test_instrument_times_inside_the_block_only() -> None:
    from sb3_pcl import PCL

    model = PCL("MlpPolicy", "CartPole-v1", learning_starts=0, seed=0)
    with speed.instrument(model) as timer:
        model.learn(64)
    totals = dict(timer.totals)
    assert totals["backward"] > 0 and totals["optimizer"] > 0 and timer.calls["train"] >= 1
    model.learn(64, reset_num_timesteps=False)  # no timer, hook or wrapper left behind
    assert dict(timer.totals) == totals and not {"train", "collect_rollouts", "_evaluate"} & set(vars(model))
