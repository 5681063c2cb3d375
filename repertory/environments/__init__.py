"""Environments: one `make(spec)` front door, wrappers, batched environments.

Importing this package imports neither TensorFlow nor any optional suite
(bsuite, gymnasium, minatar, envpool); each suite is imported when a spec
asks for it.

  env = environments.make('catch', seed=0)
  env = environments.make('gym:CartPole-v1', seed=0)
  batch = environments.make_batched('catch', num_envs=8, seed=0,
                                    kind='process')
"""

from repertory.environments.batched import BatchedEnvironment
from repertory.environments.batched import BatchedEpisodeStatistics
from repertory.environments.batched import BatchedTimeStep
from repertory.environments.batched import SerialBatchedEnvironment
from repertory.environments.catch import Catch
from repertory.environments.envpool_adapter import EnvPoolBatchedEnvironment
from repertory.environments.envpool_adapter import EnvPoolEnvironment
from repertory.environments.factory import make_batched
from repertory.environments.factory import BATCHED_KINDS
from repertory.environments.gym_adapter import from_gym
from repertory.environments.gym_adapter import GymAdapter
from repertory.environments.gym_adapter import space_to_spec
from repertory.environments.minatar_adapter import MinAtarEnvironment
from repertory.environments.process_batched import ProcessBatchedEnvironment
from repertory.environments.process_batched import WorkerError
from repertory.environments.registry import make
from repertory.environments.registry import MissingSuiteError
from repertory.environments.registry import register
from repertory.environments.registry import registered
from repertory.environments.registry import SPEC_FORMS
from repertory.environments.registry import UnknownEnvironmentError
from repertory.environments.wrappers import ActionRepeat
from repertory.environments.wrappers import EnvironmentWrapper
from repertory.environments.wrappers import EpisodeStatistics
from repertory.environments.wrappers import EpisodeStats
from repertory.environments.wrappers import OAR
from repertory.environments.wrappers import ObservationActionReward
from repertory.environments.wrappers import SinglePrecision
from repertory.environments.wrappers import StepLimit
from repertory.environments.wrappers import wrap_all

