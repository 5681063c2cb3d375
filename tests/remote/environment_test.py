"""Remote episodes as plain dm_env environments: a `SlotEnvironment` stepped
by hand (no agent) against the service node and real client processes.

* The episodes a client plays arrive as FIRST .. LAST timesteps with its
  observations, rewards and discounts, and the actions chosen here reach the
  client's game (a policy that follows the ball wins every episode).
* More episodes than environments: the extra ones wait for an idle one.
* The slot server listens on loopback and refuses a wrong token.
* The service going away mid-episode ends it here with a truncation; the
  environment attaches again to the next service.
"""

import threading
import time

import dm_env
import grpc
import numpy as np
import pytest

from repertory import environments
from repertory import testing
from repertory.remote import environment as environment_lib
from repertory.remote import hub as hub_lib
from repertory.remote import node as node_lib
from repertory.remote import options as options_lib
from repertory_remote import environment_pb2 as pb

TOKEN = 'environment-test-token'
SLOT_TOKEN = 'environment-test-slot-token'


def _specs():
  env = environments.make('catch', seed=0)
  specs = (env.observation_spec(), env.action_spec(), env.reward_spec(),
           env.discount_spec())
  env.close()
  return specs


def _node(tmp_path):
  options = options_lib.RemoteOptions(
      token_value=TOKEN, address_file=str(tmp_path / 'remote' / 'address'))
  specs = _specs()
  slots = environment_lib.slot_address_file(options.address_file)
  node = node_lib.RemoteEnvironmentNode(specs[0], specs[1], options, slots,
                                        SLOT_TOKEN, reward_spec=specs[2])
  factory = environment_lib.SlotFactory('catch', specs, slots, SLOT_TOKEN)
  return node, factory, options.address_file


def _follow_ball(observation):
  ball = int(np.argmax(observation[:-1].max(axis=0)))
  paddle = int(np.argmax(observation[-1]))
  return int(np.sign(ball - paddle) + 1)


def _play(env, episodes):
  """Plays `episodes` whole episodes; returns their timesteps."""
  played = []
  for _ in range(episodes):
    timestep = env.reset()
    steps = [timestep]
    while not timestep.last():
      timestep = env.step(_follow_ball(timestep.observation))
      steps.append(timestep)
    played.append(steps)
  return played


def test_client_episodes_arrive_as_timesteps_and_actions_reach_the_game(
    tmp_path, clients):
  node, factory, address_file = _node(tmp_path)
  env = factory(seed=0)
  try:
    assert isinstance(env, dm_env.Environment)
    assert repr(factory) == 'remote:catch'
    assert factory.evaluation_env == 'catch'
    client = clients.python_client(address_file, TOKEN, '--episodes=3',
                                   '--seconds=120')
    played = _play(env, 3)
    result = clients.summary(client)
  finally:
    env.close()
    node.close()
  assert result['episodes'] == 3 and result['actions'] == 30
  assert result['mean_return_last_100'] == 1.0  # Our actions were played.
  for steps in played:
    assert [int(t.step_type) for t in steps] == [0] + [1] * 8 + [2]
    assert [float(t.reward) for t in steps[1:]] == [0.0] * 8 + [1.0]
    assert steps[-1].discount == 0.0
    for timestep in steps:
      assert timestep.observation.shape == (10, 5)
      assert timestep.observation.dtype == np.float32
    for timestep in steps[:-1]:  # (At a catch the ball is on the paddle.)
      assert timestep.observation.sum() == 2.0  # A ball and a paddle.


@pytest.mark.parametrize('language', ['python', 'node'])
def test_more_episodes_than_environments_wait_for_an_idle_one(
    tmp_path, clients, language):
  """Three concurrent episodes on one environment: they take turns, and
  the client ends right after its sixth episode (the ones still waiting
  for the environment are let go, not waited out)."""
  if language == 'node':
    clients.require_node()
  node, factory, address_file = _node(tmp_path)
  env = factory()
  try:
    if language == 'python':
      client = clients.python_client(address_file, TOKEN, '--threads=3',
                                     '--episodes=6', '--seconds=120')
    else:
      client = clients.node_client(address_file, TOKEN, '--concurrent=3',
                                   '--episodes=6', '--seconds=120')
    played = _play(env, 6)
    last_episode_played = time.monotonic()
    result = clients.summary(client)
    ended_after = time.monotonic() - last_episode_played
    assert node.stats()['attached'] == 1
  finally:
    env.close()
    node.close()
  assert result['episodes'] == 6
  assert all(len(steps) == 10 for steps in played)
  assert ended_after < 20, (
      f'the client ended {ended_after:.1f} s after its last episode')


def test_a_lost_service_truncates_the_episode_and_the_environment_reattaches(
    tmp_path, clients):
  node, factory, address_file = _node(tmp_path)
  env = factory()
  holder = clients.python_client(address_file, TOKEN, '--hold_after=3',
                                 '--seconds=120')
  try:
    timestep = env.reset()
    for _ in range(2):
      timestep = env.step(_follow_ball(timestep.observation))
    # The third action reaches the client, which then holds: no step comes.
    answered = {}
    stepper = threading.Thread(target=lambda: answered.update(
        timestep=env.step(_follow_ball(timestep.observation))))
    stepper.start()
    assert holder.stdout.readline().strip() == 'HOLDING'
    node.close()
    stepper.join(timeout=30)
    truncation = answered['timestep']
    assert truncation.last() and truncation.discount == 1.0
    assert truncation.reward == 0.0
    np.testing.assert_array_equal(truncation.observation,
                                  timestep.observation)
  finally:
    holder.kill()
    holder.wait(timeout=30)
  node, _, address_file = _node(tmp_path)  # A new service, a new port.
  try:
    client = clients.python_client(address_file, TOKEN, '--episodes=1',
                                   '--seconds=120')
    (steps,) = _play(env, 1)
    assert clients.summary(client)['episodes'] == 1
    testing.wait_until(lambda: node.stats()['idle'] == 1,
                       'the environment to be idle again')
  finally:
    env.close()
    node.close()
  assert len(steps) == 10 and steps[-1].reward == 1.0


@pytest.mark.parametrize('token', ['wrong', ''])
def test_the_slot_server_is_loopback_and_wants_the_run_token(tmp_path,
                                                             token):
  node, factory, _ = _node(tmp_path)
  try:
    with open(factory.address_file) as f:
      address = f.read().strip()
    assert address == f'127.0.0.1:{node.slot_port}'
    with grpc.insecure_channel(address) as channel:
      attach = channel.stream_stream(
          hub_lib.ATTACH, request_serializer=lambda b: b,
          response_deserializer=pb.Step.FromString)
      with pytest.raises(grpc.RpcError) as error:
        next(attach(iter(()), timeout=10,
                    metadata=(('authorization', f'Bearer {token}'),)))
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert node.stats()['attached'] == 0
  finally:
    node.close()
