"""The input line on a real terminal (prompt_toolkit): multi-line editing, history kept
across sessions, and completion of the slash commands.

    read = editor(history=store / "chat-history", commands={"compact": "summarise now", ...})
    text = read("> ")           # KeyboardInterrupt on Ctrl-C, EOFError on Ctrl-D at an empty line

Keys: Enter sends; Alt-Enter (Esc then Enter) or a ``\\`` at the end of the line starts a
new line; ↑/↓ walk the history (within a multi-line text they move between its
lines first); Tab completes a slash command, and typing ``/`` lists them with what each
does.  Pasted text keeps its newlines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.styles import Style

STYLE = Style.from_dict({"prompt": "bold", "continuation": "ansibrightblack",
                         "completion-menu.completion": "", "completion-menu.meta.completion": "ansibrightblack"})


class SlashCompleter(Completer):
    """``/co`` → ``/compact``, ``/context``, ``/cost``, each with what it does; nothing for
    anything that is not the start of a command."""

    def __init__(self, commands: Mapping[str, str]) -> None:
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(c.isspace() for c in typed):
            return
        for name, what in self.commands.items():
            if name.startswith(typed[1:].lower()):
                yield Completion(f"/{name}", start_position=-len(typed), display_meta=what)


def _keys(completer: Completer) -> KeyBindings:
    keys = KeyBindings()

    # Ctrl-J sends too: a line typed ahead while an answer streams reaches the prompt with its Enter
    # turned into "\n" by the terminal (not yet in raw mode), and must still send, not start a new line.
    @keys.add("enter")
    @keys.add("c-j")
    def _send(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.apply_completion(state.current_completion)  # Enter on a listed command runs it
        elif buffer.document.text_before_cursor.endswith("\\") and buffer.document.is_cursor_at_the_end:
            buffer.delete_before_cursor()
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("tab")
    def _complete(event: KeyPressEvent) -> None:
        """One match: completed at once (not after the menu's background search); several: the next one."""
        buffer = event.current_buffer
        found = list(completer.get_completions(buffer.document, CompleteEvent(completion_requested=True)))
        if len(found) == 1:
            buffer.apply_completion(found[0])
        elif buffer.complete_state is not None:
            buffer.complete_next()
        elif found:
            buffer.start_completion(select_first=True)
        else:
            buffer.insert_text("    ")

    return keys


def editor(*, history: Path | None, commands: Mapping[str, str]) -> Callable[[str], str]:
    """A function reading one (possibly multi-line) input, its history in ``history`` when given."""
    if history is not None:
        history.parent.mkdir(parents=True, exist_ok=True)
    completer = SlashCompleter(commands)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)) if history is not None else InMemoryHistory(),
        completer=completer, complete_while_typing=True, multiline=True, reserve_space_for_menu=6,
        key_bindings=_keys(completer), style=STYLE, enable_open_in_editor=False,
        prompt_continuation=lambda width, line, wrapped: [("class:continuation", "… ".rjust(width))],
    )

    def read(prompt: str) -> str:
        return session.prompt([("class:prompt", prompt)])

    return read


def ask(question: str) -> str:
    """One line answered at a plain prompt_toolkit prompt (no history, no completion)."""
    session: PromptSession[Any] = PromptSession()
    return session.prompt(question)
