"""memory-ext's benchmark harness: ``memext bench locomo | madial | scale``.

Datasets in their public schemas (:mod:`.datasets`), metrics as pure functions (:mod:`.metrics`), the systems
compared side by side behind one interface (:mod:`.systems`), the runner (:mod:`.runner`), Markdown and PNG
reports (:mod:`.report`), synthetic scale runs (:mod:`.scale`) and the command line (:mod:`.cli`).
Protocols: ``BENCHMARKS.md``; results: ``docs/benchmarks.md``.

Optional packages (chromadb, langchain, llama-index, matplotlib) are imported only where they are used;
importing this package needs none of them.
"""

from .cli import add_bench_parser, main
from .datasets import BenchQuestion, BenchTurn, Conversation, DatasetError, load_locomo, load_madial
from .runner import LOCOMO, MADIAL, DatasetSpec, run_benchmark
from .systems import SYSTEMS, System, SystemUnavailable, build_system

__all__ = [
    "LOCOMO",
    "MADIAL",
    "SYSTEMS",
    "BenchQuestion",
    "BenchTurn",
    "Conversation",
    "DatasetError",
    "DatasetSpec",
    "System",
    "SystemUnavailable",
    "add_bench_parser",
    "build_system",
    "load_locomo",
    "load_madial",
    "main",
    "run_benchmark",
]
