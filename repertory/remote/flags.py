"""The `--remote_*` flags of `repertory.run` (read only there)."""

from absl import flags

from repertory.remote import options as options_lib

_HOST = flags.DEFINE_string(
    'remote_host', options_lib.LOOPBACK, 'With --env=remote:<spec>: the '
    "address the service binds ('0.0.0.0' serves other machines).")
_PORT = flags.DEFINE_integer(
    'remote_port', 0, 'With --env=remote:<spec>: the service port (0: a free '
    'one, written to <logdir>/remote/address).')
_TOKEN_FILE = flags.DEFINE_string(
    'remote_token_file', '', 'A file holding the shared token (default: '
    '$REPERTORY_REMOTE_TOKEN, else a new one in <logdir>/remote/token).')
_TLS_CERT = flags.DEFINE_string('remote_tls_cert', '',
                                'PEM certificate chain to serve TLS.')
_TLS_KEY = flags.DEFINE_string('remote_tls_key', '',
                               'PEM private key to serve TLS.')
_MAX_EPISODES = flags.DEFINE_integer(
    'remote_max_episodes', 128, 'The most remote episodes open at once.')
_MAX_SESSIONS = flags.DEFINE_integer(
    'remote_max_sessions', 128, 'The most remote sessions open at once over '
    'all clients.')
_MAX_SESSIONS_PER_PEER = flags.DEFINE_integer(
    'remote_max_sessions_per_peer', 8, 'The most sessions one client '
    'connection may hold.')
_HELLO_TIMEOUT = flags.DEFINE_float(
    'remote_hello_timeout', 10.0, 'Seconds a new session may take to send '
    'its Hello before it is closed.')
_MAX_ABS_REWARD = flags.DEFINE_float(
    'remote_max_abs_reward', 1000.0, 'Rewards outside +-this (or the reward '
    "spec's bounds) are refused.")


def options() -> options_lib.RemoteOptions:
  """The `RemoteOptions` the `--remote_*` flags give; raises ValueError for
  a bad value."""
  return options_lib.RemoteOptions(
      host=_HOST.value, port=_PORT.value, token_file=_TOKEN_FILE.value,
      tls_cert_file=_TLS_CERT.value, tls_key_file=_TLS_KEY.value,
      max_episodes=_MAX_EPISODES.value, max_sessions=_MAX_SESSIONS.value,
      max_sessions_per_peer=_MAX_SESSIONS_PER_PEER.value,
      hello_timeout_s=_HELLO_TIMEOUT.value,
      max_abs_reward=_MAX_ABS_REWARD.value)
