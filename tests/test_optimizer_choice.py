"""The optimiser: fused Adam chosen at run time and not saved; an explicit choice kept."""

import pytest
import torch as th

from sb3_pcl import PCL, TrustPCL


@pytest.mark.parametrize("algo_class", [PCL, TrustPCL])
def test_fused_adam_is_chosen_at_run_time_and_not_saved(algo_class, tmp_path):
    model = algo_class("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8]}, learning_starts=10, batch_size=2)
    assert model.policy.optimizer.param_groups[0]["fused"] is True  # fused on this CPU run
    assert "optimizer_kwargs" not in model.policy_kwargs
    model.learn(40)
    model.save(tmp_path / "model")
    # the policy_kwargs given at creation load the model again (SB3 compares them with the saved ones)
    loaded = algo_class.load(tmp_path / "model", policy_kwargs={"net_arch": [8], "use_sde": False})
    assert "optimizer_kwargs" not in loaded.policy_kwargs
    assert loaded.policy.optimizer.param_groups[0]["fused"] is True


def test_an_explicit_optimizer_choice_is_kept():
    model = PCL("MlpPolicy", "CartPole-v1", policy_kwargs={"optimizer_kwargs": {"foreach": False}})
    assert model.policy_kwargs["optimizer_kwargs"] == {"foreach": False}
    assert not model.policy.optimizer.param_groups[0]["fused"]
    assert th.optim.Adam is model.policy.optimizer_class
