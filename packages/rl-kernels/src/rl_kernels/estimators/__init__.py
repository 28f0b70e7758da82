"""Drop-in estimator modules (same keys and arguments as ``rl_objectives.value``) on the scans."""

from rl_kernels.estimators._keys import ValueEstimatorKeys
from rl_kernels.estimators.common import ValueEstimatorBase
from rl_kernels.estimators.gae import GAE
from rl_kernels.estimators.td import TDLambdaEstimator
from rl_kernels.estimators.vtrace import VTrace

__all__ = ["GAE", "TDLambdaEstimator", "VTrace", "ValueEstimatorBase", "ValueEstimatorKeys"]
