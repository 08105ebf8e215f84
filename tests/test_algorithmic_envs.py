"""
Tests of the Gymnasium port of gym's algorithmic tasks against the rules of ``ALGORITHMIC_TASKS.md``:
spaces, step order and rewards, time limits, curriculum, task inputs/targets, expert demonstrations,
seeding (single envs and vectorised envs), the combined-action wrapper, rendering and the episode files.
"""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sb3_pcl.envs import (
    ALGORITHMIC_ENV_IDS,
    AlgorithmicEnv,
    CombinedActionWrapper,
    CopyEnv,
    DuplicatedInputEnv,
    GridAlgorithmicEnv,
    RepeatCopyEnv,
    ReversedAddition3Env,
    ReversedAdditionEnv,
    ReverseEnv,
    TapeAlgorithmicEnv,
    duplicated_input_data,
    duplicated_input_target,
    expert_actions,
    generate_expert_episodes,
    load_episodes,
    register_algorithmic_envs,
    reversed_addition_target,
    save_episodes,
)

register_algorithmic_envs()

ENV_CLASSES = [CopyEnv, DuplicatedInputEnv, RepeatCopyEnv, ReverseEnv, ReversedAdditionEnv, ReversedAddition3Env]
TAPE_CLASSES = [CopyEnv, DuplicatedInputEnv, RepeatCopyEnv, ReverseEnv]
ADDITION_CLASSES = [ReversedAdditionEnv, ReversedAddition3Env]

# (class, id, base, chars, starting min_length, last, threshold, gym reward_threshold)
TASK_FACTS = [
    (CopyEnv, "sb3_pcl/Copy-v0", 5, True, 2, 10, -1.0, 25.0),
    (DuplicatedInputEnv, "sb3_pcl/DuplicatedInput-v0", 5, True, 2, 10, -1.0, 9.0),
    (RepeatCopyEnv, "sb3_pcl/RepeatCopy-v0", 5, True, 2, 50, -0.1, 75.0),
    (ReverseEnv, "sb3_pcl/Reverse-v0", 2, True, 1, 50, -0.1, 25.0),
    (ReversedAdditionEnv, "sb3_pcl/ReversedAddition-v0", 3, False, 2, 10, -1.0, 25.0),
    (ReversedAddition3Env, "sb3_pcl/ReversedAddition3-v0", 3, False, 2, 10, -1.0, 25.0),
]

IDLE_TAPE = np.array([TapeAlgorithmicEnv.LEFT, 0, 0])
IDLE_GRID = np.array([GridAlgorithmicEnv.UP, 0, 0])


def idle_action(env: AlgorithmicEnv) -> np.ndarray:
    """A no-write action."""
    return IDLE_GRID if isinstance(env, GridAlgorithmicEnv) else IDLE_TAPE


def write_action(env: AlgorithmicEnv, symbol: int) -> np.ndarray:
    """A write action that moves the head right."""
    return np.array([1, 1, int(symbol)])


def play(env: gym.Env, actions: np.ndarray) -> tuple[list[float], bool, bool]:
    """Step the actions until the episode ends; return the rewards and the final flags."""
    rewards: list[float] = []
    terminated = truncated = False
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        if terminated or truncated:
            break
    return rewards, terminated, truncated


def play_expert(env: AlgorithmicEnv) -> list[float]:
    """Play the expert on the current episode and check it ends the episode."""
    rewards, terminated, truncated = play(env, expert_actions(env))
    assert terminated and not truncated
    return rewards


def addition3_expert_is_feasible(env: AlgorithmicEnv) -> bool:
    """Reading the 3 digits of every column takes 3 steps per column, plus one step for a final carry."""
    carry_step = int(len(env.target) > env.input_width)
    return env.rows * env.input_width + carry_step <= env.time_limit


def seed_where(env: AlgorithmicEnv, condition, seeds=range(200)) -> int:
    """Reset ``env`` with successive seeds until its episode satisfies ``condition``; return that seed."""
    for seed in seeds:
        env.reset(seed=seed)
        if condition(env):
            return seed
    raise AssertionError("no seed satisfies the condition")


# ----------------------------------------------------------------------------------------------
# Registration and spaces
# ----------------------------------------------------------------------------------------------


def test_registration_is_idempotent_and_matches_gym():
    assert register_algorithmic_envs() == []
    assert set(ALGORITHMIC_ENV_IDS) == {facts[1] for facts in TASK_FACTS}
    for cls, env_id, *_, reward_threshold in TASK_FACTS:
        spec = gym.spec(env_id)
        assert spec.reward_threshold == reward_threshold
        assert spec.max_episode_steps == 200
        assert spec.entry_point == f"sb3_pcl.envs.algorithmic:{cls.__name__}"
        env = gym.make(env_id)
        assert type(env.unwrapped) is cls
        env.close()


@pytest.mark.parametrize("facts", TASK_FACTS, ids=lambda facts: facts[1])
def test_spaces_and_defaults(facts):
    cls, _, base, chars, min_length, last, threshold, _ = facts
    env = cls()
    moves = 4 if issubclass(cls, GridAlgorithmicEnv) else 2
    assert env.observation_space == gym.spaces.Discrete(base + 1)
    assert env.action_space == gym.spaces.MultiDiscrete([moves, 2, base])
    assert (env.base, env.chars, env.min_length, env.last, env.min_reward_threshold) == (
        base,
        chars,
        min_length,
        last,
        threshold,
    )
    assert env.charmap[-1] == " "
    assert env.charmap[0] == ("A" if chars else "0")
    if issubclass(cls, GridAlgorithmicEnv):
        assert env.rows == (3 if cls is ReversedAddition3Env else 2)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert info == {"min_length": min_length, "target_length": len(env.target)}


def test_constructor_overrides():
    env = CopyEnv(base=3, chars=False, starting_min_length=6, last=4, min_reward_threshold=-0.5)
    assert (env.base, env.chars, env.min_length, env.last, env.min_reward_threshold) == (3, False, 6, 4, -0.5)
    assert env.action_space == gym.spaces.MultiDiscrete([2, 2, 3])
    env.reset(seed=1)
    assert 6 <= len(env.input_data) <= 8 and np.all(env.input_data < 3)
    assert ReversedAdditionEnv(rows=4).action_space == gym.spaces.MultiDiscrete([4, 2, 3])
    four_rows = ReversedAdditionEnv(rows=4)
    four_rows.reset(seed=0)
    assert four_rows.input_data.shape == (four_rows.input_width, 4)
    # keyword arguments also go through gymnasium.make
    made = gym.make("sb3_pcl/Reverse-v0", last=100, starting_min_length=3)
    assert made.unwrapped.last == 100 and made.unwrapped.min_length == 3
    with pytest.raises(ValueError):
        CopyEnv(render_mode="human")
    with pytest.raises(ValueError):
        CopyEnv(last=0)


# ----------------------------------------------------------------------------------------------
# Step rules and rewards
# ----------------------------------------------------------------------------------------------


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError):
        CopyEnv().step(np.array([1, 1, 0]))


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_invalid_actions_raise_value_error(cls):
    env = cls()
    env.reset(seed=0)
    moves = len(cls.MOVEMENTS)
    for bad in ([moves, 0, 0], [0, 2, 0], [0, 1, env.base], [-1, 0, 0], [0, 0], [0, 0, 0, 0], [0.5, 0, 0]):
        with pytest.raises(ValueError, match="Invalid action"):
            env.step(np.array(bad))
    with pytest.raises(ValueError, match=r"\[0, 2, 0\]"):
        env.step([0, 2, 0])
    # valid integer-like inputs
    env.step((0, 0, 0))
    env.step(np.array([1.0, 0.0, 0.0]))


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_correct_and_wrong_writes(cls):
    env = cls()
    env.reset(seed=3)
    target = env.target.copy()
    _, reward, terminated, truncated, info = env.step(write_action(env, target[0]))
    assert reward == 1.0 and not terminated and not truncated
    assert env.write_head_position == 1 and env.time == 1
    assert info == {"min_length": env.min_length, "target_length": len(target)}
    wrong = (int(target[1]) + 1) % env.base
    _, reward, terminated, truncated, _ = env.step(write_action(env, wrong))
    assert reward == -0.5 and terminated and not truncated
    assert env.write_head_position == 2
    assert env.episode_total_reward == 0.5


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_symbol_ignored_without_write(cls):
    env = cls()
    env.reset(seed=4)
    for symbol in range(env.base):
        _, reward, terminated, _, _ = env.step(np.array([1, 0, symbol]))
        assert reward == 0.0 and not terminated
    assert env.write_head_position == 0


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_writing_the_whole_target_terminates(cls):
    env = cls()
    env.reset(seed=5)
    rewards, terminated, truncated = play(env, [write_action(env, symbol) for symbol in env.target])
    assert terminated and not truncated
    assert rewards == [1.0] * len(env.target)


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_time_limits(cls):
    env = cls(starting_min_length=3)
    env.reset(seed=6)
    if isinstance(env, GridAlgorithmicEnv):
        assert env.time_limit == 2 * env.input_width + 4
        assert env.input_data.shape == (env.input_width, env.rows)
    else:
        assert env.time_limit == len(env.input_data) + len(env.target) + 4
    for _ in range(env.time_limit):
        _, reward, terminated, truncated, _ = env.step(idle_action(env))
        assert reward == 0.0 and not terminated and not truncated
    _, reward, terminated, truncated, _ = env.step(idle_action(env))
    assert reward == -1.0 and terminated and not truncated


@pytest.mark.parametrize("cls", ADDITION_CLASSES)
def test_addition_time_limit_counts_columns_not_target(cls):
    env = cls()
    seed_where(env, lambda e: len(e.target) == e.input_width + 1)
    assert env.time_limit == 2 * env.input_width + 4 == 2 * len(env.target) + 2


@pytest.mark.parametrize("idle_steps, last_reward", [(0, 1.0), (1, -1.0)])
def test_final_write_at_time_limit(idle_steps, last_reward):
    """A correct last write at ``time == time_limit`` earns +1; one step later the -1 replaces it."""
    env = CopyEnv()
    env.reset(seed=7)
    length = len(env.target)
    assert env.time_limit == 2 * length + 4
    actions = [IDLE_TAPE] * (length + 4 + idle_steps) + [write_action(env, symbol) for symbol in env.target]
    rewards, terminated, truncated = play(env, actions)
    assert terminated and not truncated
    assert len(rewards) == len(actions)
    assert env.time == env.time_limit + idle_steps
    assert rewards[-1] == last_reward
    assert sum(rewards) == (length if idle_steps == 0 else length - 2)


def test_wrong_write_after_time_limit_gets_minus_one():
    env = CopyEnv()
    env.reset(seed=8)
    play(env, [IDLE_TAPE] * env.time_limit)
    _, reward, terminated, _, _ = env.step(write_action(env, (int(env.target[0]) + 1) % env.base))
    assert reward == -1.0 and terminated


def test_tape_head_is_unbounded_and_reads_blank_outside():
    env = CopyEnv()
    obs, _ = env.reset(seed=9)
    assert obs == env.input_data[0] and env.read_head_position == 0
    for _ in range(5):
        obs, *_ = env.step(IDLE_TAPE)
    assert env.read_head_position == -5 and obs == env.base
    for expected in range(-4, len(env.input_data) + 2):
        obs, *_ = env.step(np.array([TapeAlgorithmicEnv.RIGHT, 0, 0]))
        assert env.read_head_position == expected
        assert obs == (env.input_data[expected] if 0 <= expected < len(env.input_data) else env.base)


@pytest.mark.parametrize("cls", ADDITION_CLASSES)
def test_grid_moves(cls):
    env = cls()
    obs, _ = env.reset(seed=10)
    grid = env.input_data
    assert env.read_head_position == (0, 0) and obs == grid[0][0]

    def move(direction):
        return env.step(np.array([direction, 0, 0]))[0]

    assert move(GridAlgorithmicEnv.DOWN) == grid[0][1] and env.read_head_position == (0, 1)
    assert move(GridAlgorithmicEnv.RIGHT) == grid[1][1] and env.read_head_position == (1, 1)
    assert move(GridAlgorithmicEnv.UP) == grid[1][0] and env.read_head_position == (1, 0)
    assert move(GridAlgorithmicEnv.UP) == env.base and env.read_head_position == (1, -1)
    assert move(GridAlgorithmicEnv.LEFT) == env.base and env.read_head_position == (0, -1)
    assert move(GridAlgorithmicEnv.LEFT) == env.base and env.read_head_position == (-1, -1)


# ----------------------------------------------------------------------------------------------
# Task inputs and targets
# ----------------------------------------------------------------------------------------------


def test_reversed_addition_examples():
    np.testing.assert_array_equal(reversed_addition_target([[2, 2], [1, 0]], 3), [1, 2])
    np.testing.assert_array_equal(reversed_addition_target([[1, 2], [1, 0], [2, 2]], 3), [0, 2, 1, 1])
    # three rows: the carry can be 2
    np.testing.assert_array_equal(reversed_addition_target([[2, 2, 2], [2, 2, 2]], 3), [0, 2, 2])
    np.testing.assert_array_equal(reversed_addition_target([[0, 0], [0, 0]], 3), [0, 0])
    env = ReversedAdditionEnv()
    np.testing.assert_array_equal(env.target_from_input_data(np.array([[2, 2], [1, 0]])), [1, 2])


@pytest.mark.parametrize("cls", ADDITION_CLASSES)
def test_addition_target_is_the_sum(cls):
    env = cls(starting_min_length=4)
    for seed in range(10):
        env.reset(seed=seed)
        numbers = [
            sum(int(digit) * 3**column for column, digit in enumerate(env.input_data[:, row])) for row in range(env.rows)
        ]
        target_value = sum(int(digit) * 3**position for position, digit in enumerate(env.target))
        assert target_value == sum(numbers)
        assert len(env.target) in (env.input_width, env.input_width + 1)
        assert len(env.target) == env.input_width or env.target[-1] > 0


def test_duplicated_input_construction():
    np.testing.assert_array_equal(duplicated_input_data([3, 1, 4]), [3, 3, 1, 1, 4, 4])
    np.testing.assert_array_equal(duplicated_input_target([3, 3, 1, 1, 4, 4]), [3, 1, 4])
    for seed in range(20):
        env = DuplicatedInputEnv(starting_min_length=1)  # fresh: unplayed length-1 episodes would promote it
        _, info = env.reset(seed=seed)
        # n in {1, 2, 3}: size max(n, 2) -> always one symbol written twice
        assert len(env.input_data) == 2 and len(env.target) == 1 == info["target_length"]
        assert env.input_data[0] == env.input_data[1] == env.target[0]
    env = DuplicatedInputEnv(starting_min_length=5)
    sizes = set()
    for seed in range(30):
        env.reset(seed=seed)
        sizes.add(len(env.input_data))
        np.testing.assert_array_equal(env.input_data[::2], env.input_data[1::2])
        np.testing.assert_array_equal(env.target, env.input_data[::2])
    assert sizes == {4, 6}  # n in {5, 6, 7} -> n // 2 symbols


def test_tape_targets():
    data = np.array([0, 3, 4, 1])
    np.testing.assert_array_equal(CopyEnv().target_from_input_data(data), data)
    np.testing.assert_array_equal(RepeatCopyEnv().target_from_input_data(data), [0, 3, 4, 1, 1, 4, 3, 0, 0, 3, 4, 1])
    np.testing.assert_array_equal(ReverseEnv().target_from_input_data(data), [1, 4, 3, 0])


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_input_lengths_and_symbols(cls):
    env = cls(starting_min_length=4)
    lengths = set()
    for seed in range(30):
        env.reset(seed=seed)
        lengths.add(env.input_width)
        assert np.all((env.input_data >= 0) & (env.input_data < env.base))
    assert lengths == ({4, 6} if cls is DuplicatedInputEnv else {4, 5, 6})


def test_reverse_is_binary_and_starts_at_one():
    env = ReverseEnv()
    lengths = set()
    for seed in range(30):
        env.reset(seed=seed)
        lengths.add(len(env.input_data))
        assert set(env.input_data.tolist()) <= {0, 1}
    assert lengths == {1, 2, 3}


# ----------------------------------------------------------------------------------------------
# Curriculum
# ----------------------------------------------------------------------------------------------


def test_first_reset_records_the_unplayed_episode():
    env = CopyEnv()
    assert env.reward_shortfalls == []
    env.reset(seed=11)
    assert len(env.reward_shortfalls) == 1
    assert env.reward_shortfalls[0] in (-2.0, -3.0, -4.0)  # -len(target), n in {2, 3, 4}
    other = CopyEnv()
    other.reset(seed=11)
    assert other.reward_shortfalls == env.reward_shortfalls
    # later resets record only episodes that ended: an episode never stepped is not recorded
    phantom = list(env.reward_shortfalls)
    env.reset()
    env.reset(seed=3)
    assert env.reward_shortfalls == phantom


def test_interrupted_episode_is_not_recorded():
    """Unlike gym, a reset in the middle of an episode records nothing (SB3's auto-reset episodes are interrupted)."""
    env = CopyEnv()
    env.reset(seed=12)
    phantom = list(env.reward_shortfalls)
    play(env, [write_action(env, symbol) for symbol in env.target[:-1]])  # one symbol short: not ended
    assert not env.episode_ended
    env.reset()
    assert env.reward_shortfalls == phantom


@pytest.mark.parametrize("ending", ["wrong", "complete", "time_limit"])
def test_ended_episode_is_recorded_with_its_shortfall_in_the_step_info(ending):
    env = CopyEnv()
    env.reset(seed=12)
    length = len(env.target)
    if ending == "wrong":
        actions = [write_action(env, (int(env.target[0]) + 1) % env.base)]
        expected = -0.5 - length
    elif ending == "complete":
        actions = list(expert_actions(env))
        expected = 0.0
    else:
        actions = [write_action(env, env.target[0])] + [IDLE_TAPE] * env.time_limit
        expected = 1.0 - 1.0 - length
    infos = []
    for action in actions:
        _, _, terminated, _, info = env.step(action)
        infos.append(info)
        if terminated:
            break
    assert terminated and env.episode_ended
    assert infos[-1]["shortfall"] == expected
    assert all("shortfall" not in info for info in infos[:-1])
    env.reset()
    assert env.reward_shortfalls[-1] == expected and len(env.reward_shortfalls) == 2


def test_copy_promotion_after_last_perfect_episodes():
    env = CopyEnv()
    _, info = env.reset(seed=13)
    assert env.reward_shortfalls[0] <= -2.0
    for episode in range(1, 21):
        play_expert(env)
        _, info = env.reset()
        # reset 11: the phantom left the window of 10 -> 10 perfect episodes -> promotion, list cleared
        expected = 2 if episode < 10 else 3 if episode < 20 else 4
        assert env.min_length == info["min_length"] == expected, episode
        if episode in (10, 20):
            assert env.reward_shortfalls == []
    assert 4 <= len(env.input_data) <= 6


def test_imperfect_episode_delays_promotion():
    env = CopyEnv(last=3)
    env.reset(seed=14)
    play_expert(env)
    env.reset()
    env.step(write_action(env, (int(env.target[0]) + 1) % env.base))  # wrong: -0.5, shortfall <= -1.5
    env.reset()
    assert env.reward_shortfalls[-1] <= -1.5
    for _ in range(2):
        play_expert(env)
        env.reset()
        assert env.min_length == 2
    play_expert(env)
    env.reset()
    assert env.min_length == 3 and env.reward_shortfalls == []


def test_duplicated_input_phantom_of_length_one_counts_as_perfect():
    """The unplayed episode of DuplicatedInput can have len(target) 1: its -1 shortfall passes the -1.0 threshold."""
    for seed in range(50):
        env = DuplicatedInputEnv()
        env.reset(seed=seed)
        if env.reward_shortfalls == [-1.0]:
            break
    else:
        raise AssertionError("no seed with a phantom target of length 1")
    for episode in range(1, 10):
        play_expert(env)
        env.reset()
        assert env.min_length == (2 if episode < 9 else 3), episode


def test_promotion_threshold_per_task():
    """A shortfall of -1 (only an unplayed episode of target length 1 has it) passes -1.0 but not -0.1."""
    for cls, promoted in ((CopyEnv, True), (RepeatCopyEnv, False), (ReverseEnv, False)):
        env = cls(last=2)
        env.reset(seed=15)
        for _ in range(2):
            env._record_shortfall(-1.0)
        assert env.min_length == cls.DEFAULT_STARTING_MIN_LENGTH + int(promoted), cls.__name__
    # the same through the first-reset phantom episode, when its target has length 1
    for cls, promoted in ((CopyEnv, True), (ReverseEnv, False)):
        for seed in range(50):
            env = cls(starting_min_length=1, last=1)
            env.reset(seed=seed)
            if env.min_length == 2 or env.reward_shortfalls == [-1.0]:
                break
        else:
            raise AssertionError("no seed with a phantom target of length 1")
        assert env.min_length == 1 + int(promoted), cls.__name__


def test_reverse_promotion_needs_fifty_perfect_episodes():
    env = ReverseEnv()
    env.reset(seed=16)
    for episode in range(1, 51):
        play_expert(env)
        env.reset()
        assert env.min_length == (1 if episode < 50 else 2), episode
    assert env.reward_shortfalls == []


def test_min_length_cap():
    env = CopyEnv(starting_min_length=29, last=1)
    env.reset(seed=17)
    assert env.min_length == 29
    play_expert(env)
    env.reset()
    assert env.min_length == 30 and env.reward_shortfalls == []
    play_expert(env)
    _, info = env.reset()
    assert env.min_length == info["min_length"] == 30
    assert env.reward_shortfalls == [0.0]  # full and perfect, but no promotion past 30: the list is kept
    assert 30 <= len(env.input_data) <= 32


def test_set_min_length_hands_the_curriculum_to_an_external_driver():
    env = CopyEnv(last=1)
    assert env.curriculum_settings() == {"last": 1, "min_reward_threshold": -1.0, "min_length": 2, "max_min_length": 30}
    env.set_min_length(5)
    assert env.external_curriculum and env.min_length == 5
    _, info = env.reset(seed=19)
    assert info["min_length"] == 5 and 5 <= len(env.input_data) <= 7 and env.reward_shortfalls == []
    for _ in range(3):
        play_expert(env)
        env.reset()
    assert env.min_length == 5 and env.reward_shortfalls == []  # no recording, no promotion of its own
    env.set_min_length(4, external=False)
    play_expert(env)
    env.reset()
    assert not env.external_curriculum and env.min_length == 5  # its own curriculum again
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="min_length"):
            env.set_min_length(bad)


def test_curriculum_is_per_instance():
    promoted, untouched = CopyEnv(last=1), CopyEnv(last=1)
    promoted.reset(seed=18)
    untouched.reset(seed=18)
    play_expert(promoted)
    promoted.reset()
    assert promoted.min_length == 3
    assert untouched.min_length == 2 and CopyEnv().min_length == 2


# ----------------------------------------------------------------------------------------------
# Expert demonstrations
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ENV_CLASSES)
@pytest.mark.parametrize("min_length", [1, 2, 5, 12])
def test_expert_scores_len_target(cls, min_length):
    env = cls(starting_min_length=min_length)
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        actions = expert_actions(env)
        assert actions.dtype == np.int64 and actions.shape[1] == 3
        assert all(env.action_space.contains(action) for action in actions)
        if cls is ReversedAddition3Env and not addition3_expert_is_feasible(env):
            # gym's quirk: 3 * columns steps of reading do not fit in 2 * columns + 4
            rewards, terminated, _ = play(env, actions)
            assert terminated and rewards[-1] == -1.0 and len(rewards) == env.time_limit + 1
            continue
        observations = [int(obs)]
        rewards = []
        for step, action in enumerate(actions):
            if isinstance(env, TapeAlgorithmicEnv) and action[1] == 1:
                assert action[2] == observations[-1]  # the expert writes what it reads
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(int(obs))
            rewards.append(reward)
            assert terminated == (step == len(actions) - 1) and not truncated
        assert sum(rewards) == len(env.target) and set(rewards) <= {0.0, 1.0}
        assert env.time <= env.time_limit


def test_addition3_expert_feasible_exactly_for_short_inputs():
    env = ReversedAddition3Env(starting_min_length=1)
    for seed in range(20):
        env.reset(seed=seed)
        assert addition3_expert_is_feasible(env)  # columns <= 3
    env = ReversedAddition3Env(starting_min_length=5)
    env.reset(seed=0)
    assert not addition3_expert_is_feasible(env)


def test_expert_requires_fresh_episode():
    env = CopyEnv()
    with pytest.raises(ValueError):
        expert_actions(env)
    env.reset(seed=0)
    env.step(IDLE_TAPE)
    with pytest.raises(ValueError):
        expert_actions(env)
    with pytest.raises(TypeError):
        expert_actions(gym.make("CartPole-v1"))


@pytest.mark.parametrize("env_id", ALGORITHMIC_ENV_IDS)
def test_generate_expert_episodes(env_id):
    episodes = generate_expert_episodes(env_id, 5, seed=3)
    assert len(episodes) == 5
    for episode in episodes:
        steps = len(episode["actions"])
        assert episode["observations"].shape == (steps + 1,) and episode["observations"].dtype == np.int64
        assert episode["actions"].shape == (steps, 3) and episode["actions"].dtype == np.int64
        assert episode["rewards"].shape == (steps,)
        assert episode["terminated"] is True and episode["truncated"] is False
        if "Addition3" not in env_id or episode["rewards"].min() >= 0:
            assert episode["rewards"].sum() == episode["actions"][:, 1].sum()  # every write earns +1
    again = generate_expert_episodes(env_id, 5, seed=3)
    for first, second in zip(episodes, again, strict=True):
        for key in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(first[key], second[key])


def test_generate_expert_episodes_scores_len_target_and_promotes():
    env = CopyEnv()
    episodes = generate_expert_episodes(env, 11, seed=0)
    assert env.min_length == 3  # the 10 last played episodes were perfect
    replay = CopyEnv()
    replay.reset(seed=0)
    for index, episode in enumerate(episodes):
        if index:
            replay.reset()
        assert episode["rewards"].sum() == len(replay.target)
        np.testing.assert_array_equal(episode["actions"], expert_actions(replay))
        play(replay, episode["actions"])


def test_generate_expert_episodes_through_combined_wrapper():
    plain = generate_expert_episodes(gym.make("sb3_pcl/ReversedAddition-v0"), 4, seed=5)
    wrapped = generate_expert_episodes(CombinedActionWrapper(gym.make("sb3_pcl/ReversedAddition-v0")), 4, seed=5)
    for first, second in zip(plain, wrapped, strict=True):
        for key in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(first[key], second[key])


# ----------------------------------------------------------------------------------------------
# Seeding
# ----------------------------------------------------------------------------------------------


def tapes(env: AlgorithmicEnv, n_resets: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    result = []
    for index in range(n_resets):
        env.reset(seed=seed if index == 0 else None)
        result.append((env.input_data.copy(), env.target.copy()))
    return result


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_same_seed_same_tapes_across_instances(cls):
    reference = tapes(cls(), 5, seed=21)
    for _ in range(3):
        for (inp, tgt), (ref_inp, ref_tgt) in zip(tapes(cls(), 5, seed=21), reference, strict=True):
            np.testing.assert_array_equal(inp, ref_inp)
            np.testing.assert_array_equal(tgt, ref_tgt)
    different = tapes(cls(), 5, seed=22)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(different, reference, strict=True))


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_reset_with_same_seed_twice(cls):
    env = cls()
    env.reset(seed=23)
    first = env.input_data.copy()
    env.step(env.action_space.sample())
    env.reset(seed=23)
    np.testing.assert_array_equal(env.input_data, first)
    env.reset()
    env.reset(seed=23)
    np.testing.assert_array_equal(env.input_data, first)


@pytest.mark.parametrize("env_id", ["sb3_pcl/Copy-v0", "sb3_pcl/ReversedAddition3-v0"])
def test_sync_vector_env_same_seed(env_id):
    n_envs = 3
    vec_env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n_envs)])
    obs, _ = vec_env.reset(seed=[31] * n_envs)
    assert len(set(obs.tolist())) == 1
    inputs = [sub_env.unwrapped.input_data for sub_env in vec_env.envs]
    for other in inputs[1:]:
        np.testing.assert_array_equal(other, inputs[0])
    for _ in range(6):
        action = np.repeat(vec_env.single_action_space.sample()[None], n_envs, axis=0)
        obs, rewards, terminated, _, _ = vec_env.step(action)
        assert len(set(obs.tolist())) == 1 and len(set(rewards.tolist())) == 1 and len(set(terminated.tolist())) == 1
    vec_env.close()


def test_sb3_dummy_vec_env_same_seed():
    from stable_baselines3.common.vec_env import DummyVecEnv

    def make_seeded():
        env = gym.make("sb3_pcl/RepeatCopy-v0")
        env.reset(seed=41)
        return env

    vec_env = DummyVecEnv([make_seeded for _ in range(3)])
    vec_env.reset()  # no seed: every sub-env continues the same random stream
    inputs = [env.unwrapped.input_data for env in vec_env.envs]
    for other in inputs[1:]:
        np.testing.assert_array_equal(other, inputs[0])
    actions = np.array([expert_actions(vec_env.envs[0])[0]] * 3)
    _, rewards, dones, _ = vec_env.step(actions)
    assert rewards.tolist() == [1.0] * 3 and not dones.any()


# ----------------------------------------------------------------------------------------------
# Wrapper, rendering, env checker
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [CopyEnv, ReversedAddition3Env])
def test_combined_action_wrapper_round_trip(cls):
    env = CombinedActionWrapper(cls())
    moves, base = len(cls.MOVEMENTS), env.unwrapped.base
    assert env.action_space == gym.spaces.Discrete(moves * 2 * base)
    seen = set()
    for move in range(moves):
        for write in range(2):
            for symbol in range(base):
                index = env.encode(move, write, symbol)
                assert index == move + moves * (write + 2 * symbol)  # first component least significant
                np.testing.assert_array_equal(env.decode(index), [move, write, symbol])
                seen.add(index)
    assert seen == set(range(env.action_space.n))
    all_actions = np.array([env.decode(index) for index in range(env.action_space.n)])
    np.testing.assert_array_equal(env.encode_batch(all_actions), np.arange(env.action_space.n))
    with pytest.raises(ValueError, match="Invalid action"):
        env.decode(env.action_space.n)
    with pytest.raises(ValueError):
        env.encode(moves, 0, 0)
    with pytest.raises(TypeError):
        CombinedActionWrapper(gym.make("CartPole-v1"))


def test_combined_action_wrapper_steps_like_the_triple():
    plain, wrapped = CopyEnv(), CombinedActionWrapper(CopyEnv())
    plain.reset(seed=51)
    wrapped.reset(seed=51)
    for action in expert_actions(plain):
        expected = plain.step(action)
        got = wrapped.step(wrapped.encode(*action))
        assert got[:4] == expected[:4]


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_ansi_render(cls):
    env = cls(render_mode="ansi")
    env.reset(seed=61)
    text = env.render()
    assert isinstance(text, str)
    target_text = "".join(env.charmap[symbol] for symbol in env.target)
    assert target_text in text and "[" in text
    env.step(write_action(env, env.target[0]))
    text = env.render()
    assert isinstance(text, str) and "Output Tape         : " + env.charmap[env.target[0]] in text
    with pytest.warns(UserWarning, match="render_mode"):
        assert cls().render() is None


def test_render_symbols():
    env = CopyEnv(render_mode="ansi")
    env.reset(seed=62)
    assert env.charmap == ["A", "B", "C", "D", "E", " "]
    assert "".join(chr(ord("A") + int(s)) for s in env.input_data) in env.render().replace("[", "").replace("]", "").replace(
        " ", ""
    )
    digits = CopyEnv(chars=False, render_mode="ansi")
    assert digits.charmap == ["0", "1", "2", "3", "4", " "]


@pytest.mark.parametrize("env_id", ALGORITHMIC_ENV_IDS)
def test_check_env(env_id):
    # The checker compares episodes across its many resets; the curriculum may legitimately promote in between
    # (DuplicatedInput: an unplayed length-1 episode has shortfall -1, which passes -1.0), so it is frozen here.
    frozen = {"last": 10**6}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(env_id, render_mode="ansi", **frozen).unwrapped)
        check_env(gym.make(env_id, **frozen).unwrapped, skip_render_check=True)


# ----------------------------------------------------------------------------------------------
# Episode files
# ----------------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    episodes = generate_expert_episodes("sb3_pcl/ReversedAddition-v0", 4, seed=7)
    episodes += generate_expert_episodes(ReversedAddition3Env(starting_min_length=6), 1, seed=0)  # with a -1
    path = tmp_path / "experts"  # no suffix: written exactly there
    save_episodes(path, episodes)
    assert path.exists()
    loaded = load_episodes(path)
    assert len(loaded) == len(episodes)
    for original, restored in zip(episodes, loaded, strict=True):
        assert set(restored) == {"observations", "actions", "rewards", "terminated", "truncated"}
        for key in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(restored[key], original[key])
            assert restored[key].dtype == original[key].dtype
        assert restored["terminated"] is original["terminated"] and restored["truncated"] is original["truncated"]
    save_episodes(tmp_path / "empty.npz", [])
    assert load_episodes(tmp_path / "empty.npz") == []


def test_load_rejects_bad_files(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not an npz file at all")
    with pytest.raises(ValueError, match="not a valid episodes"):
        load_episodes(garbage)

    missing_key = tmp_path / "missing.npz"
    np.savez(missing_key, observations=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="missing keys"):
        load_episodes(missing_key)

    good = tmp_path / "good.npz"
    save_episodes(good, generate_expert_episodes("sb3_pcl/Copy-v0", 2, seed=0))
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(ValueError, match="not a valid episodes"):
        load_episodes(truncated)

    inconsistent = tmp_path / "inconsistent.npz"
    data = dict(np.load(good))
    data["lengths"] = data["lengths"] + 1
    np.savez(inconsistent, **data)
    with pytest.raises(ValueError, match="inconsistent"):
        load_episodes(inconsistent)

    with pytest.raises(FileNotFoundError):
        load_episodes(tmp_path / "nowhere.npz")
    with pytest.raises(ValueError):
        save_episodes(tmp_path / "bad.npz", [{"observations": np.zeros(2), "actions": np.zeros((1, 3))}])
