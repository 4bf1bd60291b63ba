"""Structured output for the fake server: a request that asks for JSON gets JSON.

Anthropic's ``output_config.format`` (and the older ``output_format``) and OpenAI's
``response_format`` ask for an answer matching a JSON schema; Claude Code, for
one, names each session with such a side call (``{"title": ...}``).  The fake
answers with an instance of the schema, its strings taken from the reply it would
have given, so a client parsing the answer gets what it parses:

    schema_of("anthropic", body)            # the requested schema, or None
    instance(schema, "Fake reply to: hi")   # {"title": "Fake reply to: hi"}

Memory extraction (``purpose="memory-extract"``) has no schema but a JSON contract of its
own; ``memory_operations(prompt)`` is the fake's deterministic answer to it: every sentence
of the user's in the dialogue that states a standing preference ("always", "never",
"prefer", "please") becomes one ``add`` (type ``feedback`` for always/never, else ``user``), citing
the number of the message it was said in (``"from"``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

__all__ = ["instance", "json_answer", "memory_operations", "schema_of"]

ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
"""What a bare "JSON, any object" request (OpenAI's ``json_object``) gets the shape of."""


def schema_of(api: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the request asks its answer to match (None: free text)."""
    if api == "anthropic":
        config = body.get("output_config")
        fmt = config.get("format") if isinstance(config, Mapping) else None
        fmt = fmt if isinstance(fmt, Mapping) else body.get("output_format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), Mapping):
            return dict(fmt["schema"])
        return None
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return None
    if fmt.get("type") == "json_object":
        return ANY_OBJECT
    spec = fmt.get("json_schema")
    if fmt.get("type") == "json_schema" and isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping):
        return dict(spec["schema"])
    return None


def instance(schema: Mapping[str, Any], text: str, depth: int = 0) -> Any:
    """A small value matching ``schema``: required properties filled (all of them when
    none is marked), ``enum``/``const`` honoured, strings set to ``text``."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            return instance(options[0], text, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        declared, required = schema.get("properties"), schema.get("required")
        properties: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
        wanted: list[Any] = required if isinstance(required, list) else list(properties)
        if depth > 8:  # a recursive schema: stop at an empty object rather than loop
            return {}
        return {name: instance(properties.get(name) or {}, text, depth + 1) for name in wanted}
    if kind == "array":
        least = int(schema.get("minItems") or 0)
        items = schema.get("items")
        item: Mapping[str, Any] = items if isinstance(items, Mapping) else {"type": "string"}
        return [instance(item, text, depth + 1) for _ in range(least)]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text


def json_answer(schema: Mapping[str, Any], text: str) -> str:
    return json.dumps(instance(schema, text), ensure_ascii=False)


_PREFERENCE = re.compile(r"\b(always|never|prefer|prefers|please)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def memory_operations(prompt: str) -> str:
    """The fake model's ``{"operations": [...]}`` for a memory-extraction prompt (see the module doc)."""
    dialogue = prompt.split("\nDialogue:\n", 1)[-1]
    ops: list[dict[str, Any]] = []
    for part in dialogue.split("\n\n"):
        label, _, said = part.partition(": ")
        number, _, role = label.rpartition("] ")
        if not role.startswith("user"):
            continue
        for sentence in _SENTENCE.split(said):
            sentence = " ".join(sentence.split())
            found = _PREFERENCE.search(sentence)
            if not found or not 3 <= len(sentence.split()) <= 60:
                continue
            kind = "feedback" if found.group(1).lower() in ("always", "never") else "user"
            op: dict[str, Any] = {"op": "add", "name": " ".join(sentence.split()[:6]), "type": kind,
                                  "description": sentence[:150], "body": sentence}
            if number.lstrip("[").isdigit():
                op["from"] = [int(number.lstrip("["))]
            ops.append(op)
    return json.dumps({"operations": ops}, ensure_ascii=False)
