"""The interactive session around a ``Chat``: the prompt loop, slash commands, /clear and /resume.

    app = App(settings, provider, terminal)
    status = app.run()                # until /exit, Ctrl-D or two Ctrl-C (130)
    status = app.once("TASK")         # -p: one request, the answer printed, 0 if answered

A resumed session continues under a new session id whose transcript starts with the
rebuilt context (``chat.json`` names the session it came from): the earlier transcript
is never appended to twice, and stays whole for ``inspect`` and ``replay``.
"""

from __future__ import annotations

import signal
from typing import Any

from ..errors import ConfigError
from ..providers.base import Provider
from . import resume as resuming
from .agent import Chat, Settings
from .commands import run_command
from .status import plural, status_line
from .terminal import EXIT_INTERRUPTED, Terminal


class App:
    def __init__(self, settings: Settings, provider: Provider, terminal: Terminal, *,
                 resume_id: str | None = None) -> None:
        self.settings, self.provider, self.term = settings, provider, terminal
        self.chat: Chat = self._resumed(resume_id) if resume_id is not None else self._new()

    def run(self) -> int:
        s = self.settings
        # Ctrl-C is how a person stops an answer or a tool: make sure it raises, even when the chat
        # was started with SIGINT ignored (a background job of a script, nohup), which Python keeps.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        model = f" {s.model}" if s.model and s.model != s.provider else ""
        self.term.note(f"lossless chat · {s.provider}{model} · window {s.window:,} · {s.workdir}", "user")
        keys = "Alt-Enter or \\ Enter: a new line · " if self.term.fancy else ""
        self.term.note(f"/help for commands · {keys}Ctrl-C stops an answer · Ctrl-D leaves")
        try:
            while (line := self.term.prompt()) is not None:
                if line.startswith("/"):
                    try:
                        if not run_command(self, line):
                            break
                    except KeyboardInterrupt:
                        self.term.note(f"interrupted: {line.split()[0]} stopped; nothing changed", "warning")
                    continue
                self.chat.turn(line)
        finally:
            self.chat.close()
        return self.term.exit_status

    def once(self, task: str) -> int:
        try:
            answer = self.chat.turn(task)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            self.chat.close()
        if answer is None:
            return EXIT_INTERRUPTED if self.chat.interrupted else 1
        self.term.say(answer.strip())
        return 0

    # -- sessions ---------------------------------------------------------------
    def new_chat(self) -> None:
        self.chat.close()
        self.chat = self._new()

    def resume(self, session_id: str) -> None:
        chat = self._resumed(session_id)
        self.chat.close()
        self.chat = chat

    def _new(self, **kwargs: Any) -> Chat:
        return Chat(self.settings, self.provider, self.term, **kwargs)

    def _resumed(self, session_id: str) -> Chat:
        s = self.settings
        sid = session_id or resuming.latest_session(s.store, s.workdir)
        history, notes = resuming.rebuild(s.store, sid)
        if not history:
            raise ConfigError(f"session {sid} has no messages yet: nothing to resume (`/resume` lists the sessions)")
        for note in notes:
            self.term.note(f"resume: {note}")
        chat = self._new(history=history)
        resuming.write_info(s.store, chat.session_id, {"workdir": str(s.workdir), "provider": s.provider,
                                                       "model": s.model, "resumed_from": sid})
        self.term.note(f"resumed {sid} as {chat.session_id}: {plural(len(history), 'message')}")
        view = chat.cm.prepare(chat.history, chat.system_blocks, chat.tools)
        chat.history = list(view.neutral)
        chat.last_state = view.state
        self.term.note(f"[{status_line(view.state)}]", "status")
        return chat
