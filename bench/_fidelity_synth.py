"""A deterministic generator of long agent sessions with planted facts.

    session = generate(seed=1)          # {"system", "messages", "facts"}

``messages`` are Anthropic-style dicts (text / tool_use / tool_result blocks): an
agent working on a service over 300+ rounds of Read, Bash, Grep, Edit, WebFetch
and Glob calls with realistic outputs (source files, test logs, git output,
search hits, documentation), a user message every dozen rounds or so and short
assistant conclusions.  About 350,000 tokens at the default size.

``facts`` are unique strings planted verbatim — error lines, log lines, numbers,
paths — in tool results, at a uniformly random line of the output (so as often at its
head or in its middle as at its tail: an account that quotes a result's last line keeps no
more of them than their share), in a call's input, in user messages and in the
assistant's conclusions: ``{"text", "kind", "message"}`` with the index of the message that
carries it.  ``kind`` is ``<where>:<what>``; for a result ``where`` is ``head``, ``middle``
or ``tail`` (the third of the output's lines the fact landed in).  The same seed always
gives the same session.
"""

from __future__ import annotations

import random
from typing import Any

WORDS = ("cache", "shard", "ingest", "replica", "ledger", "token", "bucket", "quota", "window", "batch",
         "retry", "lease", "cursor", "offset", "digest", "vector", "frame", "socket", "buffer", "schema",
         "router", "policy", "gauge", "span", "queue", "worker", "commit", "snapshot", "index", "payload")
MODULES = ("ingest", "billing", "sync", "auth", "storage", "scheduler", "api", "metrics", "export", "search")
ERRORS = ("AssertionError", "KeyError", "ValueError", "TimeoutError", "ConnectionResetError", "TypeError",
          "IntegrityError", "PermissionError")


class _Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.seed = seed
        self.n = 0
        self.messages: list[dict[str, Any]] = []
        self.facts: list[dict[str, Any]] = []
        self.files = [f"src/{mod}/{self.r.choice(WORDS)}_{self.r.choice(WORDS)}.py"
                      for mod in MODULES for _ in range(4)]

    # -- vocabulary ------------------------------------------------------------
    def word(self) -> str:
        return self.r.choice(WORDS)

    def ident(self) -> str:
        return f"{self.word()}_{self.word()}"

    def uid(self) -> str:
        return f"{self.seed:x}{self.r.getrandbits(40):010x}"

    def fact(self, kind: str) -> str:
        """A fresh, unique fact line of the given kind."""
        u, k = self.uid(), len(self.facts)
        n1, n2 = self.r.randint(1000, 99999), self.r.randint(2, 999)
        return {
            "error": f"E   {self.r.choice(ERRORS)}: {self.ident()} mismatch for shard-{u}: expected {n1} got {n1 + n2}",
            "log": f"2026-03-{1 + k % 28:02d}T{k % 24:02d}:{n2 % 60:02d}:17Z WARN replica-{u} lag {n1}ms exceeds budget",
            "number": f"peak resident memory for job {u} was {n1} MiB over {n2} batches",
            "path": f"/srv/app/vendor/{self.word()}-{u}/{self.ident()}.py",
            "user": f"keep the {self.ident()} limit at {n1} for tenant {u}, the auditors rely on it",
            "conclusion": f"the root cause is {self.ident()} reusing cursor {u} after {n2} retries",
        }[kind]

    def plant(self, kind: str, where: str) -> str:
        text = self.fact(kind)
        self.facts.append({"text": text, "kind": f"{where}:{kind}", "message": len(self.messages)})
        return text

    def place(self, lines: list[str], kind: str) -> list[str]:
        """``lines`` with a fresh fact of ``kind`` inserted at a uniformly random line."""
        text = self.fact(kind)
        at = self.r.randint(0, len(lines))
        n = len(lines) + 1
        where = ("head", "middle", "tail")[min(2, 3 * at // n)]
        self.facts.append({"text": text, "kind": f"{where}:{kind}", "message": len(self.messages)})
        return lines[:at] + [text] + lines[at:]

    # -- tool outputs ------------------------------------------------------------
    def source(self, path: str, lines: int) -> str:
        out = [f'"""{path}: {self.word()} {self.word()} handling."""', "", "from __future__ import annotations", ""]
        while len(out) < lines:
            name = self.ident()
            out += [f"def {name}({self.word()}: int, {self.word()}: str | None = None) -> dict:",
                    f'    """Return the {self.word()} for a {self.word()}."""']
            for _ in range(self.r.randint(3, 9)):
                out.append(f"    {self.word()} = {self.ident()}({self.word()}, limit={self.r.randint(1, 500)})")
            out += [f"    return {{'{self.word()}': {self.word()}}}", ""]
        return "\n".join(f"{i + 1:>6}\t{line}" for i, line in enumerate(out[:lines]))

    def pytest(self, failed: bool, plant: bool) -> str:
        mod = self.r.choice(MODULES)
        n = self.r.randint(40, 400)
        lines = ["============================= test session starts ==============================",
                 "platform linux -- Python 3.12.4, pytest-8.3.2, pluggy-1.5.0", f"collected {n} items", ""]
        for f in self.r.sample(self.files, 6):
            lines.append(f"tests/test_{f.split('/')[-1]} " + "".join(self.r.choice("....F") if failed else "."
                                                                          for _ in range(self.r.randint(8, 40))))
        if failed:
            lines += ["", "=================================== FAILURES ===================================",
                      f"____________________ test_{self.ident()} ____________________", ""]
            for _ in range(self.r.randint(6, 20)):
                lines.append(f"    {self.word()} = {self.ident()}({self.r.randint(0, 99)})")
            lines.append(f"E   {self.r.choice(ERRORS)}: {self.ident()}")
            lines += [f"src/{mod}/{self.ident()}.py:{self.r.randint(10, 400)}: {self.r.choice(ERRORS)}", ""]
        k = self.r.randint(1, 4)
        lines.append(f"=========== {k} failed, {n - k} passed in {self.r.random() * 9:.2f}s ===========" if failed
                     else f"=========== {n} passed in {self.r.random() * 9:.2f}s ===========")
        return "\n".join(self.place(lines, "error") if plant else lines)

    def logs(self, count: int, plant: bool) -> str:
        lines = [f"2026-03-{self.r.randint(1, 28):02d}T{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:"
                 f"{self.r.randint(0, 59):02d}Z INFO {self.word()}-{self.r.randint(1, 9)} {self.word()} "
                 f"{self.word()} ok in {self.r.randint(1, 900)}ms" for _ in range(count)]
        return "\n".join(self.place(lines, "log") if plant else lines)

    def grep(self, pattern: str) -> str:
        return "\n".join(f"{self.r.choice(self.files)}:{self.r.randint(1, 600)}:    {pattern}({self.word()}, "
                         f"{self.word()}={self.r.randint(0, 99)})" for _ in range(self.r.randint(5, 40)))

    def prose(self, paragraphs: int) -> str:
        out = []
        for _ in range(paragraphs):
            out.append(" ".join(f"The {self.word()} {self.r.choice(('controls', 'limits', 'tracks', 'sets'))} "
                                f"the {self.word()} of each {self.word()}." for _ in range(self.r.randint(4, 9))))
        return "\n\n".join(out)

    # -- a round -----------------------------------------------------------------
    def call(self, round_no: int) -> tuple[dict[str, Any], str, bool]:
        """A tool_use and its result (text, is_error); may plant facts in the result."""
        tid = f"toolu_{self.seed:02d}{round_no:04d}{self.r.getrandbits(24):06x}"
        plant = self.r.random() < 0.25
        kind = self.r.choices(("Read", "Bash", "Grep", "Edit", "WebFetch", "Glob"), (30, 34, 12, 12, 6, 6))[0]
        if kind == "Read":
            in_input = plant and self.r.random() < 0.3
            path = self.plant("path", "input") if in_input else self.r.choice(self.files)
            lines = self.source(path, self.r.randint(30, 150)).split("\n")
            if plant and not in_input:  # a path quoted somewhere in the file
                lines = self.place(lines, "path")
            return {"id": tid, "name": "Read", "input": {"file_path": path}}, "\n".join(lines), False
        if kind == "Bash":
            roll = self.r.random()
            if roll < 0.5:
                failed = self.r.random() < 0.4
                cmd = f"python -m pytest tests/{self.r.choice(MODULES)} -x -q --timeout={self.r.randint(10, 120)}"
                body = self.pytest(failed, plant)
                if failed:
                    return {"id": tid, "name": "Bash", "input": {"command": cmd}}, f"Exit code 1\n{body}", True
                return {"id": tid, "name": "Bash", "input": {"command": cmd}}, body, False
            size = 4_000 if self.r.random() < 0.02 else self.r.randint(10, 80)  # now and then a huge log
            cmd = f"journalctl -u {self.word()}-worker --since '-{self.r.randint(1, 48)}h' | tail -n {size}"
            return {"id": tid, "name": "Bash", "input": {"command": cmd}}, self.logs(size, plant), False
        if kind == "Grep":
            pattern = self.ident()
            lines = self.grep(pattern).split("\n")
            body = "\n".join(self.place(lines, "number") if plant else lines)
            return {"id": tid, "name": "Grep", "input": {"pattern": pattern, "path": "src"}}, body, False
        if kind == "Edit":
            path = self.r.choice(self.files)
            old, new = self.ident(), self.ident()
            body = (f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:\n"
                    + self.source(path, self.r.randint(6, 14)))
            return {"id": tid, "name": "Edit", "input": {"file_path": path, "old_string": old, "new_string": new}}, \
                body, False
        if kind == "WebFetch":
            url = f"https://docs.example.org/{self.word()}/{self.ident()}.html"
            lines = self.prose(self.r.randint(4, 14)).split("\n")
            body = "\n".join(self.place(lines, "number") if plant else lines)
            return {"id": tid, "name": "WebFetch", "input": {"url": url, "prompt": "summarise the limits"}}, body, False
        pattern = f"src/{self.r.choice(MODULES)}/**/*.py"
        return {"id": tid, "name": "Glob", "input": {"pattern": pattern}}, "\n".join(self.r.sample(self.files, 8)), False

    def run(self, rounds: int) -> dict[str, Any]:
        self.messages.append({"role": "user", "content": [{"type": "text", "text":
                              f"The {self.word()} service drops {self.word()} events under load. Find out why and "
                              f"fix it; {self.plant('user', 'user')}."}]})
        for k in range(rounds):
            blocks: list[dict[str, Any]] = []
            if k % 9 == 4:
                blocks.append({"type": "text", "text": f"So far: {self.plant('conclusion', 'assistant')}."})
            elif self.r.random() < 0.5:
                blocks.append({"type": "text", "text": f"Let me check the {self.word()} {self.word()} next."})
            planted = len(self.facts)
            calls = [self.call(k) for _ in range(1 if self.r.random() < 0.8 else 2)]
            blocks += [{"type": "tool_use", **use} for use, _, _ in calls]
            self.messages.append({"role": "assistant", "content": blocks})
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use["id"], "content": body, "is_error": err}
                for use, body, err in calls]})
            for f in self.facts[planted:]:  # a fact enters with the message that carries it
                f["message"] = len(self.messages) - (2 if f["kind"].startswith("input") else 1)
            if k % 13 == 12:
                self.messages.append({"role": "assistant", "content": [{"type": "text", "text":
                                      f"Checkpoint: the {self.word()} path looks fine; next the {self.word()}."}]})
                self.messages.append({"role": "user", "content": [{"type": "text", "text":
                                      f"Also, {self.plant('user', 'user')}."}]})
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done: the fix is in."}]})
        return {"system": "You are a careful coding agent.", "messages": self.messages, "facts": self.facts}


def generate(seed: int = 1, rounds: int = 320) -> dict[str, Any]:
    """One synthetic session (see the module docstring); deterministic in ``seed``."""
    return _Gen(seed).run(rounds)
