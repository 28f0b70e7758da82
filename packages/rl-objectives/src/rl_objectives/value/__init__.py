"""Value estimation: pure functions (:mod:`rl_objectives.value.functional`) and TensorDict modules."""

from rl_objectives.value import functional
from rl_objectives.value.common import ValueEstimatorBase, ValueEstimatorKeys
from rl_objectives.value.gae import GAE
from rl_objectives.value.multiagent_gae import MultiAgentGAE
from rl_objectives.value.registry import (
    ValueEstimatorEntry,
    ValueEstimators,
    build_value_estimator,
    check_value_type,
    default_value_kwargs,
    dispatch_value_estimator,
    get_value_estimator_entry,
    register_value_estimator,
    registered_value_estimators,
)
from rl_objectives.value.td import TD0Estimator, TD1Estimator, TDLambdaEstimator
from rl_objectives.value.vtrace import VTrace

__all__ = [
    "GAE",
    "MultiAgentGAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "VTrace",
    "ValueEstimatorBase",
    "ValueEstimatorEntry",
    "ValueEstimatorKeys",
    "ValueEstimators",
    "build_value_estimator",
    "check_value_type",
    "default_value_kwargs",
    "dispatch_value_estimator",
    "functional",
    "get_value_estimator_entry",
    "register_value_estimator",
    "registered_value_estimators",
]
