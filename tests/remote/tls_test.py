"""TLS on the remote environment service: a certificate authority and a
server certificate made at test time (`cryptography`), the real gRPC service
served with `RemoteOptions(tls_cert_file=..., tls_key_file=...)`, and real
client processes (`repertory_remote.catch_client`): a client trusting the
authority plays; a plaintext client, a client trusting another authority and
a client with a wrong token are refused."""

import datetime
import ipaddress
import json
import os
import subprocess
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
import grpc
import numpy as np
import pytest

from repertory.remote import options as options_lib
from repertory.remote import service as service_lib
from repertory_remote import client as client_lib
from repertory_remote import wire as specs_lib

SPECS = specs_lib.Specs((10, 5), 'float32', 3)
TOKEN = 'tls-test-token'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def _name(common_name):
  return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate_authority(common_name):
  key = ec.generate_private_key(ec.SECP256R1())
  now = datetime.datetime.now(datetime.timezone.utc)
  certificate = (
      x509.CertificateBuilder()
      .subject_name(_name(common_name)).issuer_name(_name(common_name))
      .public_key(key.public_key()).serial_number(x509.random_serial_number())
      .not_valid_before(now - datetime.timedelta(minutes=5))
      .not_valid_after(now + datetime.timedelta(days=1))
      .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                     critical=True)
      .sign(key, hashes.SHA256()))
  return key, certificate


def _server_certificate(ca_key, ca_certificate):
  """A certificate for 127.0.0.1 and localhost signed by the authority."""
  key = ec.generate_private_key(ec.SECP256R1())
  now = datetime.datetime.now(datetime.timezone.utc)
  certificate = (
      x509.CertificateBuilder()
      .subject_name(_name('localhost')).issuer_name(ca_certificate.subject)
      .public_key(key.public_key()).serial_number(x509.random_serial_number())
      .not_valid_before(now - datetime.timedelta(minutes=5))
      .not_valid_after(now + datetime.timedelta(days=1))
      .add_extension(x509.SubjectAlternativeName([
          x509.DNSName('localhost'),
          x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]), critical=False)
      .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                     critical=True)
      .sign(ca_key, hashes.SHA256()))
  return key, certificate


def _pem(certificate):
  return certificate.public_bytes(serialization.Encoding.PEM)


def _rule(slot, step_type, reward, discount, observation, mask,
          logged_action, logged_logits):
  """Follows the ball (a real rule for Catch)."""
  del slot, step_type, reward, discount, mask, logged_action, logged_logits
  ball = int(np.argmax(observation[:-1].max(axis=0)))
  paddle = int(np.argmax(observation[-1]))
  return int(np.sign(ball - paddle) + 1), 0


@pytest.fixture(scope='module')
def tls_served(tmp_path_factory):
  folder = tmp_path_factory.mktemp('tls')
  ca_key, ca_certificate = _certificate_authority('repertory test CA')
  key, certificate = _server_certificate(ca_key, ca_certificate)
  paths = {name: str(folder / f'{name}.pem')
           for name in ('ca', 'other_ca', 'cert', 'key')}
  with open(paths['ca'], 'wb') as f:
    f.write(_pem(ca_certificate))
  with open(paths['other_ca'], 'wb') as f:
    f.write(_pem(_certificate_authority('another CA')[1]))
  with open(paths['cert'], 'wb') as f:
    f.write(_pem(certificate))
  with open(paths['key'], 'wb') as f:
    f.write(key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
  options = options_lib.RemoteOptions(
      tls_cert_file=paths['cert'], tls_key_file=paths['key'],
      token_value=TOKEN)
  ended = []
  service = service_lib.EnvironmentService(
      SPECS, _rule, options.token(), max_episodes=8,
      on_episode_end=lambda r, n, t: ended.append((r, n, t)))
  server, port = service_lib.serve(service, options.host, options.port,
                                   tls=options.tls())
  yield f'127.0.0.1:{port}', paths, ended
  server.stop(grace=None)
  service.close()


def _catch_client(address, *args, token=TOKEN, timeout=120):
  """Runs `python -m repertory_remote.catch_client` to its end; returns
  (summary, stderr)."""
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join(
      [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
  env.pop(specs_lib.TOKEN_ENV_VAR, None)
  process = subprocess.run(
      [sys.executable, '-m', 'repertory_remote.catch_client',
       f'--address={address}', f'--token={token}', *args],
      capture_output=True, text=True, env=env, timeout=timeout, check=False)
  assert process.returncode == 0, process.stderr
  return json.loads(process.stdout.strip().splitlines()[-1]), process.stderr


def test_a_client_trusting_the_authority_plays_over_tls(tls_served):
  address, paths, ended = tls_served
  before = len(ended)
  summary, _ = _catch_client(address, f'--root_certificates={paths["ca"]}',
                             '--episodes=5', '--seconds=60')
  assert summary['episodes'] == 5
  assert summary['connects'] == 1
  assert summary['mean_return_last_100'] == 1.0  # The rule always catches.
  assert len(ended) - before == 5
  assert all(length == 9 for _, length, _ in ended[before:])


def test_a_plaintext_client_is_refused(tls_served):
  address, _, ended = tls_served
  before = len(ended)
  summary, stderr = _catch_client(address, '--episodes=1', '--seconds=4',
                                  '--connect_timeout=2')
  assert summary['episodes'] == 0 and summary['connects'] == 0
  assert 'UNAVAILABLE' in stderr
  with client_lib.Client(address, SPECS, token=TOKEN,
                         connect_timeout_s=2.0) as client:
    with pytest.raises(client_lib.RemoteError) as error:
      client.agent_specs()
  assert error.value.code == grpc.StatusCode.UNAVAILABLE
  assert len(ended) == before


def test_a_client_trusting_another_authority_is_refused(tls_served):
  address, paths, ended = tls_served
  before = len(ended)
  summary, stderr = _catch_client(
      address, f'--root_certificates={paths["other_ca"]}', '--episodes=1',
      '--seconds=4', '--connect_timeout=2')
  assert summary['episodes'] == 0 and summary['connects'] == 0
  assert 'UNAVAILABLE' in stderr
  assert len(ended) == before


def test_a_wrong_token_over_tls_is_unauthenticated(tls_served):
  address, paths, ended = tls_served
  before = len(ended)
  summary, stderr = _catch_client(
      address, f'--root_certificates={paths["ca"]}', '--episodes=1',
      '--seconds=10', token='not-the-token')
  assert summary['episodes'] == 0 and summary['connects'] == 0
  assert 'UNAUTHENTICATED' in stderr
  with open(paths['ca'], 'rb') as f:
    root = f.read()
  with client_lib.Client(address, SPECS, token='not-the-token',
                         root_certificates=root) as client:
    with pytest.raises(client_lib.RemoteError) as error:
      client.agent_specs()
    assert error.value.code == grpc.StatusCode.UNAUTHENTICATED
  with client_lib.Client(address, SPECS, token=TOKEN,
                         root_certificates=root) as client:
    assert client.agent_specs() == SPECS  # The right token is let in.
  assert len(ended) == before
