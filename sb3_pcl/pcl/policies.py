"""
Policies of PCL.

PCL needs, for any state, the log-probability of an action under a stochastic policy and a
state value. SB3's actor-critic policies provide exactly that for Discrete, MultiDiscrete,
MultiBinary and Box actions (a diagonal Gaussian with a learned, state-independent log-std),
with separate policy and value MLPs by default (2 x 64 tanh units: the seed's MLP).
"""

from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy

__all__ = ["CnnPolicy", "MlpPolicy"]
