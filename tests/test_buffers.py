"""Tests of the episode-aware path replay."""

import numpy as np
import pytest
from gymnasium import spaces

from sb3_pcl.common.buffers import PathReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
ACT_SPACE = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)


def make_buffer(size: int = 100, n_envs: int = 1, **kwargs) -> PathReplayBuffer:
    return PathReplayBuffer(size, OBS_SPACE, ACT_SPACE, device="cpu", n_envs=n_envs, **kwargs)


def step(buffer: PathReplayBuffer, values, dones=None, truncated=None, final=None) -> None:
    """Add one vectorised step where env i observes (v, 0) and gets reward v, next obs (v + 0.5, 0)."""
    values = np.asarray(values, dtype=np.float32)
    n = len(values)
    obs = np.stack([values, np.zeros(n)], axis=1).astype(np.float32)
    next_obs = obs.copy()
    next_obs[:, 0] += 0.5
    if final is not None:
        for i, value in final.items():
            next_obs[i, 0] = value
    dones = np.zeros(n, dtype=bool) if dones is None else np.asarray(dones)
    truncated = [False] * n if truncated is None else truncated
    infos = [{"TimeLimit.truncated": t} for t in truncated]
    buffer.add(obs, next_obs, values.reshape(n, 1) * 10, values, dones, infos)


def path_values(buffer: PathReplayBuffer, path_id: int) -> list[float]:
    assert buffer.observations is not None
    return buffer.observations[buffer.paths[path_id].slots, 0].tolist()


def test_lazy_allocation_and_size():
    buffer = make_buffer(50)
    assert buffer.observations is None and buffer.size() == 0
    step(buffer, [1.0])
    assert buffer.observations is not None and buffer.observations.shape == (50, 2)
    assert buffer.size() == 1 and buffer.n_paths == 1


def test_paths_are_tracked_per_env_when_steps_interleave():
    buffer = make_buffer(100, n_envs=2)
    step(buffer, [1, 101])
    step(buffer, [2, 102], dones=[True, False])
    step(buffer, [3, 103])
    step(buffer, [4, 104], dones=[False, True])
    step(buffer, [5, 105])
    by_first = {path_values(buffer, pid)[0]: pid for pid in buffer.paths}
    assert path_values(buffer, by_first[1]) == [1, 2]
    assert path_values(buffer, by_first[3]) == [3, 4, 5]
    assert path_values(buffer, by_first[101]) == [101, 102, 103, 104]
    assert path_values(buffer, by_first[105]) == [105]
    assert buffer.paths[by_first[1]].done and not buffer.paths[by_first[3]].done
    # actions and rewards stay aligned with observations
    slots = buffer.paths[by_first[101]].slots
    assert buffer.actions is not None and buffer.rewards is not None
    np.testing.assert_allclose(buffer.actions[slots, 0], [1010, 1020, 1030, 1040])
    np.testing.assert_allclose(buffer.rewards[slots], [101, 102, 103, 104])


def test_whole_path_batch_is_time_major_with_masks_and_bootstrap_info():
    buffer = make_buffer(100, n_envs=3)
    # env 0 terminates after 2 steps, env 1 is truncated by a time limit after 3, env 2 keeps running
    step(buffer, [1, 11, 21])
    step(buffer, [2, 12, 22], dones=[True, False, False], final={0: 99.0})
    step(buffer, [3, 13, 23], dones=[False, True, False], truncated=[False, True, False], final={1: 88.0})
    ids = np.array(sorted(buffer.paths))
    first = {path_values(buffer, pid)[0]: pid for pid in ids}
    segments = [(buffer.paths[first[v]], 0, len(buffer.paths[first[v]])) for v in (1, 11, 21)]
    batch = buffer._gather(segments, env=None)
    assert batch.observations.shape == (3, 3, 2)
    np.testing.assert_array_equal(batch.mask.numpy(), [[1, 1, 1], [1, 1, 1], [0, 1, 1]])
    np.testing.assert_allclose(batch.rewards.numpy(), [[1, 11, 21], [2, 12, 22], [0, 13, 23]])
    np.testing.assert_allclose(batch.observations[:, 2, 0].numpy(), [21, 22, 23])
    # terminated path: its terminal state; truncated path: the terminal obs, bootstrapped; running path: the latest next obs
    np.testing.assert_allclose(batch.final_observations[:, 0].numpy(), [99.0, 88.0, 23.5])
    np.testing.assert_array_equal(batch.terminated.numpy(), [1, 0, 0])
    np.testing.assert_array_equal(batch.at_path_start.numpy(), [1, 1, 1])


def test_timeouts_can_be_treated_as_terminations():
    buffer = make_buffer(100, handle_timeout_termination=False)
    step(buffer, [1])
    step(buffer, [2], dones=[True], truncated=[True])
    assert buffer.paths[0].terminated


def test_segments_are_cut_to_max_length_and_bootstrap_from_the_next_state():
    buffer = make_buffer(100, max_segment_length=3)
    for v in range(10):
        step(buffer, [float(v)], dones=[v == 9])
    np.random.seed(0)
    coverage = np.zeros(10)
    windows = set()
    for _ in range(3000):
        batch = buffer.sample(1)
        length = int(batch.mask[:, 0].sum())
        assert batch.observations.shape[0] == length <= 3
        obs = batch.observations[:length, 0, 0].numpy()
        np.testing.assert_allclose(np.diff(obs), 1.0)  # a contiguous window of the path
        start, end = int(obs[0]), int(obs[-1]) + 1
        windows.add((start, end))
        coverage[start:end] += 1
        assert batch.at_path_start[0] == float(start == 0)
        if end < 10:
            assert batch.final_observations[0, 0] == end and batch.terminated[0] == 0
        else:
            assert batch.final_observations[0, 0] == 9.5 and batch.terminated[0] == 1
    # windows are clipped to the path at both ends, and every step (the terminal one included) is covered equally
    assert windows == {(0, 1), (0, 2), *((s, s + 3) for s in range(8)), (8, 10), (9, 10)}
    np.testing.assert_allclose(coverage / coverage.mean(), np.ones(10), atol=0.15)
    assert buffer.sample(1, max_segment_length=100).observations.shape[0] == 10


def test_fifo_eviction_drops_oldest_finished_path_and_reuses_slots():
    buffer = make_buffer(6, eviction="fifo")
    for v in range(1, 10):
        step(buffer, [float(v)], dones=[v % 3 == 0])
    # paths [1,2,3] [4,5,6] [7,8,9]: the first one was evicted to make room for the third
    assert sorted(path_values(buffer, pid)[0] for pid in buffer.paths) == [4, 7]
    assert buffer.size() == 6
    assert sorted(s for p in buffer.paths.values() for s in p.slots) == list(range(6))


def test_rank_eviction_drops_the_lowest_priority_path():
    buffer = make_buffer(6, eviction="rank", priority="return")
    for values in ([5, 5], [1, 1], [9, 9]):
        step(buffer, [values[0]])
        step(buffer, [values[1]], dones=[True])
    step(buffer, [7])  # needs room: the path with return 2 must go
    assert sorted(path_values(buffer, pid)[0] for pid in buffer.paths) == [5, 7, 9]


def test_rand_eviction_is_random_but_never_touches_seeded_paths():
    kept_first = set()
    for seed in range(10):
        np.random.seed(seed)
        buffer = make_buffer(8, eviction="rand")
        buffer.add_path(np.array([[100.0, 0], [101, 0], [102, 0]]), np.zeros((2, 1)), np.array([1.0, 1.0]), seed=True)
        for v in range(1, 13):
            step(buffer, [float(v)], dones=[v % 2 == 0])
        firsts = sorted(path_values(buffer, pid)[0] for pid in buffer.paths)
        assert 100.0 in firsts  # the seeded path survives
        kept_first.add(tuple(firsts))
    assert len(kept_first) > 1


def test_seeded_paths_survive_fifo_and_rank_eviction():
    for eviction in ("fifo", "rank"):
        buffer = make_buffer(7, eviction=eviction, priority="return")
        buffer.add_path(np.array([[100.0, 0], [101, 0], [102, 0]]), np.zeros((2, 1)), np.array([-5.0, -5.0]), seed=True)
        for v in range(1, 30):
            step(buffer, [float(v)], dones=[v % 2 == 0])
        assert any(path_values(buffer, pid)[0] == 100.0 for pid in buffer.paths)
        assert buffer.size() <= 7


def test_a_single_episode_longer_than_the_buffer_drops_its_oldest_steps():
    buffer = make_buffer(4)
    for v in range(1, 8):
        step(buffer, [float(v)])
    (pid,) = buffer.paths
    assert path_values(buffer, pid) == [4, 5, 6, 7]
    batch = buffer.sample(1)
    assert batch.at_path_start[0] == 0  # the real start of the episode is gone


def test_seeded_paths_cannot_fill_the_whole_buffer():
    buffer = make_buffer(2)
    buffer.add_path(np.zeros((3, 2)), np.zeros((2, 1)), np.zeros(2), seed=True)
    with pytest.raises(ValueError, match="buffer_size"):
        step(buffer, [1.0])


@pytest.mark.parametrize("priority", ["step", "return"])
def test_priorities_and_sampling_distribution(priority):
    buffer = make_buffer(100, alpha=0.5, priority=priority)
    for rewards in ([1.0, 1.0], [3.0, 4.0], [0.5, 0.5]):
        step(buffer, [rewards[0]])
        step(buffer, [rewards[1]], dones=[True])
    prio = buffer.priorities()
    expected = [2.0, 4.0, 6.0] if priority == "step" else [2.0, 7.0, 1.0]
    np.testing.assert_allclose(prio, expected)
    probs = buffer.sampling_distribution()
    weights = np.exp(0.5 * (np.array(expected) - max(expected)))
    np.testing.assert_allclose(probs, weights / weights.sum())
    # empirically, sampling follows the distribution
    np.random.seed(1)
    counts = np.zeros(3)
    for _ in range(3000):
        pid = buffer.sample(1).path_ids[0]
        counts[sorted(buffer.paths).index(pid)] += 1
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.03)


def test_seeded_paths_get_the_top_priority():
    buffer = make_buffer(100, alpha=1.0, priority="return")
    buffer.add_path(np.zeros((2, 2)), np.zeros((1, 1)), np.array([-100.0]), seed=True)
    step(buffer, [3.0], dones=[True])
    step(buffer, [5.0], dones=[True])
    np.testing.assert_allclose(buffer.priorities(), [5.0, 3.0, 5.0])


def test_long_paths_count_as_several_segments():
    buffer = make_buffer(100, max_segment_length=4)
    for length in (2, 4, 5, 12):
        for v in range(length):
            step(buffer, [float(v)], dones=[v == length - 1])
    np.testing.assert_allclose(buffer.sampling_distribution(), np.array([5, 7, 8, 15]) / 35)  # (L + T - 1) / T
    weights = np.array([101.0, 103.0, 104.0, 111.0])
    np.testing.assert_allclose(buffer.sampling_distribution(max_segment_length=100), weights / weights.sum())
    whole = make_buffer(100)
    for length in (2, 12):
        for v in range(length):
            step(whole, [float(v)], dones=[v == length - 1])
    np.testing.assert_allclose(whole.sampling_distribution(), [0.5, 0.5])  # whole paths: one unit each
    assert buffer.sample(8).observations.shape[1] == 8  # more segments than paths: drawn with replacement


def test_recent_segments_cover_exactly_the_last_steps():
    buffer = make_buffer(100, n_envs=2)
    for v in range(1, 6):
        step(buffer, [float(v), 100.0 + v], dones=[v == 3, False])
    batch = buffer.recent_segments(3)
    assert batch is not None
    got = sorted(
        tuple(batch.observations[: int(batch.mask[:, col].sum()), col, 0].tolist()) for col in range(batch.mask.shape[1])
    )
    assert got == [(3.0,), (4.0, 5.0), (103.0, 104.0, 105.0)]
    assert batch.mask.sum() == 6


def test_non_finite_inputs_are_rejected():
    buffer = make_buffer(10)
    with pytest.raises(ValueError, match="NaN"):
        step(buffer, [np.nan])
    obs = np.array([[np.inf, 0.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="observation"):
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1, dtype=bool), [{}])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"priority": "rewards"}, "priority"),
        ({"eviction": "lifo"}, "eviction"),
        ({"max_segment_length": 0}, "max_segment_length"),
        ({"optimize_memory_usage": True}, "optimize_memory_usage"),
    ],
)
def test_invalid_buffer_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_buffer(10, **kwargs)


def test_add_path_checks_shapes():
    buffer = make_buffer(10)
    with pytest.raises(ValueError, match="T \\+ 1"):
        buffer.add_path(np.zeros((2, 2)), np.zeros((2, 1)), np.zeros(2))


def test_discrete_actions_are_stored_as_one_column():
    buffer = PathReplayBuffer(10, OBS_SPACE, spaces.Discrete(3), device="cpu")
    obs = np.zeros((1, 2), dtype=np.float32)
    buffer.add(obs, obs, np.array([2]), np.ones(1), np.array([True]), [{}])
    batch = buffer.sample(1)
    assert batch.actions.shape == (1, 1, 1) and batch.actions[0, 0, 0] == 2
