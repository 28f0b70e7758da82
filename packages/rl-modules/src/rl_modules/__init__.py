"""Policy and value modules for the TensorDict RL toolkit: networks, distributions, actors, critics, exploration, recurrent and multi-agent modules."""

from importlib.metadata import version as _version

from tensordict.nn import AddStateIndependentNormalScale, NormalParamExtractor

from rl_modules.actors import (
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    DistributionalQValueActor,
    DistributionalQValueModule,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    SafeModule,
    ValueOperator,
)
from rl_modules.distributions import (
    Delta,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
)
from rl_modules.exploration import (
    AdditiveGaussianModule,
    EGreedyModule,
    OrnsteinUhlenbeckProcessModule,
)
from rl_modules.exploration_type import ExplorationType, exploration_type, set_exploration_type
from rl_modules.networks import (
    MLP,
    BatchRenorm1d,
    Conv3dNet,
    ConvNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    DuelingCnnDQNet,
    Ensemble,
    MultiAgentConvNet,
    MultiAgentMLP,
    NoisyLazyLinear,
    NoisyLinear,
    SquashDims,
    StackedParams,
)
from rl_modules.recurrent import (
    GRUModule,
    LSTMModule,
    RecurrentStatePrimer,
    StateSpec,
    recurrent_mode,
    set_recurrent_mode,
)

__version__ = _version("rl-modules")

__all__ = [
    "MLP",
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "AddStateIndependentNormalScale",
    "AdditiveGaussianModule",
    "BatchRenorm1d",
    "Conv3dNet",
    "ConvNet",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "Delta",
    "DistributionalQValueActor",
    "DistributionalQValueModule",
    "DuelingCnnDQNet",
    "EGreedyModule",
    "Ensemble",
    "ExplorationType",
    "GRUModule",
    "IndependentNormal",
    "LSTMModule",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "MultiAgentConvNet",
    "MultiAgentMLP",
    "NoisyLazyLinear",
    "NoisyLinear",
    "NormalParamExtractor",
    "OneHotCategorical",
    "OrnsteinUhlenbeckProcessModule",
    "ProbabilisticActor",
    "QValueActor",
    "QValueModule",
    "RecurrentStatePrimer",
    "SafeModule",
    "SquashDims",
    "StackedParams",
    "StateSpec",
    "TanhDelta",
    "TanhNormal",
    "TruncatedNormal",
    "ValueOperator",
    "__version__",
    "exploration_type",
    "recurrent_mode",
    "set_exploration_type",
    "set_recurrent_mode",
]
