"""``lossless memory …``: list, show, add, edit, rm, search, index, embed, consolidate, suggestions, undo, extract.

Wire it into a parent parser::

    sub = parser.add_subparsers(dest="command")
    memory_cli.register(sub)
    args = parser.parse_args(argv)
    return memory_cli.run(args)            # an exit code

``--json`` prints machine-readable output.  Every error is one line on stderr and
exit code 2, never a traceback.  ``--dir`` relocates the store (default
``$LOSSLESS_HOME/memory``).  ``--project``/``--agent`` open the store with a view
(``lossless.memory.scope``): every action then sees and writes only that view's
memories; without them an action sees every scope.  These store options go before
the action or after it (``memory list --project acme``).  Every change a command
makes is logged under a run that ``lossless memory undo RUN`` reverts (it prints it).  ``consolidate`` needs a model: the caller passes
``provider=`` to ``run`` (the main CLI builds it from its own options).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from .._legacy import getenv
from ..errors import LosslessError
from ..memory import suggestions
from ..memory.consolidate import Consolidator
from ..memory.harvest import CHUNK_CHARS
from ..memory.model import TYPES, Memory, parse_memory
from ..memory.retrieval import recall_memories
from ..memory.scope import SCOPE_HELP, parse_scope
from ..memory.store import MAX_FILE, MemoryStore
from ..storage.open import ENV_STORE, open_store
from ._common import counted, positive, silence_stdout
from .sessions import SESSION_HELP


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``memory`` command (and its sub-commands) to an argparse subparsers object."""
    p = subparsers.add_parser("memory", help="long-term memory: list, show, add, edit, rm, search, index, embed, "
                                             "consolidate, suggestions, undo, extract")
    _store_options(p, argparse.SUPPRESS)
    p.set_defaults(dir=None, store=None, project=None, agent=None)
    sub = p.add_subparsers(dest="memory_command", metavar="ACTION")
    sub.required = True

    def cmd(name: str, help: str, json_flag: bool = True) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help)
        if json_flag:
            c.add_argument("--json", action="store_true", help="machine-readable output")
        _store_options(c, argparse.SUPPRESS)  # after the action too: `memory list --project acme`
        return c

    c = cmd("list", "list memories (most recently updated first)")
    c.add_argument("--type", choices=TYPES, help="only memories of this type")
    c.add_argument("--scope", type=_scope_arg, help=f"only memories of this scope ({SCOPE_HELP}; '' = unscoped)")
    c.add_argument("--all", action="store_true", help="include superseded memories")
    c = cmd("show", "show one memory")
    c.add_argument("id", help="the memory's id (its file name without .md; see `lossless memory list`)")
    c = cmd("add", "add a memory from options or from a Markdown file with frontmatter")
    c.add_argument("file", nargs="?", help="a Markdown file with frontmatter (- for stdin)")
    c.add_argument("--name", help="a short title; the id is made from it")
    c.add_argument("--description", help="one line: what the memory is about (what MEMORY.md lists)")
    c.add_argument("--type", choices=TYPES, help="what kind of memory")
    c.add_argument("--body", help="the memory's text")
    c.add_argument("--scope", type=_scope_arg, help=f"{SCOPE_HELP} (default: by type, from --project)")
    c = cmd("edit", "change fields of a memory")
    c.add_argument("id", help="the memory's id")
    c.add_argument("--name", help="a new title (the id stays)")
    c.add_argument("--description", help="a new one-line description")
    c.add_argument("--type", choices=TYPES, help="a new type")
    c.add_argument("--body", help="a new text")
    c.add_argument("--scope", type=_scope_arg, help=f"{SCOPE_HELP}, or '' to make it unscoped")
    c = cmd("rm", "move a memory to the trash (undo with `lossless memory undo RUN`)")
    c.add_argument("id", help="the memory's id")
    c = cmd("search", "rank memories for a query (lexical; with the dense side when LOSSLESS_EMBED=1)")
    c.add_argument("query", nargs="+", help="the words to look for")
    c.add_argument("--limit", type=positive, default=5, metavar="N", help="at most N memories (default 5)")
    cmd("index", "rebuild MEMORY.md and print it")
    cmd("embed", "embed every memory that has no vector yet, with a progress bar (needs the embed extra)")
    c = cmd("consolidate", "merge duplicates, resolve contradictions, prune (logged and reversible)")
    c.add_argument("--dry-run", action="store_true", help="print the plan (each change and its diff), change nothing")
    c.add_argument("--undo", metavar="RUN", help="revert every change of a consolidation run")
    c.add_argument("--provider", choices=("anthropic", "openai", "fake"),
                   help="the model that consolidates (keys from ANTHROPIC_API_KEY / OPENAI_API_KEY)")
    c.add_argument("--model", help="the model's name (default: the provider's)")
    c.add_argument("--base-url", help="the provider's API address (a proxy, a local server)")
    c = cmd("suggestions", "what unattended consolidation proposed for user/feedback memories: accept or dismiss")
    act = c.add_mutually_exclusive_group()
    act.add_argument("--accept", metavar="ID", help="apply a suggestion (logged; undo with consolidate --undo)")
    act.add_argument("--dismiss", metavar="ID", help="drop a suggestion, leaving the memories as they are")
    c = cmd("undo", "revert every change of a run (add, edit, rm, extract, consolidate, accepted suggestion)")
    c.add_argument("run", metavar="RUN", help="the run a command printed (in .changes.jsonl as \"run\")")
    c = cmd("extract", "propose memories from a recorded session (deduplicated, secrets redacted) and write them")
    c.add_argument("file", metavar="SESSION", help=SESSION_HELP)
    c.add_argument("--dry-run", action="store_true", help="print the proposed memories and what each duplicates; "
                                                          "write nothing")
    c.add_argument("--provider", choices=("anthropic", "openai", "fake"),
                   help="the model that proposes (keys from ANTHROPIC_API_KEY / OPENAI_API_KEY; 'fake' is offline)")
    c.add_argument("--model", help="the model's name (default: the provider's)")
    c.add_argument("--base-url", help="the provider's API address (a proxy, a local server)")
    c.add_argument("--scope", type=_scope_arg, help=f"scope of every added memory ({SCOPE_HELP}; default: by type)")
    c.add_argument("--chunk-chars", type=positive, default=CHUNK_CHARS, metavar="N",
                   help=f"dialogue characters per request (default {CHUNK_CHARS:,}): a long session takes several")
    p.set_defaults(handler=run)
    return p


def _store_options(p: argparse.ArgumentParser, default: Any) -> None:
    """The options that choose the store and its view: on ``memory`` and on each action, so they
    may come before or after it (``default=SUPPRESS``: given on neither, the parent's None stays)."""
    p.add_argument("--dir", default=default,
                   help="memory directory (default: $LOSSLESS_HOME/memory, or memory/ in the nearest .lossless)")
    p.add_argument("--store", default=default, help="the store whose memories to use: a directory or "
                   "postgresql://… (default: $LOSSLESS_STORE; --dir names a memory directory instead)")
    p.add_argument("--project", default=default,
                   help="see only user, project:PROJECT and unscoped memories (with --agent: its too)")
    p.add_argument("--agent", default=default,
                   help="see only user, agent:AGENT and unscoped memories (with --project: its too)")


def _run_id(action: str) -> str:
    """A run for what one command changes, so that ``memory undo`` can revert it."""
    return time.strftime(f"{action}-%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"


def _scope_arg(value: str) -> str:
    try:
        return parse_scope(value) or ""
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _as_dict(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "name": m.name, "description": m.description, "type": m.type, "scope": m.scope,
            "created": m.created,
            "updated": m.updated, "extra": dict(m.extra), "body": m.body}


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str) if getattr(args, "json", False) else text)


def _warn(issues: Any) -> None:
    """A bad file is named on stderr and skipped: never fatal to listing or retrieval."""
    for issue in issues:
        print(f"lossless memory: warning: skipped {issue}", file=sys.stderr)


def _read_input(name: str) -> tuple[str, Path]:
    """The text of ``name`` (``-`` = stdin) and the path to name in errors; bounded by ``MAX_FILE``."""
    path = Path("<stdin>" if name == "-" else name)
    if name == "-":
        data = sys.stdin.read(MAX_FILE + 1).encode("utf-8", "surrogateescape")
    else:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise LosslessError(f"{path}: over the {MAX_FILE}-byte limit of a memory file: keep memories short")
    try:
        return data.decode("utf-8"), path
    except UnicodeDecodeError as exc:
        raise LosslessError(f"{path}:1: not UTF-8 text (byte {exc.start}): re-save it as UTF-8") from None


def run(args: argparse.Namespace, *, provider: Any = None) -> int:
    """Execute a parsed ``memory`` command. Returns the exit code (2 on any error)."""
    try:
        return _run(args, provider)
    except BrokenPipeError:
        silence_stdout()  # the reader (`| head`) has all it wanted
        return 0
    except (LosslessError, OSError, ValueError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, LosslessError) and exc.strerror:
            message = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
        else:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"lossless memory: error: {message}", file=sys.stderr)
        return 2


def _open(args: argparse.Namespace) -> MemoryStore:
    for flag, value in (("--dir", args.dir), ("--store", getattr(args, "store", None))):
        if value is not None and not str(value).strip():
            raise LosslessError(f"{flag} is empty: name a directory (. for this one)")
    if args.dir is None and (getattr(args, "store", None) or getenv(ENV_STORE)):
        return open_store(args.store).memory_view(project=args.project, agent=args.agent)
    if args.dir is not None and os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise LosslessError(f"{args.dir}: not a directory; --dir names the folder that holds the memories")
    return MemoryStore(args.dir, project=args.project, agent=args.agent)


def _run(args: argparse.Namespace, provider: Any) -> int:
    store = _open(args)
    action = args.memory_command
    if action == "list":
        scan = store.scan()
        ms = store.recent(None, include_superseded=args.all)
        ms = [m for m in ms if (not args.type or m.type == args.type)
              and (args.scope is None or (m.scope or "") == args.scope)]
        lines = [f"{m.id:32} {m.type:9} {m.scope or '-':16} {m.updated}  {m.description}"
                 + ("  [superseded]" if m.superseded else "") for m in ms]
        lines += [f"! {issue}" for issue in scan.issues]
        _warn(scan.issues)
        _out(args, {"memories": [{k: v for k, v in _as_dict(m).items() if k != "body"} for m in ms],
                    "issues": [str(i) for i in scan.issues]}, "\n".join(lines) or "(no memories)")
        return 0
    if action == "show":
        m = store.get(args.id)
        store.touch([m.id])
        _out(args, _as_dict(m), store.text_of(m.id).rstrip("\n"))
        return 0
    if action == "add":
        if args.file:
            text, path = _read_input(args.file)
            parsed = parse_memory(text, path, memory_id="memory")
            fields: dict[str, str] = {"name": parsed.name, "description": parsed.description,
                                      "type": parsed.type, "body": parsed.body, "scope": parsed.scope or ""}
            extra: Mapping[str, Any] | None = parsed.extra
            if parsed.name == "memory":
                raise LosslessError(f"{args.file}: frontmatter needs a 'name'")
            for k in ("name", "description", "type", "body", "scope"):
                if getattr(args, k):
                    fields[k] = getattr(args, k)
        else:
            missing = [k for k in ("name", "description", "type", "body") if not getattr(args, k)]
            if missing:
                raise LosslessError(f"add needs --{' --'.join(missing)} (or a Markdown file with frontmatter)")
            fields = {k: getattr(args, k) for k in ("name", "description", "type", "body")}
            fields["scope"] = args.scope or ""
            extra = None
        same = [d.id for d in store.memories() if not d.superseded
                and (d.description.strip(), d.body.strip()) == (fields["description"].strip(), fields["body"].strip())]
        run = _run_id("add")
        m = store.add(name=fields["name"], description=fields["description"], type=fields["type"],
                      body=fields["body"], extra=extra, scope=fields["scope"] or None, run=run)
        for d in same:
            print(f"lossless memory: warning: {m.id} has the same description and text as {d} "
                  f"(remove one: lossless memory rm {m.id})", file=sys.stderr)
        _out(args, {**_as_dict(m), "run": run, "duplicates": same},
             f"added {m.id} ({store.path_for(m.id)})\nundo with: lossless memory undo {run}")
        return 0
    if action == "edit":
        changes = {k: getattr(args, k) for k in ("name", "description", "type") if getattr(args, k)}
        if args.body is not None:  # an empty body is a body: the memory's text cleared
            changes["body"] = args.body
        if args.scope is not None:
            changes["scope"] = args.scope
        if not changes:
            raise LosslessError("edit needs at least one of --name, --description, --type, --body, --scope")
        run = _run_id("edit")
        m = store.update(args.id, run=run, **changes)
        _out(args, {**_as_dict(m), "run": run}, f"updated {m.id}\nundo with: lossless memory undo {run}")
        return 0
    if action == "rm":
        run = _run_id("rm")
        dest = store.delete(args.id, reason="cli", run=run)
        _out(args, {"id": args.id, "trash": str(dest), "run": run},
             f"moved {args.id} to {dest}\nundo with: lossless memory undo {run}")
        return 0
    if action == "search":
        query = " ".join(args.query)
        _warn(store.scan().issues)
        hits = recall_memories(query, store, limit=args.limit)
        _note_missing_vectors(store)
        _out(args, [{"id": h.memory.id, "score": round(h.score, 4), "description": h.memory.description}
                    for h in hits],
             "\n".join(f"{h.score:8.3f}  {h.memory.id:32} {h.memory.description}" for h in hits)
             or "(nothing relevant)")
        return 0
    if action == "index":
        _warn(store.scan().issues)
        text = store.rebuild_index()
        _out(args, {"path": str(store.dir / "MEMORY.md"), "text": text}, text.rstrip("\n") or "(empty index)")
        return 0
    if action == "embed":
        return _embed(args, store)
    if action == "consolidate":
        if args.undo:
            n = store.undo(args.undo)
            if not n:
                raise LosslessError(f"no changes logged for run {args.undo!r} (see .changes.jsonl)")
            _out(args, {"run": args.undo, "reverted": n}, f"reverted {counted(n, 'change')} of {args.undo}")
            return 0
        if provider is None and args.provider == "fake":
            from ..testing.fake_provider import FakeProvider

            # offline: the fake has no judgement, so it proposes no change (a dry check of the run)
            provider = FakeProvider(default='{"actions": []}')
        elif provider is None and args.provider:
            from ._providers import make_provider

            provider = make_provider(args.provider, args.model, args.base_url)
        if provider is None:
            raise LosslessError("consolidation needs a model: pass --provider anthropic|openai --model M")
        result = getattr(store, "consolidator_class", Consolidator)(store, provider).run(dry_run=args.dry_run)
        if result.status in ("failed", "locked"):
            raise LosslessError(f"consolidation {result.status}: {result.error or 'another process holds the lock'}")
        data = {"status": result.status, "run": result.run, "skipped": list(result.plan.skipped),
                "changes": [{"op": c.op, "id": c.id, "reason": c.reason} for c in result.plan.changes],
                "diff": result.plan.diff()}
        _out(args, data, _consolidation_text(result, args.dry_run))
        return 0
    if action == "suggestions":
        return _suggestions(args, store)
    if action == "undo":
        n = store.undo(args.run)
        if not n:
            raise LosslessError(f"no changes logged for run {args.run!r} (see .changes.jsonl)")
        _out(args, {"run": args.run, "reverted": n}, f"reverted {counted(n, 'change')} of {args.run}")
        return 0
    if action == "extract":
        return _extract(args, store, provider)
    raise LosslessError(f"unknown memory action {action!r}")


def _extract(args: argparse.Namespace, store: MemoryStore, provider: Any) -> int:
    from ..dialects.detect import read_any
    from ..memory.harvest import chunk_dialogue, extract_session
    from ..sessions import locate

    args.file = locate(args.file)  # a path, `latest`, or a session id (or its prefix), as `inspect` takes
    session = read_any(args.file)  # a bad file: one line naming it (and the message), exit 2
    chunks = len(chunk_dialogue(session.messages, args.chunk_chars))
    if provider is None and args.provider == "fake":
        from ..testing.fake_provider import FakeProvider
        from ..testing.structured import memory_operations

        provider = FakeProvider(script=[lambda r: memory_operations(r.messages[-1].text)] * chunks)
    elif provider is None and args.provider:
        from ._providers import make_provider

        provider = make_provider(args.provider, args.model, args.base_url)
    if provider is None:
        raise LosslessError("extract needs a model: pass --provider anthropic|openai --model M (or --provider fake)")
    run = None if args.dry_run else time.strftime("extract-%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    result = extract_session(store, provider, session.messages, dry_run=args.dry_run, max_chars=args.chunk_chars,
                             model=args.model, scope=args.scope or None, run=run)
    for w in session.warnings:  # after the run: a failure before it is exactly one line
        print(f"lossless memory: warning: {w}", file=sys.stderr)
    for e in (*result.errors, *result.write_errors):
        print(f"lossless memory: error: {e}", file=sys.stderr)
    lines = [f"{args.file}: {counted(len(session.messages), 'message')}, {counted(result.chunks, 'request')} of at "
             f"most {args.chunk_chars:,} dialogue characters"]
    lines += [p.line() for p in result.proposals]
    if args.dry_run:
        lines.append(f"dry run: nothing written ({sum(p.op != 'skip' for p in result.proposals)} proposed)")
    elif result.written:
        lines.append(f"wrote {counted(result.written, 'change')} as run {result.run}\n"
                     f"undo with: lossless memory undo {result.run}")
    else:
        lines.append("nothing written")
    data = {"file": str(args.file), "messages": len(session.messages), "requests": result.chunks,
            "dry_run": args.dry_run, "run": result.run if result.written else None, "written": result.written,
            "errors": [*result.errors, *result.write_errors],
            "proposals": [{"op": p.op, "id": p.id, "note": p.note,
                           "memory": _as_dict(p.memory) if p.memory is not None else None} for p in result.proposals]}
    _out(args, data, "\n".join(lines))
    return 1 if result.errors or result.write_errors else 0


def _consolidation_text(result: Any, dry_run: bool) -> str:
    """What a consolidation did or, in a dry run, would do: one line per change, then the diffs."""
    plan = result.plan
    if dry_run:
        head = [f"dry run: {counted(len(plan.changes), 'change')} planned, nothing written"]
    elif plan.changes:
        head = [f"{result.status}: {counted(len(plan.changes), 'change')} as run {result.run}"]
    else:
        head = [result.status]
    head += [f"  {c.op} {c.id}" + (f": {c.reason}" if c.reason else "") for c in plan.changes]
    diff = plan.diff().rstrip("\n")
    tail = [] if dry_run or not plan.changes else [f"undo with: lossless memory undo {result.run}"]
    return "\n".join([*head, *([diff] if diff else []), *tail])


def _embed(args: argparse.Namespace, store: MemoryStore) -> int:
    """Embed every memory without a vector, a batch at a time, with a progress bar on a terminal."""
    from ..memory import embed

    embed.model_dir()  # the extra missing: one line naming the install
    started = time.monotonic()
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            width = 30
            bar = "#" * (width * done // max(total, 1))
            print(f"\rembedding [{bar:<{width}}] {done:,}/{total:,} memories, {time.monotonic() - started:.0f} s",
                  end="", file=sys.stderr, flush=True)

    embed_all = getattr(store, "embed_all", None)  # the PostgreSQL store keeps its vectors in the database
    if embed_all is not None:
        n = embed_all(embed.shared_embedder(), progress)
    else:
        store.catalog.refresh()
        n = embed.vector_index(store.catalog, embed.shared_embedder()).fill(progress)
    if tty and n:
        print(file=sys.stderr)
    seconds = time.monotonic() - started
    _out(args, {"embedded": n, "seconds": round(seconds, 3)},
         f"embedded {counted(n, 'memory', 'memories')} in {seconds:.1f} s" if n else "every memory has its vector")
    return 0


def _note_missing_vectors(store: MemoryStore) -> None:
    """With the dense side on, say when memories are ranked without their vector (a query never
    embeds the store: ``lossless memory embed`` does)."""
    from ..memory import embed

    if not embed.enabled():
        return
    missing = getattr(store, "missing_vectors", None)  # the PostgreSQL store counts its own
    if missing is None and hasattr(store.catalog, "changes"):
        missing = embed.vector_index(store.catalog, embed.shared_embedder()).missing
    if missing:
        print(f"lossless memory: note: {counted(missing, 'memory', 'memories')} without a vector yet "
              "(ranked by words alone): run `lossless memory embed`", file=sys.stderr)


def _suggestions(args: argparse.Namespace, store: MemoryStore) -> int:
    if args.accept:
        run = suggestions.accept(store, args.accept)
        _out(args, {"accepted": args.accept, "run": run},
             f"accepted {args.accept}\nundo with: lossless memory consolidate --undo {run}")
        return 0
    if args.dismiss:
        suggestions.dismiss(store, args.dismiss)
        _out(args, {"dismissed": args.dismiss}, f"dismissed {args.dismiss}")
        return 0
    pending, skipped = suggestions.review(store)
    if skipped:
        print(f"lossless memory: warning: {store.dir / suggestions.FILE_NAME}: passed over "
              f"{skipped} line{'s' if skipped != 1 else ''} that {'are' if skipped != 1 else 'is'} not a suggestion",
              file=sys.stderr)
    lines = []
    for s in pending:
        lines.append(f"{s['sid']}  {s['op']} {', '.join(s['ids'])}" + (f": {s['reason']}" if s.get("reason") else ""))
        for c in s.get("changes", []):
            lines.extend("    " + d for d in difflib.unified_diff(
                (c.get("before") or "").splitlines(), (c.get("after") or "").splitlines(),
                f"a/{c['id']}.md", f"b/{c['id']}.md" if c.get("after") is not None else "/dev/null (to trash)",
                lineterm=""))
    if pending:
        lines.append("accept with: lossless memory suggestions --accept ID   (or --dismiss ID)")
    _out(args, pending, "\n".join(lines) or "(no pending suggestions)")
    return 0
