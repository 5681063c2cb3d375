"""The run's remote token file: mode 0600 whatever was there, and the same
token on every resume (clients keep working across restarts of the run)."""

import os
import stat

from repertory.remote import options as options_lib
from repertory_remote import wire


def _resolve(logdir, monkeypatch):
  monkeypatch.delenv(wire.TOKEN_ENV_VAR, raising=False)
  options = options_lib.RemoteOptions(
      address_file=os.path.join(logdir, 'remote', 'address'))
  return options.resolve_token().token()


def _mode(path):
  return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_token_file_is_private_and_kept_across_resumes(tmp_path,
                                                             monkeypatch):
  path = os.path.join(tmp_path, 'remote', 'token')
  first = _resolve(str(tmp_path), monkeypatch)
  assert _mode(path) == 0o600
  with open(path) as f:
    assert f.read().strip() == first
  assert _resolve(str(tmp_path), monkeypatch) == first  # A resume.
  assert _mode(path) == 0o600


def test_an_existing_world_readable_file_becomes_0600(tmp_path, monkeypatch):
  path = os.path.join(tmp_path, 'remote', 'token')
  os.makedirs(os.path.dirname(path))
  with open(path, 'w') as f:
    f.write('a-token-clients-already-have\n')
  os.chmod(path, 0o644)
  assert _resolve(str(tmp_path), monkeypatch) == 'a-token-clients-already-have'
  assert _mode(path) == 0o600
  empty = os.path.join(tmp_path, 'other')
  os.makedirs(os.path.join(empty, 'remote'))
  open(os.path.join(empty, 'remote', 'token'), 'w').close()
  os.chmod(os.path.join(empty, 'remote', 'token'), 0o644)
  token = _resolve(empty, monkeypatch)  # An empty file gets a new token.
  assert len(token) >= 24 and _mode(os.path.join(empty, 'remote',
                                                 'token')) == 0o600
