"""Parse a host's whole context (as given to ``pre_compress``) into turns, when its format is recognised.

Recognised: a JSON list of messages (OpenAI ``{"role", "content"}``, LangChain ``{"type": "human"|"ai"|...,
"content"}``, content as a string or a list of ``{"type": "text", "text": ...}`` parts, optional ``name`` and
``tool_calls``), or an object with such a list under ``messages``; and plain transcripts whose turns start
with ``User:``, ``Human:``, ``Assistant:``, ``AI:``, ``System:``, ``Tool:`` (or 用户：/助手：/系统：/工具：), lines
without a label continuing the previous turn. Anything else returns None: the caller keeps the raw text.

>>> [(t["role"], t["content"]) for t in parse_context("User: book a table\\nAssistant: for how many?")]
[('user', 'book a table'), ('assistant', 'for how many?')]
>>> parse_context("just some notes") is None
True
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_context"]

_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system",
          "tool": "tool", "function": "tool", "developer": "system", "model": "assistant"}
_LABEL = re.compile(r"^\s*(user|human|assistant|ai|system|tool|用户|助手|系统|工具)\s*[:：]\s?(.*)$", re.IGNORECASE)
_ZH = {"用户": "user", "助手": "assistant", "系统": "system", "工具": "tool"}


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts)
    return None


def _from_json(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list) or not data:
        return None
    out = []
    for m in data:
        if not isinstance(m, dict):
            return None
        role = _ROLES.get(str(m.get("role") or m.get("type") or "").lower())
        content = _content(m.get("content"))
        if role is None or content is None:
            return None
        raw_calls = m.get("tool_calls")
        calls: list[Any] = raw_calls if isinstance(raw_calls, list) else []
        if not content.strip() and not calls:
            continue
        out.append({"role": role, "content": content, "speaker": m.get("name") if isinstance(m.get("name"), str)
                    else None, "tool_calls": [c for c in calls if isinstance(c, dict)]})
    return out or None


def _from_transcript(text: str) -> list[dict[str, Any]] | None:
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            label = m.group(1)
            out.append({"role": _ZH.get(label) or _ROLES[label.lower()], "content": m.group(2), "speaker": None,
                        "tool_calls": []})
        elif out:
            out[-1]["content"] += "\n" + line
        elif line.strip():
            return None  # text before the first label: not a transcript
    for t in out:
        t["content"] = t["content"].strip()
    out = [t for t in out if t["content"]]
    return out if len(out) >= 1 and any(t["role"] in ("user", "assistant") for t in out) else None


def parse_context(text: str) -> list[dict[str, Any]] | None:
    """Turns (dicts with role, content, speaker, tool_calls) of a recognised context, else None."""
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            return _from_json(json.loads(stripped))
        except (ValueError, RecursionError):
            pass
    return _from_transcript(text)
