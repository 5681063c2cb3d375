"""Restarting a program's failed Ray units (`max_restarts`).

`Restarts` is the part of `ray_backend.RayLauncher` that decides whether a
failed unit is restarted and tells a restarted unit's new process to start
its nodes: Ray restarts a dead actor's process itself (the actor's
`max_restarts`); a node that raised has its process killed first.
"""

from typing import Optional

from absl import logging
import ray

from repertory.launch.api import errors


def _failure_key(error: errors.NodeError) -> Optional[tuple]:
  """What makes two failures of a node the same error."""
  if type(error) is not errors.NodeError:  # pylint: disable=unidiomatic-typecheck
    return errors.failure_key(error)  # The node's own exception.
  if error.__cause__ is not None:
    return errors.failure_key(error.__cause__)
  lines = (error.node_traceback or '').strip().splitlines()
  return ('traceback', lines[-1] if lines else '')


class Restarts:
  """Restart decisions of `RayLauncher` (which sets `program`, `actors`,
  `restarts`, `_max_restarts`, `_last_failure`, `_killed`, `_start_refs`,
  `_stop` and has `_fail` and `_logfile`)."""

  def _restarted_in_thread(self, unit_id: str, label: str) -> bool:
    """Whether a failed node of group `label` in unit `unit_id` was
    restarted in its thread (not by restarting the process)."""
    unit = next(u for u in self.program.units if u.unit_id == unit_id)
    return unit.restarts_in_thread and label == unit.label

  def _pid_of(self, unit_id: str) -> Optional[int]:
    """The process id the unit's latest start() reported, if it answered."""
    return self._started_info(unit_id).get('pid')

  def _started_info(self, unit_id: str) -> dict:
    """What the unit's latest start() reported (its pid and host's ip), or
    {} if it did not answer."""
    ref = self._start_refs.get(unit_id)
    if ref is None or not ray.wait([ref], timeout=0)[0]:
      return {}
    try:
      return ray.get(ref)
    except Exception:  # pylint: disable=broad-except
      return {}

  def _restarted(self, unit_id: str, old_pid: Optional[int]) -> bool:
    """Whether a restarted unit's new process started (a start() that the
    old process answered is sent again)."""
    ref = self._start_refs[unit_id]
    if not ray.wait([ref], timeout=0)[0]:
      return False
    if old_pid is not None and self._pid_of(unit_id) == old_pid:
      self._start_refs[unit_id] = self.actors[unit_id].start.remote()
      return False
    return True  # Started (or its start failed: the watch will say so).

  def _result_of(self, ref, unit_id: str):
    try:
      result = ray.get(ref)
      self._killed.discard(unit_id)  # Its new process answered.
      return result
    except Exception as e:  # pylint: disable=broad-except
      if self._stop.is_set():
        return None
      if (isinstance(e, ray.exceptions.ActorUnavailableError) and
          unit_id in self._killed):
        # A call that reached the process this launcher killed to restart
        # the unit (not a new failure): ask the new process to start.
        self._killed.discard(unit_id)
        old_pid = self._pid_of(unit_id)
        self._start_refs[unit_id] = self.actors[unit_id].start.remote()
        return ('restarted', old_pid)
      unit = next(u for u in self.program.units if u.unit_id == unit_id)
      ip = self._started_info(unit_id).get('ip')
      where = f' on host {ip}' if ip else ''
      error = errors.NodeError(
          unit.label, unit_id,
          f'The process of unit {unit_id}{where} died or could not start:'
          f'\n{e}', self._logfile(unit_id))
      old_pid = self._pid_of(unit_id)
      if self._restart(unit_id, error, kill=False):
        return ('restarted', old_pid)
      self._fail(error)
      return None

  def _restart(self, unit_id: str, error: errors.NodeError,
               kill: bool) -> bool:
    """Restarts a failed unit if its group's max_restarts allows it.

    Ray restarts a dead actor's process itself (`max_restarts`); a node that
    raised has its process killed first (`kill`). The restarted actor is
    asked to start its nodes again. Returns False if no restart is left.
    """
    unit = next(u for u in self.program.units if u.unit_id == unit_id)
    limit = self._max_restarts.get(unit.label, 0)
    if self._stop.is_set() or self.restarts[unit_id] >= limit:
      return False
    # A node's error (not its process's death) in its constructor, or the
    # same as its last one, would only repeat.
    key = _failure_key(error) if kill else None
    if kill and error.phase == 'build':
      return False  # _fail's line says "in its constructor".
    if kill and key == self._last_failure.get(unit_id):
      logging.error('Unit %s raised the same error twice in a row: not '
                    'restarted again.', unit_id)
      return False
    self._last_failure[unit_id] = key
    self.restarts[unit_id] += 1
    logging.warning('Unit %s failed; restarting it (%d of max_restarts=%d): '
                    '%s', unit_id, self.restarts[unit_id], limit,
                    errors.one_line(error))
    actor = self.actors[unit_id]
    if kill:
      self._killed.add(unit_id)
      ray.kill(actor, no_restart=False)
    self._start_refs[unit_id] = actor.start.remote()
    return True
