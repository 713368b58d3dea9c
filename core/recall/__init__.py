"""Recall channels and the parallel runner.

Every channel is a row of the table in :mod:`memory_ext.recall.channels` (its built-in :class:`Recaller`, switch,
needs and record kind); a selection key of ``EngineConfig.recall`` picks its implementation by name (a built-in
or one added with :func:`memory_ext.register_recaller`) and ``recall.channel_options`` hands it options. The
runner executes the calls in parallel with a per-channel timeout and turns a failure into a
:class:`~memory_ext.models.ChannelError` instead of an empty answer.
"""

from .base import Hits, RecallContext, Recaller, RecallRequest
from .keyword import KeywordRecaller
from .runner import ChannelRun, run_channels
from .vector import VectorRecaller

__all__ = ["ChannelRun", "Hits", "KeywordRecaller", "RecallContext", "RecallRequest", "Recaller", "VectorRecaller",
           "run_channels"]
