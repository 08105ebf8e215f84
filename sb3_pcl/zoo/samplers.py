"""
Optuna samplers of our algorithms, in rl-zoo3's format.

rl-zoo3 calls ``HYPERPARAMS_SAMPLER[algo](trial, n_actions, n_envs, additional_args)`` in each
trial of ``--optimize`` and passes the returned keyword arguments to the algorithm's constructor
(over the entry of ``hyperparams/<algo>.yml``). ``HYPERPARAMS_CONVERTER[algo](trial.params)``
turns the raw parameters of a stored trial back into the same keyword arguments
(``--storage ... --study-name ... --trial-id N`` trains with trial ``N``'s hyperparameters).

To plug in another algorithm of :data:`sb3_pcl.ALGOS`, add a converter and a sampler here and
register them in :data:`SAMPLERS` and :data:`CONVERTERS` under the same name.
"""

from collections.abc import Callable
from typing import Any

import optuna

#: ``(trial, n_actions, n_envs, additional_args) -> constructor kwargs`` (rl-zoo3's sampler signature)
Sampler = Callable[[optuna.Trial, int, int, dict[str, Any]], dict[str, Any]]
#: ``trial.params -> constructor kwargs``
Converter = Callable[[dict[str, Any]], dict[str, Any]]

#: network sizes of the ``net_arch`` choice (separate policy and value MLPs, as SB3's actor-critic policies)
NET_ARCHS: dict[str, dict[str, list[int]]] = {
    "small": {"pi": [64, 64], "vf": [64, 64]},
    "medium": {"pi": [256, 256], "vf": [256, 256]},
}


def convert_pcl_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    Turn the raw parameters of a PCL or Trust-PCL trial into :class:`~sb3_pcl.PCL` / ``TrustPCL`` keyword arguments.

    :param sampled_params: ``trial.params`` of a trial sampled by :func:`sample_pcl_params` or :func:`sample_trust_pcl_params`
    :return: the constructor keyword arguments (``net_arch`` becomes ``policy_kwargs``)
    """
    hyperparams = dict(sampled_params)
    net_arch = hyperparams.pop("net_arch", None)
    if net_arch is not None:
        arch = NET_ARCHS[net_arch]
        hyperparams["policy_kwargs"] = {"net_arch": {"pi": list(arch["pi"]), "vf": list(arch["vf"])}}
    return hyperparams


def sample_pcl_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """
    Sample PCL hyperparameters.

    The ranges cover the settings of the PCL paper (entropy ``ent_coef`` down to 1e-5, rollouts of
    1 to 50 steps, undiscounted and discounted returns) around the defaults of :class:`~sb3_pcl.PCL`.

    :param trial: the Optuna trial
    :param n_actions: size of a Box action space (0 otherwise; unused by PCL)
    :param n_envs: number of training envs (unused by PCL)
    :param additional_args: rl-zoo3's extra information (HER settings; unused by PCL)
    :return: the constructor keyword arguments
    """
    params = {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [8, 16, 32, 64, 128]),
        "n_steps": trial.suggest_categorical("n_steps", [1, 2, 5, 10, 20, 50]),
        "gamma": trial.suggest_categorical("gamma", [0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0]),
        "ent_coef": trial.suggest_float("ent_coef", 1e-5, 1.0, log=True),
        "train_freq": trial.suggest_categorical("train_freq", [1, 4, 8, 16, 32, 64]),
        "gradient_steps": trial.suggest_categorical("gradient_steps", [1, 2, 4, 8]),
        "max_segment_length": trial.suggest_categorical("max_segment_length", [10, 20, 50, 100, 200]),
        "vf_coef": trial.suggest_float("vf_coef", 0.01, 10.0, log=True),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.1, 100.0, log=True),
        "target_network_lag": trial.suggest_categorical("target_network_lag", [0.0, 0.9, 0.95, 0.99, 0.995]),
        "net_arch": trial.suggest_categorical("net_arch", list(NET_ARCHS)),
    }
    return convert_pcl_params(params)


def sample_trust_pcl_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """
    Sample Trust-PCL hyperparameters.

    The ranges cover both published recipes (2017: n_steps 10, lr 2e-3, target lag 0.99, segments of
    100 steps, 25 per batch; 2018: n_steps 1, lr 1e-4, segments of 10 steps, 64 per batch, target
    values, lambda smoothing 0.99) and the trust-region sizes of the Trust-PCL paper.

    :param trial: the Optuna trial
    :param n_actions: size of a Box action space (unused)
    :param n_envs: number of training envs (unused)
    :param additional_args: rl-zoo3's extra information (unused)
    :return: the constructor keyword arguments
    """
    params = {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [16, 25, 32, 64, 128]),
        "n_steps": trial.suggest_categorical("n_steps", [1, 5, 10]),
        "gamma": trial.suggest_categorical("gamma", [0.9, 0.95, 0.98, 0.99, 0.995, 0.999]),
        "ent_coef": trial.suggest_categorical("ent_coef", [0.0, 1e-4, 1e-3, 1e-2]),
        "max_divergence": trial.suggest_categorical("max_divergence", [0.0005, 0.001, 0.002, 0.005]),
        "lambda_smoothing": trial.suggest_categorical("lambda_smoothing", [0.9, 0.95, 0.99]),
        "train_freq": trial.suggest_categorical("train_freq", [1, 4, 8, 16, 32, 64, 100]),
        "gradient_steps": trial.suggest_categorical("gradient_steps", [1, 2, 4, 8]),
        "max_segment_length": trial.suggest_categorical("max_segment_length", [10, 20, 50, 100]),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.1, 100.0, log=True),
        "target_network_lag": trial.suggest_categorical("target_network_lag", [0.9, 0.95, 0.99, 0.995]),
        "sample_from": trial.suggest_categorical("sample_from", ["online", "target"]),
        "use_target_values": trial.suggest_categorical("use_target_values", [False, True]),
        "net_arch": trial.suggest_categorical("net_arch", list(NET_ARCHS)),
    }
    return convert_pcl_params(params)


def convert_full_episode_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    Turn the raw parameters of a Reinforce / UREX trial into constructor keyword arguments.

    :param sampled_params: ``trial.params`` of a trial sampled by :func:`sample_reinforce_params`
        or :func:`sample_urex_params`
    :return: the constructor keyword arguments
    """
    return dict(sampled_params)


def _sample_full_episode_params(trial: optuna.Trial, n_envs: int, ent_coef_low: float, ent_coef_high: float) -> dict[str, Any]:
    # K >= 2 (each start state is played K times), among the divisors of n_envs: the side-by-side fast path
    divisors = [k for k in range(2, n_envs + 1) if n_envs % k == 0] or [n_envs]
    params = {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-2, log=True),
        "ent_coef": trial.suggest_float("ent_coef", ent_coef_low, ent_coef_high, log=True),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 1.0, 100.0, log=True),
        "num_samples": trial.suggest_categorical("num_samples", divisors),
    }
    return convert_full_episode_params(params)


def _full_episode_sampler(ent_coef_low: float, ent_coef_high: float) -> Sampler:
    """
    :param ent_coef_low: the smallest ``ent_coef`` to sample (log-uniform)
    :param ent_coef_high: the largest
    :return: a sampler of Reinforce / UREX hyperparameters (``num_samples`` among the divisors >= 2 of ``n_envs``)
    """

    def sample(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
        return _sample_full_episode_params(trial, n_envs, ent_coef_low, ent_coef_high)

    return sample


#: Reinforce (MENT) around the paper's recipe (lr 0.01, clip 50, ent_coef 0.01)
sample_reinforce_params = _full_episode_sampler(1e-4, 0.1)
#: UREX around the paper's recipe (lr 0.01, clip 50, ent_coef 0.1)
sample_urex_params = _full_episode_sampler(1e-3, 1.0)


#: Optuna sampler of each algorithm, keyed like :data:`sb3_pcl.ALGOS`
SAMPLERS: dict[str, Sampler] = {
    "pcl": sample_pcl_params,
    "trust_pcl": sample_trust_pcl_params,
    "recurrent_pcl": sample_pcl_params,  # net_arch: the MLPs on the LSTM output
    "recurrent_trust_pcl": sample_trust_pcl_params,
    "reinforce": sample_reinforce_params,
    "urex": sample_urex_params,
    "recurrent_reinforce": sample_reinforce_params,
    "recurrent_urex": sample_urex_params,
}

#: converter of stored trial parameters of each algorithm, keyed like :data:`sb3_pcl.ALGOS`
CONVERTERS: dict[str, Converter] = {
    "pcl": convert_pcl_params,
    "trust_pcl": convert_pcl_params,
    "recurrent_pcl": convert_pcl_params,
    "recurrent_trust_pcl": convert_pcl_params,
    "reinforce": convert_full_episode_params,
    "urex": convert_full_episode_params,
    "recurrent_reinforce": convert_full_episode_params,
    "recurrent_urex": convert_full_episode_params,
}
