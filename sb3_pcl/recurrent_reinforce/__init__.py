from sb3_pcl.recurrent_reinforce.policies import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy
from sb3_pcl.recurrent_reinforce.recurrent_reinforce import RecurrentReinforce, RecurrentUREX

__all__ = ["CnnPrevActionLstmPolicy", "MlpPrevActionLstmPolicy", "RecurrentReinforce", "RecurrentUREX"]
