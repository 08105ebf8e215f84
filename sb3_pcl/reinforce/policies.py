"""
Policies of Reinforce and UREX.

``MlpPolicy`` is SB3's actor-critic MLP (2 x 64 tanh units, a diagonal Gaussian with a learned
state-independent log-std for ``Box`` actions; the value head is unused by these algorithms).
``CnnPolicy`` (SB3's ``ActorCriticCnnPolicy``) is the same with SB3's ``NatureCNN`` reading image observations.
``MultiInputPolicy`` (SB3's ``MultiInputActorCriticPolicy``) reads ``Dict`` observations with SB3's
``CombinedExtractor``. The recurrent policies are those of :class:`~sb3_pcl.RecurrentReinforce` and
:class:`~sb3_pcl.RecurrentUREX` (:mod:`sb3_pcl.recurrent_reinforce.policies`).
"""

from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
