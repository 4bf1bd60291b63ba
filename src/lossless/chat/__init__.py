"""``lossless chat``: a terminal coding agent over a working directory, with its context kept
under the window by lossless and its state in view.

The pieces, each small enough to read at once:

* ``models``   — known window and output limits, and prices, per model family;
* ``tools``    — the tools the model can call (shell, read, write, edit, glob, grep), confined
  to the working directory, with confirmation for the shell and for writes;
* ``agent``    — the loop: prepare → the model → tools → results, Ctrl-C safe;
* ``app``      — the prompt loop around it, ``-p``, ``/clear`` and ``/resume``;
* ``commands`` — the slash commands (``/compact``, ``/context``, ``/memory``, ``/recall``,
  ``/cost``, ``/clear``, ``/resume``);
* ``status``   — the status line and the one-line notice per stage that fired;
* ``terminal`` — prompt, output and confirmation on a terminal (or a pipe);
* ``screen``   — on a terminal that can draw: Markdown, colour, the spinner and the streaming answer (rich);
* ``editor``   — on such a terminal: multi-line input, history, slash-command completion (prompt_toolkit);
* ``streaming`` — the agent's own request streamed to the screen, lossless's own calls not;
* ``demo``     — ``--provider demo``: a scripted model on a generated project, offline;
* ``resume``   — rebuilding a session's history from its transcript after a restart or a kill.
"""
