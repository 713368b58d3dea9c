"""Recall channels and the parallel runner.

A channel is a registered :class:`Recaller` chosen by a selection key of ``EngineConfig.recall``; the runner
executes the selected channels in parallel with a per-channel timeout and turns a failure into a
:class:`~memory_ext.models.ChannelError` instead of an empty answer.
"""

from .base import Hits, RecallContext, Recaller, RecallRequest
from .keyword import KeywordRecaller
from .runner import ChannelRun, run_channels
from .vector import VectorRecaller

__all__ = ["ChannelRun", "Hits", "KeywordRecaller", "RecallContext", "RecallRequest", "Recaller", "VectorRecaller",
           "run_channels"]
