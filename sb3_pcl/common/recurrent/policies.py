"""
LSTM policy whose input includes the previous action (the recurrent policy of the original PCL / UREX code).

:class:`MlpPrevActionLstmPolicy` is sb3-contrib's :class:`~sb3_contrib.common.recurrent.policies.RecurrentActorCriticPolicy`
with one LSTM shared by the actor and the critic and one change: the LSTM input at step ``t`` is the
concatenation of the observation features and an encoding of the action taken at step ``t - 1``
(one-hot per component for ``Discrete`` / ``MultiDiscrete`` actions, the raw vector for ``Box`` and
``MultiBinary``; zeros at the first step of an episode). The action logits and the value are linear
heads on the LSTM output (``net_arch=[]`` by default), so the value is read from the recurrent state.

Names
    sb3-contrib's ``MlpLstmPolicy`` / ``CnnLstmPolicy`` (its ``RecurrentActorCriticPolicy``: ``(h, c)`` states, no
    previous-action input) are other policies: the recurrent algorithms name ours by their class names,
    ``"MlpPrevActionLstmPolicy"`` / ``"CnnPrevActionLstmPolicy"`` (the former names ``"MlpLstmPolicy"`` /
    ``"CnnLstmPolicy"`` still work, with a ``DeprecationWarning``, for one release), and our former class names of
    sb3-contrib's names resolve with a warning, so that the models saved under them load.

Recurrent state
    The state is a 3-tuple ``(h, c, a)``: sb3-contrib's LSTM hidden and cell states, each of shape
    ``(n_lstm_layers, n_envs, lstm_hidden_size)`` (twice as wide with a critic LSTM: both LSTMs' states side by
    side), and the encoded previous action, of shape
    ``(1, n_envs, action_input_dim)``. ``predict(obs, state, episode_start)`` takes and returns it as
    NumPy arrays, exactly as sb3-contrib's recurrent policies do with their ``(h, c)`` pair; SB3's
    ``evaluate_policy`` and rl-zoo3's ``enjoy`` pass it back opaquely. ``episode_start[i] = True``
    resets all three parts of env ``i``.

Evaluating whole sequences
    ``evaluate_sequence(obs, actions, episode_starts, initial_state)`` takes time-major tensors
    ``(T, B, ...)`` and returns time-major log-probabilities, values and entropies ``(T, B)``. The
    input of step ``t`` uses ``actions[t - 1]`` (``initial_state``'s action for ``t = 0``) unless
    ``episode_starts[t]`` is set. ``evaluate_actions`` does the same on sb3-contrib's layout
    (sequences flattened sequence-major: index ``b * T + t``).

Off-policy use (PCL, Trust-PCL)
    ``sequence_latent(obs, actions)`` runs the LSTM over replayed paths from their first step (one
    fused call) and ``latent_heads(latent)`` reads the action distribution and the value at any of
    those steps; PCL replays each sampled segment's path from its start this way, so the recurrent
    state at the segment is exact for the current parameters. ``act(obs, state, episode_starts,
    actions=None)`` is one collection step; given ``actions`` (random warm-up actions) it feeds
    those, so the carried state always matches the stored actions.
"""

import warnings
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.recurrent.encoding import action_input_dim, encode_actions
from sb3_pcl.common.recurrent.type_aliases import LstmActionState
from sb3_pcl.common.validation import FORMER_LSTM_NAMES

__all__ = ["CnnPrevActionLstmPolicy", "FlatFeatures", "MlpPrevActionLstmPolicy", "initial_recurrent_states"]

#: former class names of this module (sb3-contrib's names for other policies) -> current ones
RENAMED_POLICIES = FORMER_LSTM_NAMES


class FlatFeatures(FlattenExtractor):
    """
    SB3's ``FlattenExtractor`` with a Python ``int`` feature size: SB3 sizes ``MultiDiscrete`` observations with a NumPy
    integer, which ``torch.nn.LSTM`` refuses.

    :param observation_space: the observation space
    """

    def __init__(self, observation_space: spaces.Space):
        super().__init__(observation_space)
        self._features_dim = int(self._features_dim)


class MlpPrevActionLstmPolicy(RecurrentActorCriticPolicy):
    """
    LSTM actor-critic policy with the previous action as input and a value head on the LSTM output.

    Built on sb3-contrib's recurrent policy: its LSTM bookkeeping (``_process_sequence``: episode-start
    resets, sequence-major batches), heads and action distributions are reused. The actor and the
    critic share the LSTM by default; unlike sb3-contrib's ``shared_lstm=True``, the value gradient
    reaches the LSTM (``detach_value=False``), as in the original code, where the value is a linear
    function of the policy's recurrent state. ``enable_critic_lstm=True`` gives the critic its own
    LSTM, fed with the same inputs (as sb3-contrib's option of that name): the state then holds both
    LSTMs' states, concatenated along the hidden dimension (actor first), and so does the LSTM output.

    :param observation_space: observation space
    :param action_space: action space (``Discrete``, ``MultiDiscrete``, ``Box`` or ``MultiBinary``)
    :param lr_schedule: learning rate schedule
    :param net_arch: MLP layers between the LSTM output and the heads (``None``: ``[]``, linear heads as in the original code)
    :param activation_fn: activation of those layers
    :param ortho_init: orthogonal initialisation of the heads
    :param use_sde: must be ``False`` (gSDE is not supported)
    :param log_std_init: initial log-std of Gaussian actions
    :param full_std: unused without gSDE
    :param use_expln: unused without gSDE
    :param squash_output: unused without gSDE
    :param features_extractor_class: observation features extractor (``Discrete`` observations are one-hot encoded)
    :param features_extractor_kwargs: its keyword arguments
    :param share_features_extractor: must be ``True`` (the LSTM is shared)
    :param normalize_images: divide image observations by 255
    :param optimizer_class: optimiser class
    :param optimizer_kwargs: optimiser keyword arguments, excluding the learning rate
    :param lstm_hidden_size: LSTM units (the original code: 128)
    :param n_lstm_layers: number of stacked LSTM layers
    :param lstm_kwargs: extra keyword arguments of ``nn.LSTM``
    :param prev_action_input: feed the previous action to the LSTM
    :param detach_value: stop the value gradient at the LSTM output (sb3-contrib's ``shared_lstm=True`` behaviour)
    :param enable_critic_lstm: give the critic a separate LSTM (then ``detach_value`` must be ``False``)
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        use_sde: bool = False,
        log_std_init: float = 0.0,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        features_extractor_class: type[BaseFeaturesExtractor] = FlatFeatures,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        lstm_hidden_size: int = 128,
        n_lstm_layers: int = 1,
        lstm_kwargs: dict[str, Any] | None = None,
        prev_action_input: bool = True,
        detach_value: bool = False,
        enable_critic_lstm: bool = False,
    ):
        if use_sde:
            raise ValueError("use_sde must be False: MlpPrevActionLstmPolicy does not support gSDE")
        if not share_features_extractor:
            raise ValueError("share_features_extractor must be True: the actor and the critic share the LSTM")
        if lstm_hidden_size < 1 or n_lstm_layers < 1:
            raise ValueError(f"lstm_hidden_size and n_lstm_layers must be >= 1, got {lstm_hidden_size} and {n_lstm_layers}")
        if enable_critic_lstm and detach_value:
            raise ValueError(
                "detach_value must be False with enable_critic_lstm=True: it would stop the critic LSTM's training"
            )
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=[] if net_arch is None else net_arch,
            activation_fn=activation_fn,
            ortho_init=ortho_init,
            use_sde=False,
            log_std_init=log_std_init,
            full_std=full_std,
            use_expln=use_expln,
            squash_output=squash_output,
            features_extractor_class=features_extractor_class,
            features_extractor_kwargs=features_extractor_kwargs,
            share_features_extractor=True,
            normalize_images=normalize_images,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
            lstm_hidden_size=lstm_hidden_size,
            n_lstm_layers=n_lstm_layers,
            shared_lstm=True,
            enable_critic_lstm=False,
            lstm_kwargs=lstm_kwargs,
        )
        self.lstm_hidden_size = lstm_hidden_size
        self.n_lstm_layers = n_lstm_layers
        self.prev_action_input = prev_action_input
        self.detach_value = detach_value
        self.action_input_dim = action_input_dim(action_space) if prev_action_input else 0
        # The parent built one LSTM for the observation features alone: widen its input and add the critic's
        # LSTM where asked, then rebuild the optimiser.
        lstm_input_dim = int(self.features_dim) + self.action_input_dim  # SB3 sizes MultiDiscrete features with NumPy ints
        if self.action_input_dim > 0:
            self.lstm_actor = nn.LSTM(lstm_input_dim, lstm_hidden_size, num_layers=n_lstm_layers, **self.lstm_kwargs)
        if enable_critic_lstm:
            self.shared_lstm, self.enable_critic_lstm = False, True
            self.lstm_critic = nn.LSTM(lstm_input_dim, lstm_hidden_size, num_layers=n_lstm_layers, **self.lstm_kwargs)
        if self.action_input_dim > 0 or enable_critic_lstm:
            self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
                self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
            )
        # Width of h, c and the LSTM output: both LSTMs' side by side with a critic LSTM.
        self.state_size = lstm_hidden_size * (2 if enable_critic_lstm else 1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            lstm_hidden_size=self.lstm_hidden_size,
            n_lstm_layers=self.n_lstm_layers,
            lstm_kwargs=self.lstm_kwargs,
            prev_action_input=self.prev_action_input,
            detach_value=self.detach_value,
            enable_critic_lstm=self.enable_critic_lstm,
        )
        return data

    # ------------------------------------------------------------------ state
    def initial_state(self, n_envs: int) -> LstmActionState:
        """
        :param n_envs: number of parallel sequences
        :return: the zero state ``(h, c, previous action input)`` of ``n_envs`` sequences
        """
        hidden = th.zeros((self.n_lstm_layers, n_envs, self.state_size), device=self.device)
        return hidden, hidden.clone(), th.zeros((1, n_envs, self.action_input_dim), device=self.device)

    def _as_state(self, state: tuple[th.Tensor, ...]) -> LstmActionState:
        if len(state) == 3:
            return state[0], state[1], state[2]
        if len(state) == 2 and self.action_input_dim == 0:
            return state[0], state[1], th.zeros((1, state[0].shape[1], 0), device=state[0].device)
        raise ValueError(
            "MlpPrevActionLstmPolicy states are (h, c, previous action input) triples "
            "(see MlpPrevActionLstmPolicy.initial_state), "
            f"got a tuple of {len(state)} tensors"
        )

    def _next_state(self, lstm_state: tuple[th.Tensor, th.Tensor], actions: th.Tensor) -> LstmActionState:
        n_seq = lstm_state[0].shape[1]
        if self.action_input_dim == 0:
            previous = th.zeros((1, n_seq, 0), device=actions.device)
        else:
            previous = encode_actions(actions, self.action_space).reshape(1, n_seq, self.action_input_dim)
        return lstm_state[0], lstm_state[1], previous

    # ------------------------------------------------------------------ core
    def _previous_action_inputs(
        self, state: LstmActionState, episode_starts: th.Tensor, actions: th.Tensor | None
    ) -> th.Tensor:
        """
        :return: the previous-action input of every entry of a sequence-major batch, ``(n_seq * T, action_input_dim)``
        """
        n_seq = state[0].shape[1]
        starts = episode_starts.float().reshape(n_seq, -1, 1)
        seq_len = starts.shape[1]
        first = state[2].reshape(n_seq, 1, self.action_input_dim)
        if seq_len > 1:
            if actions is None:
                raise ValueError("the actions are needed to evaluate sequences longer than one step")
            taken = encode_actions(actions, self.action_space).reshape(n_seq, seq_len, self.action_input_dim)
            previous = th.cat([first, taken[:, :-1]], dim=1)
        else:
            previous = first
        previous = th.where(starts > 0, th.zeros_like(previous), previous)
        return previous.reshape(n_seq * seq_len, self.action_input_dim)

    def _recurrent_latent(
        self,
        obs: PyTorchObs,
        state: tuple[th.Tensor, ...],
        episode_starts: th.Tensor,
        actions: th.Tensor | None = None,
    ) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
        """
        Run the LSTM over a sequence-major batch.

        :param obs: observations of ``n_seq`` sequences of ``T`` steps, flattened sequence-major
        :param state: ``(h, c, previous action input)`` before the first step of each sequence
        :param episode_starts: ``(n_seq * T,)`` 1 where a new episode starts (the state is reset before that step)
        :param actions: the actions taken at every entry (needed when ``T > 1``)
        :return: the LSTM output ``(n_seq * T, state_size)`` and the final ``(h, c)``
        """
        full_state = self._as_state(state)
        features = super(ActorCriticPolicy, self).extract_features(obs, self.features_extractor)
        if self.action_input_dim > 0:
            features = th.cat([features, self._previous_action_inputs(full_state, episode_starts, actions)], dim=1)
        if self.lstm_critic is None:
            latent, new_state = self._process_sequence(
                features, (full_state[0], full_state[1]), episode_starts, self.lstm_actor
            )
            return latent, (new_state[0], new_state[1])
        size = self.lstm_hidden_size
        outputs, states = [], []
        for lstm, part in ((self.lstm_actor, slice(0, size)), (self.lstm_critic, slice(size, 2 * size))):
            output, (h, c) = self._process_sequence(
                features, (full_state[0][..., part], full_state[1][..., part]), episode_starts, lstm
            )
            outputs.append(output)
            states.append((h, c))
        return th.cat(outputs, dim=-1), (
            th.cat([states[0][0], states[1][0]], dim=-1),
            th.cat([states[0][1], states[1][1]], dim=-1),
        )

    def split_latent(self, latent: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """
        :param latent: LSTM outputs ``(..., state_size)``
        :return: the actor's and the critic's parts (the same tensor twice without a critic LSTM)
        """
        if self.lstm_critic is None:
            return latent, latent
        return latent[..., : self.lstm_hidden_size], latent[..., self.lstm_hidden_size :]

    def _heads(self, latent: th.Tensor) -> tuple[Distribution, th.Tensor]:
        latent_pi, latent_vf = self.split_latent(latent)
        if self.detach_value:
            latent_vf = latent_vf.detach()
        distribution = self._get_action_dist_from_latent(self.mlp_extractor.forward_actor(latent_pi))
        values = self.value_net(self.mlp_extractor.forward_critic(latent_vf))
        return distribution, values

    # ------------------------------------------------------------------ sb3-contrib API
    def forward(  # type: ignore[override]
        self,
        obs: th.Tensor,
        lstm_states: RNNStates,
        episode_starts: th.Tensor,
        deterministic: bool = False,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, RNNStates]:
        """
        One step of ``n_envs`` sequences (data collection).

        :param obs: observations ``(n_envs, ...)``
        :param lstm_states: ``RNNStates(pi=state, vf=state)`` with ``state = (h, c, previous action input)``
        :param episode_starts: ``(n_envs,)`` 1 where the observation starts a new episode
        :param deterministic: take the mode of the action distribution
        :return: actions, values, log-probabilities and the next states
        """
        latent, lstm_state = self._recurrent_latent(obs, lstm_states.pi, episode_starts)
        distribution, values = self._heads(latent)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        state = self._next_state(lstm_state, actions)
        actions = actions.reshape((-1, *self.action_space.shape))  # type: ignore[misc]
        return actions, values, log_prob, RNNStates(state, state)

    def get_distribution(  # type: ignore[override]
        self,
        obs: th.Tensor,
        lstm_states: tuple[th.Tensor, ...],
        episode_starts: th.Tensor,
    ) -> tuple[Distribution, tuple[th.Tensor, ...]]:
        """
        :param obs: observations ``(n_envs, ...)``
        :param lstm_states: ``(h, c, previous action input)``
        :param episode_starts: ``(n_envs,)`` episode-start flags
        :return: the action distribution and the LSTM's next ``(h, c)`` (the next state also needs the chosen action)
        """
        latent, lstm_state = self._recurrent_latent(obs, lstm_states, episode_starts)
        distribution, _ = self._heads(latent)
        return distribution, lstm_state

    def predict_values(  # type: ignore[override]
        self,
        obs: th.Tensor,
        lstm_states: tuple[th.Tensor, ...],
        episode_starts: th.Tensor,
    ) -> th.Tensor:
        """
        :param obs: observations ``(n_envs, ...)``
        :param lstm_states: ``(h, c, previous action input)``
        :param episode_starts: ``(n_envs,)`` episode-start flags
        :return: the values ``(n_envs, 1)``
        """
        latent, _ = self._recurrent_latent(obs, lstm_states, episode_starts)
        _, values = self._heads(latent)
        return values

    def evaluate_actions(  # type: ignore[override]
        self, obs: th.Tensor, actions: th.Tensor, lstm_states: RNNStates, episode_starts: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """
        Evaluate ``n_seq`` sequences of ``T`` steps flattened sequence-major (sb3-contrib's layout).

        :param obs: observations ``(n_seq * T, ...)``
        :param actions: the actions taken ``(n_seq * T, ...)``; they also give the previous-action inputs
        :param lstm_states: ``RNNStates(pi=state, vf=state)``, the states before the first step of each sequence
        :param episode_starts: ``(n_seq * T,)`` episode-start flags
        :return: values ``(n_seq * T, 1)``, log-probabilities and entropies ``(n_seq * T,)``
        """
        latent, _ = self._recurrent_latent(obs, lstm_states.pi, episode_starts, actions)
        distribution, values = self._heads(latent)
        entropy = distribution.entropy()
        assert entropy is not None
        return values, distribution.log_prob(actions), entropy

    def evaluate_sequence(
        self,
        obs: th.Tensor,
        actions: th.Tensor,
        episode_starts: th.Tensor,
        initial_state: tuple[th.Tensor, ...] | None = None,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """
        Evaluate a padded time-major batch of sequences from their initial state.

        :param obs: observations ``(T, B, *obs_shape)``
        :param actions: actions taken ``(T, B, *action_shape)`` (or ``(T, B, 1)`` for ``Discrete``, as buffers store them)
        :param episode_starts: ``(T, B)``, 1 where step ``t`` starts a new episode (state and previous action reset)
        :param initial_state: ``(h, c, previous action input)`` before step 0 (``None``: zeros)
        :return: log-probabilities, values and entropies, each ``(T, B)``
        """
        n_steps, n_seq = episode_starts.shape[:2]
        if initial_state is None:
            initial_state = self.initial_state(n_seq)

        def sequence_major(x: th.Tensor) -> th.Tensor:
            return x.transpose(0, 1).reshape(n_seq * n_steps, *x.shape[2:])

        # Also accepts replay-buffer actions, (T, B, 1) for Discrete.
        flat_actions = self._distribution_actions(sequence_major(actions))
        values, log_prob, entropy = self.evaluate_actions(
            sequence_major(obs), flat_actions, RNNStates(initial_state, initial_state), sequence_major(episode_starts)
        )

        def time_major(x: th.Tensor) -> th.Tensor:
            return x.reshape(n_seq, n_steps).transpose(0, 1)

        return time_major(log_prob), time_major(values), time_major(entropy)

    # ------------------------------------------------------------------ replay and collection (off-policy use, PCL)
    def sequence_latent(
        self,
        obs: th.Tensor,
        actions: th.Tensor,
        initial_state: tuple[th.Tensor, ...] | None = None,
    ) -> th.Tensor:
        """
        Run the LSTM over a padded time-major batch of sequences that do not cross an episode boundary.

        Step 0 continues from ``initial_state`` (zeros, the start of an episode, by default); the input of
        step ``t > 0`` uses ``actions[t - 1]``. With no reset inside the sequences the LSTM runs as one fused
        call, so replaying long sequences stays cheap. Padding after a sequence's end does not change its
        earlier outputs (the LSTM is causal).

        :param obs: observations ``(T, B, *obs_shape)``
        :param actions: actions taken ``(T, B, *action_shape)`` (the last step's is unused)
        :param initial_state: ``(h, c, previous action input)`` before step 0 (``None``: zeros)
        :return: the LSTM outputs ``(T, B, state_size)``; read actions and values from them with :meth:`latent_heads`
        """
        n_steps, n_seq = obs.shape[:2]
        if initial_state is None:
            initial_state = self.initial_state(n_seq)
        flat_obs = obs.transpose(0, 1).reshape(n_seq * n_steps, *obs.shape[2:])
        flat_actions = actions.transpose(0, 1).reshape(n_seq * n_steps, *actions.shape[2:])
        starts = th.zeros(n_seq * n_steps, device=obs.device)
        latent, _ = self._recurrent_latent(flat_obs, initial_state, starts, flat_actions)
        return latent.reshape(n_seq, n_steps, -1).transpose(0, 1)

    def latent_heads(self, latent: th.Tensor) -> tuple[Distribution, th.Tensor]:
        """
        :param latent: LSTM outputs ``(n, state_size)`` (e.g. rows of :meth:`sequence_latent`)
        :return: the action distribution of the ``n`` entries and their values ``(n, 1)``
        """
        return self._heads(latent)

    def _distribution_actions(self, actions: th.Tensor) -> th.Tensor:
        """:return: a batch of ``n`` actions in the layout and dtype the action distribution expects"""
        if isinstance(self.action_space, spaces.Discrete):
            return actions.long().reshape(-1)
        if isinstance(self.action_space, spaces.MultiDiscrete):
            return actions.long().reshape(actions.shape[0], -1)
        return actions.float().reshape(actions.shape[0], -1)  # SB3's distributions take flat Box / MultiBinary actions

    def act(
        self,
        obs: th.Tensor,
        state: tuple[th.Tensor, ...],
        episode_starts: th.Tensor,
        actions: th.Tensor | None = None,
        deterministic: bool = False,
    ) -> tuple[th.Tensor, th.Tensor, LstmActionState]:
        """
        One step of ``n_envs`` sequences during data collection.

        :param obs: observations ``(n_envs, ...)``
        :param state: ``(h, c, previous action input)`` before this step
        :param episode_starts: ``(n_envs,)`` 1 where the observation starts a new episode (the state is reset first)
        :param actions: actions to take instead of sampling (e.g. uniformly random warm-up actions), ``(n_envs, ...)``;
            like sampled ones they become the previous-action input of the next step
        :param deterministic: take the mode of the action distribution (when ``actions`` is ``None``)
        :return: the actions ``(n_envs, *action_shape)``, their log-probabilities ``(n_envs,)`` and the next state
        """
        latent, lstm_state = self._recurrent_latent(obs, state, episode_starts)
        distribution, _ = self._heads(latent)
        if actions is None:
            taken = distribution.get_actions(deterministic=deterministic)
        else:
            taken = self._distribution_actions(actions.to(latent.device))
        log_prob = distribution.log_prob(taken)
        next_state = self._next_state(lstm_state, taken)
        return taken.reshape((-1, *self.action_space.shape)), log_prob, next_state  # type: ignore[misc]

    def _predict(  # type: ignore[override]
        self,
        observation: th.Tensor,
        lstm_states: tuple[th.Tensor, ...],
        episode_starts: th.Tensor,
        deterministic: bool = False,
    ) -> tuple[th.Tensor, tuple[th.Tensor, ...]]:
        latent, lstm_state = self._recurrent_latent(observation, lstm_states, episode_starts)
        distribution, _ = self._heads(latent)
        actions = distribution.get_actions(deterministic=deterministic)
        return actions, self._next_state(lstm_state, actions)

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """
        Get the action from an observation and the recurrent state, as sb3-contrib's recurrent policies do.

        :param observation: the observation(s)
        :param state: ``(h, c, previous action input)`` as returned by the previous call (``None``: zeros)
        :param episode_start: ``(n_envs,)`` whether each observation starts an episode (``None``: no)
        :param deterministic: take the mode of the action distribution
        :return: the action(s) and the next state
        """
        self.set_training_mode(False)
        obs_tensor, vectorized_env = self.obs_to_tensor(observation)
        if isinstance(obs_tensor, dict):
            raise ValueError("MlpPrevActionLstmPolicy does not support Dict observations")
        n_envs = obs_tensor.shape[0]
        if episode_start is None:
            episode_start = np.zeros(n_envs, dtype=bool)
        with th.no_grad():
            if state is None:
                states: tuple[th.Tensor, ...] = self.initial_state(n_envs)
            else:
                states = tuple(th.as_tensor(np.asarray(part), dtype=th.float32, device=self.device) for part in state)
            starts = th.as_tensor(np.asarray(episode_start), dtype=th.float32, device=self.device)
            actions, next_states = self._predict(obs_tensor, states, starts, deterministic=deterministic)
        numpy_actions = actions.cpu().numpy().reshape((-1, *self.action_space.shape))  # type: ignore[arg-type, misc]
        numpy_actions = to_env_actions(self, self.action_space, numpy_actions)
        if not vectorized_env:
            numpy_actions = numpy_actions.squeeze(axis=0)
        return numpy_actions, tuple(part.cpu().numpy() for part in next_states)


class CnnPrevActionLstmPolicy(MlpPrevActionLstmPolicy):
    """
    :class:`MlpPrevActionLstmPolicy` for image observations: SB3's ``NatureCNN`` (three convolutions and a linear layer, images
    scaled by 1/255) extracts the features the LSTM reads. The arguments are those of :class:`MlpPrevActionLstmPolicy`, with
    ``features_extractor_class=NatureCNN`` by default (``features_extractor_kwargs=dict(features_dim=...)`` sizes its
    output, 512 by default).

    :param observation_space: an image observation space (``Box`` of ``uint8``, channel first or last)
    :param action_space: action space
    :param lr_schedule: learning rate schedule
    :param features_extractor_class: features extractor (default: ``NatureCNN``)
    :param kwargs: the other arguments of :class:`MlpPrevActionLstmPolicy`
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        features_extractor_class: type[BaseFeaturesExtractor] = NatureCNN,
        **kwargs: Any,
    ):
        super().__init__(
            observation_space, action_space, lr_schedule, features_extractor_class=features_extractor_class, **kwargs
        )


def initial_recurrent_states(policy: RecurrentActorCriticPolicy, n_envs: int) -> RNNStates:
    """
    Zero recurrent states of ``n_envs`` sequences for any sb3-contrib recurrent policy.

    :param policy: an :class:`MlpPrevActionLstmPolicy` (states ``(h, c, previous action input)``) or another
        ``RecurrentActorCriticPolicy`` (states ``(h, c)``)
    :param n_envs: number of sequences
    :return: ``RNNStates(pi, vf)``
    """
    if isinstance(policy, MlpPrevActionLstmPolicy):
        state = policy.initial_state(n_envs)
        return RNNStates(state, state)
    n_layers, _, hidden_size = policy.lstm_hidden_state_shape
    zeros = th.zeros((n_layers, n_envs, hidden_size), device=policy.device)
    return RNNStates((zeros, zeros.clone()), (zeros.clone(), zeros.clone()))


def __getattr__(name: str) -> type[MlpPrevActionLstmPolicy]:
    """
    :param name: a former class name (``MlpLstmPolicy``, ``CnnLstmPolicy``: SB3 serialises ``policy_class`` by name)
    :return: the class now named ``RENAMED_POLICIES[name]``, with a ``DeprecationWarning``
    :raises AttributeError: for any other name
    """
    if name in RENAMED_POLICIES:
        current = RENAMED_POLICIES[name]
        message = f"sb3_pcl.common.recurrent.{name} is now named {current} (sb3-contrib's {name} is another policy)"
        warnings.warn(f"{message}; its policy name is {current!r}", DeprecationWarning, stacklevel=2)
        return globals()[RENAMED_POLICIES[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
