"""Versioned weights: `VariableStore` (learner side), `VariableClient` (actor side)."""

from repertory.components.variables.client import VariableClient
from repertory.components.variables.store import to_numpy
from repertory.components.variables.store import VariableStore
