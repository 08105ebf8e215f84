"""
Training statistics computed on the data's device, and moved to the host together once per training iteration.

On a GPU each ``tensor.item()``, each boolean-mask index (``x[mask]``, a ``nonzero``) and each CPU copy waits for the
device. The helpers below avoid all three, so that an iteration's statistics cross to the host in one transfer.
"""

import torch as th
from stable_baselines3.common.distributions import Distribution, kl_divergence


def masked_mean(values: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """
    :param values: values of any shape
    :param mask: which values count (bool, or 0/1 floats), the shape of ``values``
    :return: the mean of the values where ``mask`` holds, a 0-d float64 tensor, without leaving the device
    """
    weights = mask.reshape(values.shape).to(th.float64)
    return (values.double() * weights).sum() / weights.sum()


def explained_variance_tensor(y_pred: th.Tensor, y_true: th.Tensor, mask: th.Tensor | None = None) -> th.Tensor:
    """
    SB3's :func:`~stable_baselines3.common.utils.explained_variance`, ``1 - Var[y_true - y_pred] / Var[y_true]``, computed
    in float64 on the data's device (no transfer to the host).

    :param y_pred: predictions
    :param y_true: targets, the shape of ``y_pred``
    :param mask: which entries count (default: all); masked out entries are left out of both variances
    :return: a 0-d float64 tensor, NaN when ``Var[y_true]`` is 0
    """
    y_pred, y_true = y_pred.double(), y_true.double()
    if mask is None:
        mask = th.ones_like(y_true, dtype=th.bool)

    def variance(x: th.Tensor) -> th.Tensor:
        return masked_mean((x - masked_mean(x, mask)) ** 2, mask)

    var_y = variance(y_true)
    return th.where(var_y == 0, th.full_like(var_y, float("nan")), 1 - variance(y_true - y_pred) / var_y)


def on_host(history: dict[str, list[float | th.Tensor]]) -> dict[str, list[float]]:
    """
    :param history: statistics per key, floats or 0-d tensors
    :return: the same statistics as floats, every tensor moved to the host in one transfer (in float64, which keeps
        float32 values exact: the floats are those ``tensor.item()`` returns)
    """
    tensors = [value for values in history.values() for value in values if isinstance(value, th.Tensor)]
    if not tensors:
        return history  # type: ignore[return-value]
    host = iter(th.stack([tensor.detach().reshape(()).double() for tensor in tensors]).cpu().tolist())
    return {
        key: [next(host) if isinstance(value, th.Tensor) else value for value in values] for key, values in history.items()
    }


def state_kl(p: Distribution, q: Distribution) -> th.Tensor:
    """
    ``KL(p || q)`` per state, one value per row of the distributions' batch.

    SB3's ``kl_divergence`` returns one column per action dimension for the factorised
    distributions (diagonal Gaussian); those are summed, the KL of the joint action distribution.

    :param p: the first distribution (e.g. the old or the target policy)
    :param q: the second distribution, of the same type and batch size
    :return: ``(batch,)``
    """
    kl = kl_divergence(p, q)
    return kl.sum(dim=-1) if kl.dim() > 1 else kl
