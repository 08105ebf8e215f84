"""
Policies of Reinforce and UREX.

``MlpPolicy`` is SB3's actor-critic MLP (2 x 64 tanh units, a diagonal Gaussian with a learned
state-independent log-std for ``Box`` actions; the value head is unused by these algorithms).
``MlpLstmPolicy`` is the recurrent policy of the original code,
:class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy`: an LSTM fed with the observation and the previous
action, linear action and value heads on its output (not sb3-contrib's ``MlpLstmPolicy``, whose LSTM reads the
observation only). ``CnnPolicy`` (SB3's ``ActorCriticCnnPolicy``) and ``CnnLstmPolicy`` (``CnnPrevActionLstmPolicy``)
are the same with SB3's ``NatureCNN`` reading image observations. ``MultiInputPolicy`` (SB3's
``MultiInputActorCriticPolicy``) reads ``Dict`` observations with SB3's ``CombinedExtractor``; the recurrent policies
take no ``Dict`` observations.
"""

from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

from sb3_pcl.common.recurrent import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy
MlpLstmPolicy = MlpPrevActionLstmPolicy
CnnLstmPolicy = CnnPrevActionLstmPolicy

__all__ = [
    "CnnLstmPolicy",
    "CnnPolicy",
    "CnnPrevActionLstmPolicy",
    "MlpLstmPolicy",
    "MlpPolicy",
    "MlpPrevActionLstmPolicy",
    "MultiInputPolicy",
]
