"""
Policies of RecurrentReinforce and RecurrentUREX: the recurrent policy of the original code,
:class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy` (an LSTM fed with the observation and the previous
action, linear action and value heads on its output; the value head is unused by these algorithms), and
:class:`~sb3_pcl.common.recurrent.policies.CnnPrevActionLstmPolicy`, the same after SB3's ``NatureCNN`` for image
observations. sb3-contrib's ``MlpLstmPolicy`` (whose LSTM reads the observation only) is another policy; its class,
``RecurrentActorCriticPolicy``, can be passed too.
"""

from sb3_pcl.common.recurrent import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy

__all__ = ["CnnPrevActionLstmPolicy", "MlpPrevActionLstmPolicy"]
