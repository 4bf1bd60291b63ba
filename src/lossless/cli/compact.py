"""``lossless compact SESSION -o OUT``: a recorded session compacted to fit a window
(by default its model's), written in its API dialect.

Claude Code JSONL and Anthropic message lists come out as Anthropic messages
JSON; mini-swe-agent trajectories and OpenAI lists (and Codex CLI rollouts) as
OpenAI messages JSON.  The context compacted is the live one: from the last
compaction recorded in the file (its summary included) to the end.

``--claude-code`` writes a Claude Code session instead, under a new session id, in
the source session's project folder (``~/.claude/projects/<project>/<id>.jsonl``):
``claude --resume <id>``, run in that project, carries on from the compacted context.
``--codex`` does the same for a Codex CLI rollout: a new rollout under
``$CODEX_HOME/sessions/YYYY/MM/DD/`` whose history is one ``compacted`` item (as Codex's own
compaction writes), its replacement history the compacted conversation, so
``codex resume <id>`` carries on from it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Sequence

from ..config import ContextConfig
from ..dialects.anthropic import to_anthropic
from ..dialects.mini_swe import to_mini_swe
from ..dialects.openai import to_openai
from ..errors import ConfigError, InputError, InvalidRequest
from ..calibration import plausible
from ..inspect import infer_unseen_tokens, live_anchor
from ..manager import ContextManager
from ..messages import Message, Text
from ..rounds import Dialect, problems, repair
from ..storage import open_store
from ..store import atomic_write
from ..tokens import default_counter
from ._common import int_or_auto, positive, print_json, printable, provider_from, request_tools, \
    summarizer_options, warn
from .sessions import SESSION_HELP, WINDOW_DEFAULT_HELP


def register(sub: Any) -> None:
    s = sub.add_parser("compact", help="write a session compacted to fit a window")
    s.add_argument("file", metavar="SESSION", help=SESSION_HELP)
    s.add_argument("--window", type=positive, metavar="N", help=WINDOW_DEFAULT_HELP)
    s.add_argument("--max-output", type=positive, metavar="N",
                   help="the max_tokens asked for each answer (default: min(32,000, window/4))")
    s.add_argument("-o", "--output", type=Path, metavar="OUT",
                   help="where to write the compacted conversation (JSON, in the session's API dialect; with "
                        "--claude-code or --codex, the session file: by default where that agent finds it)")
    agent = s.add_mutually_exclusive_group()
    agent.add_argument("--claude-code", action="store_true",
                       help="write a Claude Code session file, under a new session id, that `claude --resume ID` loads")
    agent.add_argument("--codex", action="store_true",
                       help="write a Codex CLI session (from a Codex rollout), under a new session id, that "
                            "`codex resume ID` loads")
    s.add_argument("--store", help="artifact store: a directory or postgresql://… (default: $LOSSLESS_STORE, "
                                   "else $LOSSLESS_HOME or the nearest .lossless)")
    s.add_argument("--unseen-tokens", type=int_or_auto, default=None, metavar="N|auto",
                   help="tokens each request carries that the file does not show (system prompt, tools), kept "
                        "free in the window; default 'auto': inferred from the first recorded usage, as replay does")
    s.add_argument("--instructions", metavar="TEXT",
                   help="compact now, whatever the size, with these instructions for the model's summary "
                        "(a /compact; needs --summarizer llm)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--repair", action="store_true",
                   help="repair an invalid history (an 'interrupted' result for an unanswered call, orphan results "
                        "dropped) and report each change, instead of refusing it")
    summarizer_options(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sessions import locate

    if args.instructions is not None and args.summarizer != "llm":
        raise ConfigError("--instructions are for the model's summary: add --summarizer llm --provider P --model M")
    if args.output is None and not (args.claude_code or args.codex):
        raise ConfigError("compact needs -o OUT (or --claude-code or --codex, to write a session that agent resumes)")
    args.file = locate(args.file)
    if args.output is not None and _same_file(args.file, args.output):
        raise ConfigError(f"-o {args.output} is the session being compacted: write it elsewhere "
                          "(the original stays what a rerun or `lossless inspect` reads)")
    report = compact_file(args.file, args.output, window=args.window, max_output=args.max_output, store=args.store,
                          provider=provider_from(args), repair_input=args.repair, unseen_tokens=args.unseen_tokens,
                          instructions=args.instructions, claude_code=args.claude_code, codex=args.codex)
    warn(args, report["warnings"])
    if args.json:
        return print_json(report)
    handles = len(report["handles"])
    over = report["tokens_after"] > report["window"]
    print(printable(f"{args.file} → {report['output']}: {report['tokens_before']:,} → {report['tokens_after']:,} "
          f"tokens, {'still over' if over else 'under'} a {report['window']:,}-token window ({report['window_source']}), "
          f"{report['messages_before']} → {report['messages_after']} messages; stages: "
          f"{', '.join(report['stages']) or 'none'}; {handles} handle{'' if handles == 1 else 's'} in "
          f"{report['store']}"))
    if report.get("resume"):
        print(printable(f"carry on in {'Codex' if args.codex else 'Claude Code'}: {report['resume']}"))
    if report["unseen_tokens"]:
        print(f"counted {report['unseen_tokens']:,} tokens per request for a system prompt and tools the file does "
              f"not show ({'inferred from its first recorded usage' if report['unseen_inferred'] else 'given'})")
    if handles:
        print(printable(f"recall any of them from anywhere: lossless recall HANDLE --store {report['store']}"))
    return 0


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # the output does not exist yet (or cannot be looked at: check_output says why)
        return False


def checked(
    messages: Sequence[Message], path: str | Path, dialect: Dialect, *, start: int = 0, fix: bool = False
) -> tuple[list[Message], list[str]]:
    """``messages`` (``start`` is the index of the first in the file) if the API would take
    them; with ``fix``, repaired and every change noted; else ``InvalidRequest`` naming the
    file, message index and tool id.  Nothing is repaired unless asked (``--repair``)."""
    if not messages:  # nothing --repair could add
        raise InputError(f"{path}: no messages after message {start - 1}: nothing to compact or replay" if start
                         else f"{path}: no messages: nothing to compact or replay")
    found = problems(messages, dialect)
    if not found:
        return list(messages), []
    if fix:
        fixed, notes = repair(messages, dialect)
        if not fixed:
            raise InputError(f"{path}: no message is left once repaired (each was empty or answered nothing): "
                             "nothing to compact or replay")
        return fixed, [f"{path}: repaired: {_shift(n, start)}" for n in notes]
    p = found[0]
    where = f"message {p.index + start}: " if p.index is not None else ""
    what = str(p).split(": ", 1)[-1] if p.index is not None else str(p)
    raise InvalidRequest(f"{path}: {where}{what} — fix the file, or pass --repair to have it repaired and reported",
                         index=None if p.index is None else p.index + start, tool_id=p.tool_id)


def check_output(output: Path, flag: str = "-o") -> None:
    """Refuse, before any work, an output that is not a regular file (the write replaces it)
    or whose folder cannot hold it; the error names ``output`` and ``flag``, never the
    temporary file the atomic write goes through."""
    try:
        mode = os.stat(output).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise InputError(f"{output}: is {kind}; pass {flag} a file path to write to")
    parent = output.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {output}: {parent} is not a directory; pass {flag} a file path")


def _encode(data: Any) -> bytes:
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate read from an escape in the input: written back as the same escape.
        return (json.dumps(data, indent=1) + "\n").encode("ascii")


def _shift(note: str, start: int) -> str:
    return re.sub(r"^message (\d+)", lambda m: f"message {int(m[1]) + start}", note) if start else note


def _too_big(state: Any, unseen: int, window: int) -> list[str]:
    """A warning when even the compacted conversation does not fit: what the file does not
    show (``unseen``) takes the room."""
    if state.tokens <= window:
        return []
    why = (f": the {unseen:,} tokens of system prompt and tools the file does not show leave no room; pass a "
           "larger --window (or --unseen-tokens 0 to leave them out)") if unseen else "; pass a larger --window"
    return [f"the compacted conversation is {state.tokens:,} tokens, over the {window:,}-token window{why}"]


def compact_file(
    path: str | Path,
    output: str | Path,
    *,
    window: int | None = None,
    max_output: int | None = None,
    store: str | Path | None = None,
    provider: Any = None,
    repair_input: bool = False,
    unseen_tokens: int | None = 0,
    instructions: str | None = None,
    claude_code: bool = False,
    codex: bool = False,
) -> dict[str, Any]:
    """Compact the live context of the session file ``path`` into ``output``.  An invalid
    history is an ``InvalidRequest`` naming the file unless ``repair_input``; the report's
    ``warnings`` say what the reader skipped and what was repaired.  ``window`` None is
    the session's model's (``sessions.session_window``).  ``unseen_tokens``
    (None: inferred, as ``replay`` and ``inspect`` infer it) is kept free in the window
    for what the file does not show; ``instructions`` compacts now, as a /compact does.
    ``claude_code`` writes a Claude Code session (``output`` None: a new one in the source's
    project folder) and reports the command that resumes it; ``codex`` a Codex CLI session
    (``output`` None: a new one under ``$CODEX_HOME/sessions``), from a Codex rollout."""
    from ..sessions import is_codex_rollout, open_session, session_window

    if output is not None:
        check_output(Path(output))
    session = open_session(path)
    notes: list[str] = []
    window, window_source = session_window(session, override=window, warn=notes.append)
    if claude_code and (session.dialect != "anthropic" or session.system):
        why = f"in the {session.dialect} dialect" if session.dialect != "anthropic" else "has a system prompt of its own"
        raise ConfigError(f"{path}: --claude-code writes a Claude Code session, which takes Anthropic messages "
                          f"without a system prompt; this session is {why}")
    if codex and not is_codex_rollout(path):
        raise ConfigError(f"{path}: --codex writes a Codex CLI session from a Codex CLI rollout "
                          "(~/.codex/sessions/…/rollout-*.jsonl), which this file is not")
    start = max((b.index for b in session.boundaries), default=0)
    dialect: Dialect = "openai" if session.dialect == "openai" else "anthropic"
    live, repaired = checked(session.messages[start:], path, dialect, start=start, fix=repair_input)
    opened = open_store(store)
    artifacts = opened.artifacts
    inferred = unseen_tokens is None
    if unseen_tokens is None:
        unseen_tokens = infer_unseen_tokens(session, default_counter())
    cm = ContextManager(
        config=ContextConfig(window=window, max_output=max_output),
        store=artifacts,
        transcript=False,
        dialect=dialect,
        provider=provider,
        session_notes=False,  # one shot: no later turn reads notes, and no notes file is left behind
        unseen_tokens=unseen_tokens,
    )
    tools = request_tools(path, session)
    overhead = unseen_tokens + cm.counter.count_system(session.system) + cm.counter.count_tools(tools)
    # Recorded usage includes what the file does not show: anchor to it only when that is
    # accounted for (inferred, or given), never under --unseen-tokens 0.
    anchor = live_anchor(session) if not repaired and (inferred or unseen_tokens) else None
    if anchor is not None:
        counted = overhead + sum(cm.counter.count_message(m) for m in live[: anchor[1]])
        if not plausible(anchor[0], counted, window // 20):
            notes.append(f"{path}: the usage recorded for the last request ({anchor[0]:,} tokens) is under half of "
                         f"lossless's count of it ({counted:,}); the figures are lossless's own")
            anchor = None
    if anchor is not None:
        # The file recorded what the provider counted for the live context's last request:
        # the budget is anchored to it, as a live session's is by observe(), so what is
        # written fits the real window and not only lossless's estimate of it.
        cm.calibrator.observe(anchor[0], live[: anchor[1]], overhead=overhead)
    before = cm.calibrator.explain(live, overhead).tokens
    if instructions is None:
        view = cm.prepare(live, system=session.system, tools=tools)
    else:
        view = cm.compact(live, system=session.system, tools=tools, instructions=instructions)
    out = view.neutral
    if cm.provider is not None:
        cm.provider.check_answered()  # before writing: not a fallback passed off as the model's summary
    found = problems(out, dialect)
    if found:  # prepare() guarantees this; checked again because a file is being written
        raise InvalidRequest(f"{path}: the compacted conversation is not valid: {found[0]}")
    resume = None
    if claude_code:
        output, payload, resume = _claude_code_session(path, session, out, output)
    elif codex:
        output, payload, resume = _codex_session(path, out, output, window)
    else:
        payload = _encode(_wire(session, out, dialect, tools))
    try:
        atomic_write(Path(output), payload)
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    handles = [h for e in view.events for h in (*e.handles, *e.items)]  # ranges and the items their accounts name
    return {
        "file": str(path),
        "output": str(output),
        "format": session.format,
        "dialect": dialect,
        "window": window,
        "window_source": window_source,
        "messages_before": len(live),
        "messages_after": len(out),
        "tokens_before": before,
        "tokens_after": view.state.tokens,
        "threshold": view.state.threshold,
        "stages": [e.stage for e in view.events if e.fired],
        "handles": handles,
        "summary_calls": cm.llm_calls,
        "summary_failures": cm.provider.failures if cm.provider is not None else 0,
        "store": str(Path(artifacts.root).resolve()) if opened.kind == "directory" else opened.spec,
        "unseen_tokens": unseen_tokens,
        "unseen_inferred": inferred,
        "calibrated": anchor is not None,
        "warnings": [*session.warnings, *notes, *repaired, *_too_big(view.state, unseen_tokens, window)],
        **({"resume": resume} if resume else {}),
    }


def _wire(session: Any, out: list[Message], dialect: Dialect, tools: list[Any] | None) -> Any:
    """The compacted conversation in the session's own API dialect, ready for JSON."""
    if session.format == "mini-swe-agent":  # what continues the run: its exit message is not sent to a model
        return [d for d in to_mini_swe(out, session.system) if d.get("role") != "exit"]
    if dialect == "openai":
        system = [Message(role="system", content=(Text(text=session.system),))] if session.system else []
        data: Any = to_openai(system + out)
        return {"messages": data, "tools": tools} if tools else data  # a request body comes out as one
    data = to_anthropic(out)
    if session.system or tools:
        data = {**({"system": session.system} if session.system else {}), "messages": data,
                **({"tools": tools} if tools else {})}
    return data


def _claude_code_session(path: str | Path, session: Any, messages: Sequence[Message],
                         output: str | Path | None) -> tuple[Path, bytes, str]:
    """Where the Claude Code session goes, its bytes, and the command that resumes it."""
    import shlex
    import uuid

    from ..dialects.claude_code import project_folder, session_context, to_claude_code
    from ..sessions import claude_projects

    context = session_context(path) if session.format == "claude-code" else {}
    cwd = context.get("cwd") or os.getcwd()
    new_id = str(uuid.uuid4())
    if output is None:
        source = Path(path).resolve()
        folder = source.parent if source.parent.parent == claude_projects().resolve() else \
            claude_projects() / project_folder(cwd)
        output = folder / f"{new_id}.jsonl"
    elif re.fullmatch(r"[0-9a-f-]{36}", Path(output).stem):
        new_id = Path(output).stem
    entries = to_claude_code(messages, session_id=new_id, cwd=cwd, version=context.get("version"),
                             git_branch=context.get("gitBranch"))
    text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
    resume = f"cd {shlex.quote(cwd)} && claude --resume {new_id}"
    if Path(output).name != f"{new_id}.jsonl" or Path(output).parent.parent.resolve() != claude_projects().resolve():
        resume = (f"{resume} (once it is {claude_projects() / project_folder(cwd) / (new_id + '.jsonl')}: Claude Code "
                  "finds a session by its file name in the project's folder)")
    return Path(output), text.encode("utf-8", "backslashreplace"), resume


_CODEX_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
"""How the user messages Codex writes itself begin: it sends them again when a session resumes."""


def _codex_items(path: str | Path, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` as the Responses items of a Codex history (each call and output the kind of item
    it was: ``dialects.codex`` keeps it), message content as parts, and without the context Codex
    sends again on resume."""
    from ..dialects.responses import problems_responses, to_responses

    out: list[dict[str, Any]] = []
    for item in to_responses(messages):
        if item.get("type") == "message":
            if item.get("role") == "user" and _codex_context(item):
                continue
            if isinstance(item.get("content"), str):  # Codex reads a message's parts only
                part = "output_text" if item.get("role") == "assistant" else "input_text"
                item = {**item, "content": [{"type": part, "text": item["content"]}]}
        out.append(item)
    found = problems_responses(out)
    if found:  # the messages were valid; what Codex gets must be too
        raise InvalidRequest(f"{path}: the compacted Codex history is not valid: {found[0]}")
    return out


def _codex_context(item: dict[str, Any]) -> bool:
    content = item.get("content")
    text = content if isinstance(content, str) else "".join(
        p.get("text", "") for p in content if isinstance(p, dict)) if isinstance(content, list) else ""
    return text.lstrip().startswith(_CODEX_CONTEXT)


def _codex_session(path: str | Path, messages: Sequence[Message], output: str | Path | None,
                   window: int) -> tuple[Path, bytes, str]:
    """Where the Codex session goes, its bytes, and the command that resumes it: the source's
    ``session_meta`` under a new id, then one ``compacted`` line holding the compacted history."""
    import shlex
    import uuid
    from datetime import datetime, timezone

    from ..dialects._json import iter_jsonl
    from ..dialects.codex import COPY_MARK
    from ..sessions import codex_sessions

    first: Any = None
    for _, first in iter_jsonl(Path(path), []):
        break  # the reader is dropped here, and its file closed
    if not isinstance(first, dict) or not isinstance(first.get("payload"), dict):
        raise InputError(f"{path}:1: a Codex rollout starts with its session_meta line")
    now = datetime.now(timezone.utc)
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    new_id = str(uuid.uuid4())
    named = re.fullmatch(r"rollout-.*-([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})", Path(output).stem) \
        if output is not None else None
    if named:
        new_id = named.group(1)
    if output is None:
        output = codex_sessions() / now.strftime("%Y/%m/%d") / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{new_id}.jsonl"
    meta = {**first, "timestamp": stamp,
            "payload": {**first["payload"], "id": new_id, "timestamp": stamp,
                        **({"session_id": new_id} if "session_id" in first["payload"] else {})}}
    note = (f"{COPY_MARK} the conversation of {Path(path).name} up to here, compacted to fit a {window:,}-token "
            "window; every handle it shows reads back in full with `lossless recall HANDLE`")
    compacted: dict[str, Any] = {"timestamp": stamp, **({"ordinal": 1} if "ordinal" in first else {}),
                                 "type": "compacted",
                                 "payload": {"message": note, "replacement_history": _codex_items(path, messages)}}
    text = json.dumps(meta, ensure_ascii=False) + "\n" + json.dumps(compacted, ensure_ascii=False) + "\n"
    cwd = first["payload"].get("cwd") if isinstance(first["payload"].get("cwd"), str) else os.getcwd()
    resume = f"cd {shlex.quote(cwd)} && codex resume {new_id}"
    home = codex_sessions().resolve()
    if home not in Path(output).resolve().parents or not Path(output).name.endswith(f"-{new_id}.jsonl"):
        resume = (f"{resume} (once it is under {home} as rollout-…-{new_id}.jsonl: Codex finds a session by the id "
                  "in its file name)")
    return Path(output), text.encode("utf-8", "backslashreplace"), resume
