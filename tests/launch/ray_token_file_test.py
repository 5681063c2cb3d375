"""Ray's token file is private: created 0600 in a 0700 ~/.ray, or narrowed
to 0600 when another program left it readable by others."""

import os
import stat

import pytest

from repertory.launch.backends import ray_auth


@pytest.fixture(name='home')
def _home(tmp_path, monkeypatch):
  monkeypatch.setenv('HOME', str(tmp_path))
  for name in ('RAY_AUTH_MODE', 'RAY_AUTH_TOKEN', 'RAY_AUTH_TOKEN_PATH'):
    monkeypatch.delenv(name, raising=False)
  return tmp_path


def _mode(path):
  return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_token_is_readable_by_its_owner_only(home):
  os.umask(old := os.umask(0o022))  # The usual umask would give 0644.
  ray_auth.private_token_file()
  token = home / '.ray' / 'auth_token'
  assert _mode(token) == 0o600
  assert _mode(home / '.ray') == 0o700 & ~old
  text = token.read_text()
  assert len(text) == 64 and int(text, 16) >= 0    # 256 bits, hex.


def test_an_open_token_file_is_narrowed_and_kept(home):
  (home / '.ray').mkdir()
  token = home / '.ray' / 'auth_token'
  token.write_text('0123abcd')
  token.chmod(0o644)
  ray_auth.private_token_file()
  assert _mode(token) == 0o600
  assert token.read_text() == '0123abcd'


def test_two_calls_keep_the_first_token(home):
  ray_auth.private_token_file()
  first = (home / '.ray' / 'auth_token').read_text()
  ray_auth.private_token_file()
  assert (home / '.ray' / 'auth_token').read_text() == first


@pytest.mark.parametrize('name, value', [
    ('RAY_AUTH_MODE', 'disabled'), ('RAY_AUTH_TOKEN', 'abc'),
    ('RAY_AUTH_TOKEN_PATH', '/elsewhere/token')])
def test_nothing_is_written_when_ray_takes_no_token_from_home(
    home, monkeypatch, name, value):
  monkeypatch.setenv(name, value)
  ray_auth.private_token_file()
  assert not (home / '.ray').exists()
