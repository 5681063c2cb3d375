r"""Evaluates a policy snapshot without the training code.

  python -m repertory.evaluate --snapshot=runs/impala-catch/snapshot \
      --env=catch --episodes=100
"""

import json

from absl import app
from absl import flags

_SNAPSHOT = flags.DEFINE_string('snapshot', None, 'A policy SavedModel '
                                'written by the model store.', required=True)
_ENV = flags.DEFINE_string('env', 'catch', 'An environment spec.')
_EPISODES = flags.DEFINE_integer('episodes', 20, 'Evaluation episodes.')
_SEED = flags.DEFINE_integer('seed', 0, 'Environment seed.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  # Imported here so that --help stays fast.
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory.components import evaluation  # pylint: disable=g-import-not-at-top
  from repertory.components import model_store  # pylint: disable=g-import-not-at-top
  environment = environments.make(_ENV.value, seed=_SEED.value)
  actor = model_store.SnapshotActor(model_store.load_policy(_SNAPSHOT.value))
  result = evaluation.evaluate(environment, actor, _EPISODES.value)
  print(json.dumps({'snapshot': _SNAPSHOT.value, 'env': _ENV.value,
                    **result.as_dict('eval')}, indent=2))


if __name__ == '__main__':
  app.run(main)
