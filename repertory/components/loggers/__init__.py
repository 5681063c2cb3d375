"""Loggers with one interface (`write(values)`, `close()`); `make_logger`."""

from repertory.components.loggers.base import Dispatcher
from repertory.components.loggers.base import InMemoryLogger
from repertory.components.loggers.base import Logger
from repertory.components.loggers.base import LoggingData
from repertory.components.loggers.base import NamespacedLogger
from repertory.components.loggers.base import TimeFilter
from repertory.components.loggers.csv_logger import CSVLogger
from repertory.components.loggers.default import make_logger
from repertory.components.loggers.progress_display import ProgressDisplay
from repertory.components.loggers.tensorboard import TensorBoardLogger
from repertory.components.loggers.terminal import TerminalLogger
