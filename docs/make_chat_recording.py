"""Record `lossless chat --provider demo`: ``docs/chat.txt`` (the screen text) and ``docs/chat.svg``.

    python docs/make_chat_recording.py            # run the demo, rewrite both files
    python docs/make_chat_recording.py --check    # exit 1 when they no longer match a fresh run

The session is the demo every user can run (``lossless.chat.demo``), through a real
pseudo-terminal: a scripted model lists and reads the files of a small generated project into a
16,000-token window until lossless compacts it, answers in Markdown, recalls a file it read
that left the context through its handle, and the user looks at ``/context``, compacts with an
instruction and asks ``/cost``.  It runs on a dumb terminal, so the text is what a pipe would get, and at full
speed; the SVG colours each kind of line as a colour terminal does.  The temporary path is
normalised, so the recording changes when lossless's behaviour does.
``tests/test_chat_pty.py`` checks the committed recording against a fresh run.  Needs pexpect.
"""

from __future__ import annotations

import os
import re
import sys
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent

COLOURS = (
    (re.compile(r"^> "), "#ffffff", "bold"),
    (re.compile(r"^\[context .* · ok\]$"), "#7f849c", ""),
    (re.compile(r"^\[context "), "#f9e2af", ""),
    (re.compile(r"^● "), "#89dceb", "bold"),
    (re.compile(r"^  └ "), "#7f849c", ""),
    (re.compile(r"^  ↳ "), "#f5c2e7", ""),
    (re.compile(r"^(demo|lossless chat|/help) "), "#cba6f7", ""),
)
"""Line kinds and their colours, as ``lossless.chat.screen``'s theme draws them (others: plain)."""


def record() -> str:
    """Run the demo; its screen text, normalised."""
    import pexpect

    env = {**os.environ, "TERM": "dumb", "NO_COLOR": "1", "COLUMNS": "200", "LOSSLESS_DEMO_PACE": "0",
           "PYTHONUNBUFFERED": "1"}
    child = pexpect.spawn(sys.executable, ["-m", "lossless.cli", "chat", "--provider", "demo"], env=env,
                          encoding="utf-8", timeout=120, dimensions=(50, 200))
    screen: list[str] = []

    class Sink:
        def write(self, s: str) -> None:
            screen.append(s)

        def flush(self) -> None:
            pass

    child.logfile_read = Sink()
    child.expect(pexpect.EOF)
    child.close()
    if child.exitstatus != 0:
        raise SystemExit(f"the demo exited with {child.exitstatus}:\n{''.join(screen)[-2000:]}")
    text = "".join(screen).replace("\r\n", "\n")
    text = re.sub(r"/\S*/lossless-demo-[^/\s]+/project", "~/project", text)
    return "$ lossless chat --provider demo\n" + text


def svg(text: str) -> str:
    lines = text.splitlines()
    width = max(len(line) for line in lines) * 7.8 + 32
    height = len(lines) * 17 + 28
    rows = []
    for i, line in enumerate(lines):
        colour, weight = next(((c, w) for pattern, c, w in COLOURS if pattern.search(line)), ("#e0e0e0", ""))
        bold = ' font-weight="bold"' if weight else ""
        rows.append(f'<text x="16" y="{24 + 17 * i}" fill="{colour}"{bold} xml:space="preserve">{escape(line)}</text>')
    body = "\n".join(rows)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
            f'viewBox="0 0 {width:.0f} {height}">\n'
            f'<rect width="100%" height="100%" rx="6" fill="#1e1e2e"/>\n'
            f'<g font-family="ui-monospace, Menlo, Consolas, monospace" font-size="13">\n'
            f"{body}\n</g>\n</svg>\n")


def main(argv: list[str]) -> int:
    text = record()
    txt, pic = HERE / "chat.txt", HERE / "chat.svg"
    if "--check" in argv:
        same = txt.exists() and txt.read_text() == text and pic.exists() and pic.read_text() == svg(text)
        print("docs/chat.txt and docs/chat.svg match a fresh run" if same else
              "docs/chat.txt or docs/chat.svg is out of date: run python docs/make_chat_recording.py")
        return 0 if same else 1
    txt.write_text(text)
    pic.write_text(svg(text))
    print(f"wrote {txt} and {pic} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
