"""The launch flags as Launchpad names them (`launch.flags.LAUNCH_TYPE`).

--lp_launch_type, --lp_resources, --ray_address and
--lp_termination_notice_secs are defined in `repertory.launch.launcher`.
"""

from repertory.launch import launcher as _launcher

LAUNCH_TYPE = _launcher._LAUNCH_TYPE  # pylint: disable=protected-access
RAY_ADDRESS = _launcher._RAY_ADDRESS  # pylint: disable=protected-access
RESOURCES = _launcher._RESOURCES  # pylint: disable=protected-access
TERMINATION_NOTICE_SECS = _launcher._NOTICE  # pylint: disable=protected-access
