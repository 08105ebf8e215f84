"""
Exact tests of the pure torch functions of ``sb3_pcl.pcl.consistency``.

Every function is compared with a naive, loop-based NumPy reference written from the
specification (not from the torch code). Batches mix terminated paths (final value 0),
cut paths (bootstrap from ``V(s_L)``) and padded paths of many lengths; the padding of every
input is filled with random garbage, which must not leak into any valid output.
"""

import importlib.util
import math
import pathlib

import numpy as np
import pytest
import torch as th

try:
    import sb3_pcl.pcl.consistency as C
except ImportError:  # the package init may be broken while the package is being written
    _path = pathlib.Path(__file__).resolve().parents[1] / "sb3_pcl" / "common" / "consistency.py"
    _spec = importlib.util.spec_from_file_location("_pcl_consistency_under_test", _path)
    C = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(C)

ATOL = 1e-6
RTOL = 1e-6
ROLLOUTS = [1, 2, 3, 5]
GAMMAS = [1.0, 0.9, 0.5]
SEEDS = [0, 1, 2]
T_MAX = 8


def assert_close(actual, expected):
    if isinstance(actual, th.Tensor):
        actual = actual.detach().cpu().numpy()
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def grad_of(tensor):
    """Gradient of a leaf, zeros when nothing flowed into it."""
    return th.zeros_like(tensor) if tensor.grad is None else tensor.grad


def t64(x):
    return th.tensor(np.asarray(x), dtype=th.float64)


# ----------------------------------------------------------------------------------------------
# Random batches
# ----------------------------------------------------------------------------------------------


def make_batch(seed, n_steps, horizon=T_MAX):
    """Paths of lengths 0, 1, < d, == d, > d, == T and random ones; terminated and cut; garbage padding."""
    rng = np.random.default_rng(seed + 1000 * n_steps)
    lengths = [
        1,
        max(1, n_steps - 1),
        n_steps,
        min(horizon, n_steps + 1),
        horizon,
        horizon,
        0,
        int(rng.integers(1, horizon + 1)),
        int(rng.integers(1, horizon + 1)),
    ]
    n_paths = len(lengths)
    terminated = rng.random(n_paths) < 0.5
    terminated[4], terminated[5] = True, False  # a terminated and a cut path of full length T
    terminated[0], terminated[1] = False, True
    order = rng.permutation(n_paths)
    lengths = np.array(lengths)[order]
    terminated = terminated[order]

    mask = np.zeros((horizon, n_paths))
    for b in range(n_paths):
        for t in range(lengths[b]):
            mask[t, b] = 1.0

    def field(scale=1.0):
        valid = rng.normal(scale=scale, size=(horizon, n_paths))
        garbage = rng.uniform(-50.0, 50.0, size=(horizon, n_paths))
        return np.where(mask > 0, valid, garbage)

    final_values = rng.normal(size=n_paths)
    final_values[terminated] = 0.0
    return {
        "rewards": field(),
        "log_probs": field() - 1.0,
        "target_log_probs": field() - 1.0,
        "values": field(2.0),
        "final_values": final_values,
        "mask": mask,
        "lengths": lengths,
        "terminated": terminated,
    }


# ----------------------------------------------------------------------------------------------
# Naive references
# ----------------------------------------------------------------------------------------------


def ref_window_sum(x, mask, gamma, n_steps):
    horizon, n_paths = x.shape
    out = np.zeros_like(x)
    for b in range(n_paths):
        for t in range(horizon):
            if mask[t, b] == 0:
                continue
            total = 0.0
            for i in range(n_steps):
                if t + i < horizon:
                    total += gamma**i * x[t + i, b] * mask[t + i, b]
            out[t, b] = total
    return out


def lengths_of(mask):
    return [round(mask[:, b].sum()) for b in range(mask.shape[1])]


def ref_bootstrap(values, final_values, mask, gamma, n_steps):
    out = np.zeros_like(values)
    for b, length in enumerate(lengths_of(mask)):
        for t in range(length):
            k = min(n_steps, length - t)
            far = values[t + k, b] if t + k < length else final_values[b]
            out[t, b] = gamma**k * far
    return out


def ref_prepend(rewards, log_probs, relative, values, mask, gamma, n_steps):
    horizon, n_paths = rewards.shape
    extra = n_steps - 1
    shape = (horizon + extra, n_paths)
    out = {name: np.zeros(shape) for name in ("rewards", "log_probs", "relative_log_probs", "values", "mask")}
    for b in range(n_paths):
        has_steps = mask[0, b] > 0
        for j in range(1, extra + 1):  # virtual step -j lives in row extra - j
            row = extra - j
            out["values"][row, b] = gamma**j * values[0, b] if has_steps else 0.0
            out["mask"][row, b] = 1.0 if has_steps else 0.0
        for t in range(horizon):
            out["rewards"][extra + t, b] = rewards[t, b]
            out["log_probs"][extra + t, b] = log_probs[t, b]
            out["relative_log_probs"][extra + t, b] = relative[t, b]
            out["values"][extra + t, b] = values[t, b]
            out["mask"][extra + t, b] = mask[t, b]
    return out


def ref_consistency(batch, gamma, n_steps, tau=0.0, lam=0.0, start_windows=True, use_target=True):
    """
    Per-path loop over the (possibly extended) path. Returns a dict of (T', B) arrays and per-path windows.

    With a ``"far_values"`` entry in ``batch``, the far end ``V(s_{t+k})`` of each window is read
    from it instead of ``"values"`` (``"final_values"`` then belong to the same network).
    """
    far_source = batch.get("far_values", batch["values"])
    mask = batch["mask"]
    horizon, n_paths = mask.shape
    offset = n_steps - 1 if start_windows else 0
    shape = (horizon + offset, n_paths)
    res = {name: np.zeros(shape) for name in ("residual", "window_log_probs", "values", "bootstrap", "mask")}
    windows = []  # (path b, extended row u, k, extended length L', prepended rows of the path)
    for b, length in enumerate(lengths_of(mask)):
        off = offset if length > 0 else 0
        r = [0.0] * off + [batch["rewards"][t, b] for t in range(length)]
        lp = [0.0] * off + [batch["log_probs"][t, b] for t in range(length)]
        tlp = [0.0] * off + [batch["target_log_probs"][t, b] if use_target else 0.0 for t in range(length)]
        rel = [lp[i] - tlp[i] for i in range(len(lp))] if use_target else [0.0] * len(lp)
        v = [gamma ** (off - i) * batch["values"][0, b] for i in range(off)] + [batch["values"][t, b] for t in range(length)]
        v_far = [math.nan] * off + [far_source[t, b] for t in range(length)]  # a window never ends on a virtual step
        ext_len = length + off
        row0 = offset - off  # 0 unless an empty path
        for u in range(ext_len):
            k = min(n_steps, ext_len - u)
            far = v_far[u + k] if u + k < ext_len else batch["final_values"][b]
            boot = gamma**k * far
            inner = 0.0
            wlp = 0.0
            for i in range(k):
                inner += gamma**i * (r[u + i] - tau * lp[u + i] - lam * rel[u + i])
                wlp += gamma**i * lp[u + i]
            res["residual"][row0 + u, b] = -v[u] + boot + inner
            res["window_log_probs"][row0 + u, b] = wlp
            res["values"][row0 + u, b] = v[u]
            res["bootstrap"][row0 + u, b] = boot
            res["mask"][row0 + u, b] = 1.0
            windows.append((b, u, k, ext_len, off))
    res["offset"] = offset
    res["windows"] = windows
    return res


def ref_weighted_grads(ref, weights, gamma, horizon, n_paths):
    """
    Gradients of ``sum_u w(u) * X(u)`` for X = window_log_probs (w.r.t. log_probs), values and bootstrap
    (w.r.t. values and final_values), with ``w`` given on the extended rows.
    """
    offset = ref["offset"]
    g_lp = np.zeros((horizon, n_paths))
    g_values_base = np.zeros((horizon, n_paths))
    g_values_boot = np.zeros((horizon, n_paths))
    g_final_boot = np.zeros(n_paths)

    def value_source(e, off):
        """Extended index e -> (real step, coefficient)."""
        if e >= off:
            return e - off, 1.0
        return 0, gamma ** (off - e)

    for b, u, k, ext_len, off in ref["windows"]:
        w = weights[offset - off + u, b]
        for i in range(k):  # log-probs of the window (prepended steps have none)
            e = u + i
            if e >= off:
                g_lp[e - off, b] += w * gamma**i
        s, coef = value_source(u, off)
        g_values_base[s, b] += w * coef
        if u + k < ext_len:
            s, coef = value_source(u + k, off)
            g_values_boot[s, b] += w * gamma**k * coef
        else:
            g_final_boot[b] += w * gamma**k
    return g_lp, g_values_base, g_values_boot, g_final_boot


def ref_clip(x, clip_adv):
    if clip_adv is None:
        return x.copy()
    return np.array([[min(max(v, -clip_adv), clip_adv) for v in row] for row in x])


def run_consistency(batch, gamma, n_steps, tau=0.0, lam=0.0, start_windows=True, use_target=True, grad=False):
    tensors = {name: t64(batch[name]).requires_grad_(grad) for name in ("rewards", "log_probs", "values", "final_values")}
    tensors["mask"] = t64(batch["mask"])
    tensors["target_log_probs"] = t64(batch["target_log_probs"]).requires_grad_(grad and use_target)
    out = C.path_consistency(
        tensors["rewards"],
        tensors["log_probs"],
        tensors["values"],
        tensors["final_values"],
        tensors["mask"],
        gamma,
        n_steps,
        ent_coef=tau,
        target_log_probs=tensors["target_log_probs"] if use_target else None,
        relative_entropy_coef=lam,
        start_windows=start_windows,
    )
    return out, tensors


# ----------------------------------------------------------------------------------------------
# discounted_window_sum / bootstrap_values / prepend_start_windows
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_discounted_window_sum(gamma, n_steps):
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        x, mask = batch["rewards"], batch["mask"]
        out = C.discounted_window_sum(t64(x), t64(mask), gamma, n_steps)
        assert out.shape == x.shape
        assert_close(out, ref_window_sum(x, mask, gamma, n_steps))
        # The formula holds for any 0/1 mask, not only prefix masks.
        rng = np.random.default_rng(seed)
        holes = (rng.random(x.shape) < 0.6).astype(float)
        assert_close(C.discounted_window_sum(t64(x), t64(holes), gamma, n_steps), ref_window_sum(x, holes, gamma, n_steps))


@pytest.mark.parametrize("n_steps", [0, -1])
def test_discounted_window_sum_rejects_bad_rollout(n_steps):
    with pytest.raises(ValueError):
        C.discounted_window_sum(th.zeros(3, 2, dtype=th.float64), th.ones(3, 2, dtype=th.float64), 0.9, n_steps)


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_bootstrap_values(gamma, n_steps):
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        args = (batch["values"], batch["final_values"], batch["mask"])
        out = C.bootstrap_values(*map(t64, args), gamma, n_steps)
        assert_close(out, ref_bootstrap(*args, gamma, n_steps))


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_prepend_start_windows(gamma, n_steps):
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        relative = batch["log_probs"] - batch["target_log_probs"]
        args = (batch["rewards"], batch["log_probs"], relative, batch["values"], batch["mask"])
        out = C.prepend_start_windows(*map(t64, args), gamma, n_steps)
        expected = ref_prepend(*args, gamma, n_steps)
        n_rows = T_MAX + n_steps - 1
        for name in ("rewards", "log_probs", "relative_log_probs", "values", "mask"):
            got = getattr(out, name)
            assert got.shape == (n_rows, batch["mask"].shape[1]), name
            # Prepended rows are compared everywhere; the original rows are passed through unchanged.
            assert_close(got, expected[name])


# ----------------------------------------------------------------------------------------------
# path_consistency
# ----------------------------------------------------------------------------------------------

# (tau, lambda, pass target log-probs): plain PCL, Trust-PCL, and target log-probs given but unused (lambda = 0)
COEFS = [(0.0, 0.0, False), (0.2, 0.5, True), (0.4, 0.0, True)]


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("tau,lam,use_target", COEFS)
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_path_consistency(n_steps, gamma, tau, lam, use_target, start_windows):
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        out, _ = run_consistency(batch, gamma, n_steps, tau, lam, start_windows, use_target)
        ref = ref_consistency(batch, gamma, n_steps, tau, lam, start_windows, use_target)
        assert out.offset == ref["offset"]
        for name in ("residual", "window_log_probs", "values", "bootstrap", "mask"):
            got = getattr(out, name)
            assert got.shape == ref[name].shape, name
            assert_close(got, ref[name])


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_path_consistency_far_values(n_steps, gamma, start_windows):
    """``far_values`` (e.g. a target value network) replace ``V(s_{t+k})`` at the far end only, never ``V(s_t)``."""
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        rng = np.random.default_rng(seed + 77)
        far = np.where(batch["mask"] > 0, rng.normal(size=batch["mask"].shape), rng.uniform(-50, 50, batch["mask"].shape))
        out = C.path_consistency(
            t64(batch["rewards"]),
            t64(batch["log_probs"]),
            t64(batch["values"]),
            t64(batch["final_values"]),
            t64(batch["mask"]),
            gamma,
            n_steps,
            ent_coef=0.2,
            target_log_probs=t64(batch["target_log_probs"]),
            relative_entropy_coef=0.5,
            start_windows=start_windows,
            far_values=t64(far),
        )
        ref = ref_consistency({**batch, "far_values": far}, gamma, n_steps, 0.2, 0.5, start_windows)
        for name in ("residual", "window_log_probs", "values", "bootstrap", "mask"):
            assert_close(getattr(out, name), ref[name])
        # not a no-op: the far values matter wherever a window ends inside its path
        default = ref_consistency(batch, gamma, n_steps, 0.2, 0.5, start_windows)
        assert not np.allclose(ref["residual"], default["residual"])


@pytest.mark.parametrize("tau,lam", [(0.0, 0.0), (0.3, 0.6)])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", [2, 3, 5])
def test_start_windows_are_discounted_windows_from_s0(n_steps, gamma, tau, lam):
    """Row ``d-1-j`` (virtual step ``-j``) holds ``gamma^j`` times the consistency of the ``min(d-j, L)`` window at s_0."""
    for seed in SEEDS:
        batch = make_batch(seed, n_steps)
        out, _ = run_consistency(batch, gamma, n_steps, tau, lam, start_windows=True)
        residual = out.residual.detach().numpy()
        r, lp, tlp, v = batch["rewards"], batch["log_probs"], batch["target_log_probs"], batch["values"]
        for b, length in enumerate(batch["lengths"]):
            for j in range(1, n_steps):
                row = n_steps - 1 - j
                if length == 0:
                    assert residual[row, b] == 0.0
                    continue
                m = min(n_steps - j, length)
                far = v[m, b] if m < length else batch["final_values"][b]
                inner = sum(gamma**s * (r[s, b] - tau * lp[s, b] - lam * (lp[s, b] - tlp[s, b])) for s in range(m))
                expected = gamma**j * (-v[0, b] + gamma**m * far + inner)
                assert abs(residual[row, b] - expected) <= ATOL + RTOL * abs(expected), (b, j)


def test_path_consistency_requires_target_log_probs():
    batch = make_batch(0, 2)
    with pytest.raises(ValueError):
        run_consistency(batch, 0.9, 2, lam=0.5, use_target=False)


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("tau,lam", [(0.0, 0.0), (0.3, 0.6)])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_residual_gradients(n_steps, gamma, tau, lam, start_windows):
    """The residual is differentiable in log_probs, values and final_values (target log-probs are constants)."""
    batch = make_batch(7, n_steps)
    out, tensors = run_consistency(batch, gamma, n_steps, tau, lam, start_windows, grad=True)
    rng = np.random.default_rng(3)
    weights = rng.normal(size=out.residual.shape)
    (out.residual * t64(weights)).sum().backward()
    ref = ref_consistency(batch, gamma, n_steps, tau, lam, start_windows)
    g_lp, g_base, g_boot, g_final = ref_weighted_grads(ref, weights, gamma, *batch["mask"].shape)
    assert_close(grad_of(tensors["log_probs"]), -(tau + lam) * g_lp)
    assert_close(grad_of(tensors["values"]), -g_base + g_boot)
    assert_close(grad_of(tensors["final_values"]), g_final)
    # d C / d r: plain discounted sums over the windows
    assert_close(grad_of(tensors["rewards"]), g_lp)
    # the target policy's log-probabilities are constants
    assert_close(grad_of(tensors["target_log_probs"]), np.zeros(batch["mask"].shape))


# ----------------------------------------------------------------------------------------------
# Losses and targets
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("clip_adv", [None, 0.5])
@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_pcl_policy_loss(n_steps, gamma, start_windows, clip_adv):
    for seed in SEEDS:
        tau, lam = 0.2, 0.4
        batch = make_batch(seed, n_steps)
        horizon, n_paths = batch["mask"].shape
        out, tensors = run_consistency(batch, gamma, n_steps, tau, lam, start_windows, grad=True)
        loss = C.pcl_policy_loss(out, clip_adv=clip_adv)
        loss.backward()

        ref = ref_consistency(batch, gamma, n_steps, tau, lam, start_windows)
        weight = ref_clip(ref["residual"], clip_adv)
        expected = 0.0
        for b in range(n_paths):
            for t in range(weight.shape[0]):
                if ref["mask"][t, b]:
                    expected += -weight[t, b] * ref["window_log_probs"][t, b]
        expected /= n_paths
        assert abs(loss.item() - expected) <= ATOL + RTOL * abs(expected)

        # d/d lp(s) = -(1/B) sum over windows t containing s of clip(C(t)) gamma^(s - t), C constant.
        offset = ref["offset"]
        grad = np.zeros((horizon, n_paths))
        for b, u, k, _ext_len, off in ref["windows"]:
            for s in range(horizon):
                e = s + off
                if u <= e < u + k:
                    grad[s, b] -= weight[offset - off + u, b] * gamma ** (e - u) / n_paths
        assert_close(grad_of(tensors["log_probs"]), grad)
        assert_close(grad_of(tensors["values"]), np.zeros((horizon, n_paths)))
        assert_close(grad_of(tensors["final_values"]), np.zeros(n_paths))


@pytest.mark.parametrize("clip_adv", [None, 0.5])
@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_pcl_value_loss(n_steps, gamma, start_windows, clip_adv):
    for seed in SEEDS:
        tau, lam = 0.1, 0.3
        batch = make_batch(seed, n_steps)
        horizon, n_paths = batch["mask"].shape
        out, tensors = run_consistency(batch, gamma, n_steps, tau, lam, start_windows, grad=True)
        loss = C.pcl_value_loss(out, clip_adv=clip_adv)
        loss.backward()

        ref = ref_consistency(batch, gamma, n_steps, tau, lam, start_windows)
        weight = ref_clip(ref["residual"], clip_adv)
        expected = 0.0
        for b in range(n_paths):
            for t in range(weight.shape[0]):
                if ref["mask"][t, b]:
                    expected += -weight[t, b] * (ref["values"][t, b] - ref["bootstrap"][t, b])
        expected /= n_paths
        assert abs(loss.item() - expected) <= ATOL + RTOL * abs(expected)

        # Gradient by a direct loop: V(s) is the baseline of its own window, the far end of the windows
        # that reach it, and (s = 0, start windows) the scaled baseline gamma^j V(s_0) of the virtual rows.
        g_values = np.zeros((horizon, n_paths))
        g_final = np.zeros(n_paths)
        offset = ref["offset"]
        for b, u, k, ext_len, off in ref["windows"]:
            w = weight[offset - off + u, b] / n_paths
            t = u - off  # real time of the window start (negative for virtual steps)
            if t >= 0:
                g_values[t, b] -= w
            else:
                g_values[0, b] -= w * gamma ** (-t)
            if t + k < ext_len - off:
                g_values[t + k, b] += w * gamma**k
            else:
                g_final[b] += w * gamma**k
        assert_close(grad_of(tensors["values"]), g_values)
        assert_close(grad_of(tensors["final_values"]), g_final)
        assert_close(grad_of(tensors["log_probs"]), np.zeros((horizon, n_paths)))
        # and the same through the generic helper
        _, g_base, g_boot, g_fin = ref_weighted_grads(ref, weight, gamma, horizon, n_paths)
        assert_close(grad_of(tensors["values"]), -(g_base - g_boot) / n_paths)
        assert_close(grad_of(tensors["final_values"]), g_fin / n_paths)


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("n_steps", ROLLOUTS)
def test_consistency_loss_and_value_targets(n_steps, gamma, start_windows):
    for seed in SEEDS:
        tau, lam = 0.25, 0.5
        batch = make_batch(seed, n_steps)
        horizon, n_paths = batch["mask"].shape
        out, _ = run_consistency(batch, gamma, n_steps, tau, lam, start_windows, grad=True)
        ref = ref_consistency(batch, gamma, n_steps, tau, lam, start_windows)

        loss = C.consistency_loss(out)
        expected = 0.0
        for b in range(n_paths):
            for t in range(ref["residual"].shape[0]):
                if ref["mask"][t, b]:
                    expected += 0.5 * ref["residual"][t, b] ** 2
        expected /= n_paths
        assert abs(loss.item() - expected) <= ATOL + RTOL * abs(expected)

        targets = C.value_targets(out)
        assert targets.shape == (horizon, n_paths)
        assert not targets.requires_grad
        expected_targets = np.zeros((horizon, n_paths))
        offset = ref["offset"]
        for b, length in enumerate(batch["lengths"]):
            for t in range(length):
                expected_targets[t, b] = batch["values"][t, b] + ref["residual"][offset + t, b]
        assert_close(targets, expected_targets)


# ----------------------------------------------------------------------------------------------
# soft_value
# ----------------------------------------------------------------------------------------------


def ref_soft_value(logits, temperature):
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for row in flat:
        top = max(row)
        out.append(temperature * (top + math.log(sum(math.exp(a - top) for a in row))))
    return np.array(out).reshape(logits.shape[:-1])


@pytest.mark.parametrize("temperature", [1.0, 0.05, 2.5])
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_soft_value(temperature, scale):
    rng = np.random.default_rng(11)
    logits = rng.normal(scale=scale, size=(4, 3, 5))
    assert_close(C.soft_value(t64(logits), temperature), ref_soft_value(logits, temperature))


def test_soft_value_large_logits():
    logits = np.array([[1000.0, 999.0, 0.0], [1000.0, 1000.0, 1000.0], [-1000.0, -1001.0, -2000.0]])
    got = C.soft_value(t64(logits), 0.5).numpy()
    assert np.all(np.isfinite(got))
    assert_close(got, ref_soft_value(logits, 0.5))
    assert_close(got[1], 0.5 * (1000.0 + math.log(3.0)))


# ----------------------------------------------------------------------------------------------
# Behaviour: exact values make every residual vanish
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("n_steps", [*ROLLOUTS, 7])
def test_residuals_vanish_for_true_values(n_steps, start_windows):
    """tau = 0, gamma = 1, terminated path, V(s_t) = sum of the remaining rewards -> C = 0."""
    rewards = np.array([1.0, -2.0, 0.5, 3.0, 0.25])
    values = np.array([sum(rewards[t:]) for t in range(len(rewards))])
    mask = np.ones((5, 1))
    out = C.path_consistency(
        t64(rewards[:, None]),
        t64(np.full((5, 1), -0.7)),
        t64(values[:, None]),
        t64([0.0]),
        t64(mask),
        1.0,
        n_steps,
        start_windows=start_windows,
    )
    assert_close(out.residual, np.zeros(out.residual.shape))
    assert_close(C.value_targets(out), values[:, None])


@pytest.mark.parametrize("start_windows", [True, False])
@pytest.mark.parametrize("n_steps", [1, 2, 3, 4])
@pytest.mark.parametrize("tau,gamma", [(0.5, 0.9), (1.0, 1.0), (0.2, 0.5)])
def test_residuals_vanish_for_soft_optimal_chain(tau, gamma, n_steps, start_windows):
    """
    A 3-step chain s0 -> s1 -> s2 -> terminal, 3 actions per state with different rewards. With the soft-optimal
    values V*(s) = tau logsumexp((r(s, a) + gamma V*(s')) / tau) and policy pi*(a|s) = exp((r + gamma V*(s') - V*(s)) / tau),
    every path's consistency is exactly 0 (PCL's theorem), for any actions taken.
    """
    rng = np.random.default_rng(5)
    n_states, n_actions = 3, 3
    reward = rng.normal(size=(n_states, n_actions))
    soft_v = np.zeros(n_states + 1)  # soft_v[3] = terminal
    log_pi = np.zeros((n_states, n_actions))
    for s in reversed(range(n_states)):
        q = reward[s] + gamma * soft_v[s + 1]
        soft_v[s] = C.soft_value(t64(q / tau), tau).item()
        log_pi[s] = (q - soft_v[s]) / tau
    assert_close(np.exp(log_pi).sum(axis=1), np.ones(n_states))

    # Three paths in one batch: the full terminated episode, a cut prefix of length 2 (bootstrap V*(s2)),
    # and a cut prefix of length 1; actions are random.
    n_paths = 3
    lengths = [3, 2, 1]
    actions = rng.integers(n_actions, size=(n_states, n_paths))
    mask = np.zeros((n_states, n_paths))
    r = rng.uniform(-9, 9, size=(n_states, n_paths))  # garbage on padding
    lp = rng.uniform(-9, 9, size=(n_states, n_paths))
    v = rng.uniform(-9, 9, size=(n_states, n_paths))
    for b, length in enumerate(lengths):
        for t in range(length):
            mask[t, b] = 1.0
            r[t, b] = reward[t, actions[t, b]]
            lp[t, b] = log_pi[t, actions[t, b]]
            v[t, b] = soft_v[t]
    final = np.array([soft_v[length] for length in lengths])
    assert final[0] == 0.0
    out = C.path_consistency(
        t64(r), t64(lp), t64(v), t64(final), t64(mask), gamma, n_steps, ent_coef=tau, start_windows=start_windows
    )
    assert_close(out.residual, np.zeros(out.residual.shape))


def test_non_finite_padding_does_not_leak_into_valid_outputs():
    mask = t64([[1, 1], [1, 1], [0, 1], [0, 1]])
    rewards = t64([[1.0, 1.0], [2.0, 2.0], [math.nan, 3.0], [math.nan, 4.0]])
    log_probs = t64([[-0.5, -0.5], [-0.7, -0.7], [math.nan, -0.2], [math.inf, -0.1]])
    values = t64([[3.0, 3.0], [2.0, 2.0], [math.inf, 1.0], [-math.inf, 0.5]])
    out = C.path_consistency(rewards, log_probs, values, t64([1.0, 0.0]), mask, gamma=0.9, n_steps=3, ent_coef=0.1)
    assert th.isfinite(out.residual).all() and th.isfinite(out.bootstrap).all()
    clean = C.path_consistency(
        th.nan_to_num(rewards * mask),
        th.nan_to_num(log_probs * mask, posinf=0.0),
        th.where(mask > 0, values, 0.0),
        t64([1.0, 0.0]),
        mask,
        gamma=0.9,
        n_steps=3,
        ent_coef=0.1,
    )
    assert_close(out.residual, clean.residual)


def test_window_sums_of_stacked_series_are_those_of_each_series() -> None:
    gen = th.Generator().manual_seed(0)
    series = th.randn(12, 5, 3, generator=gen)
    mask = (th.arange(12).unsqueeze(1) < th.tensor([12, 7, 1, 9, 3])).float()
    stacked = C.discounted_window_sum(series, mask.unsqueeze(-1), 0.97, 4)
    for k in range(3):
        assert th.equal(stacked[..., k], C.discounted_window_sum(series[..., k], mask, 0.97, 4))
