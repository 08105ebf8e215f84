"""
Policies of Reinforce and UREX.

``MlpPolicy`` is SB3's actor-critic MLP (2 x 64 tanh units, a diagonal Gaussian with a learned
state-independent log-std for ``Box`` actions; the value head is unused by these algorithms).
``MlpLstmPolicy`` is the recurrent policy of the original code: an LSTM fed with the observation and
the previous action, linear action and value heads on its output (:mod:`sb3_pcl.common.recurrent`).
``CnnPolicy`` (SB3's ``ActorCriticCnnPolicy``) and ``CnnLstmPolicy`` are the same with SB3's ``NatureCNN`` reading
image observations. ``MultiInputPolicy`` (SB3's ``MultiInputActorCriticPolicy``) reads ``Dict`` observations with SB3's
``CombinedExtractor``; the recurrent policies take no ``Dict`` observations.
"""

from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

from sb3_pcl.common.recurrent import CnnLstmPolicy, MlpLstmPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

__all__ = ["CnnLstmPolicy", "CnnPolicy", "MlpLstmPolicy", "MlpPolicy", "MultiInputPolicy"]
