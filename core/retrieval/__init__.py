"""The read path of :meth:`memory_ext.MemoryEngine.search`, one typed stage per module.

=========  ==========================================  ===================================================
stage      module                                      decides
=========  ==========================================  ===================================================
request    :mod:`~memory_ext.retrieval.request`        argument checks (query, k, filters, times)
plan       :mod:`memory_ext.plan` (the ``Planner``)     question type and typed routes (goal, speakers,
                                                       boosted kinds, weight, time filter)
scope      :mod:`~memory_ext.retrieval.scope`          filters, cold tier, ``as_of`` (as masks)
recall     :mod:`~memory_ext.retrieval.recall`         which channel calls run, in parallel
                                                       (channels: :mod:`memory_ext.recall.channels`)
fuse       :mod:`~memory_ext.retrieval.fuse`           turn scores per route (z-scores) and their fusion
                                                       (weighted sum, or RRF); supersession; the pool
rerank     :mod:`~memory_ext.retrieval.rerank`         optional reranking of a fair pool
select     :mod:`~memory_ext.retrieval.select`         MMR, episode budget, route quotas
hydrate    :mod:`~memory_ext.retrieval.hydrate`        items from the truth store
context    :mod:`~memory_ext.retrieval.context`        prompt-ready text within a token budget
explain    :mod:`~memory_ext.retrieval.explain`        ``explain`` / ``trace`` from the stages' outputs
=========  ==========================================  ===================================================

:class:`ReadPipeline` (:mod:`~memory_ext.retrieval.pipeline`) runs them in that order. No stage holds SQL: the
filter's SQL is in :mod:`memory_ext.store.filters`, every read goes through the store's methods.
"""

from .pipeline import ReadPipeline
from .request import SearchRequest, parse_request

__all__ = ["ReadPipeline", "SearchRequest", "parse_request"]
