"""Record a scripted `lossless chat` session: ``docs/chat.txt`` (the screen text) and ``docs/chat.svg``.

    python docs/make_chat_recording.py            # run the session, rewrite both files
    python docs/make_chat_recording.py --check    # exit 1 when they no longer match a fresh run

The session is the seeds' "try it", through a real pseudo-terminal: the official Anthropic SDK
talks to lossless's fake server, where a scripted model globs ``**/*.py`` and reads one file
per call (smallest first) until the context has been compacted, then the user looks at
``/context``, compacts with an instruction, has the model recall a moved file and asks
``/cost``.  The working directory is a small generated project (so the recording changes
when lossless's behaviour does, not when its own sources do); the temporary paths and the
session id are normalised.  ``tests/test_chat_pty.py`` checks the committed recording against
a fresh run.  Needs the dev extra (pexpect, anthropic).
"""

from __future__ import annotations

import re
import sys
import tempfile
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

WINDOW = 16_000
INPUTS = (
    "Read every Python file in this directory, one by one.",
    "/context",
    "/compact keep the list of files read",
    "recall the first file you read",
    "/cost",
    "/exit",
)


def make_project(root: Path) -> Path:
    """A small deterministic project: 32 modules of growing size, real Python."""
    work = root / "project"
    pkg = work / "inventory"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Inventory: stock levels, orders and reports."""\n')
    for i in range(1, 32):
        lines = [f'"""Module {i}: helpers for part family {i}."""', "", "from __future__ import annotations", ""]
        for j in range(2 + i // 2):
            lines += [
                "",
                f"def family_{i}_step_{j}(stock: dict[str, int], order: list[str]) -> dict[str, int]:",
                f'    """Apply step {j} of family {i}: take each ordered part out of stock, never below zero."""',
                "    left = dict(stock)",
                "    for part in order:",
                f"        left[part] = max(0, left.get(part, 0) - {j + 1})",
                "    return left",
            ]
        (pkg / f"family_{i:02d}.py").write_text("\n".join(lines) + "\n")
    return work


def record() -> str:
    """Run the session; its screen text, normalised."""
    import pexpect
    from chat_kit import SeedsModel, chat_command

    from lossless.testing import FakeServer, Faults

    with tempfile.TemporaryDirectory(prefix="chat-recording-") as tmp:
        work = make_project(Path(tmp))
        screen: list[str] = []
        with FakeServer(Faults(max_prompt_tokens=WINDOW), responder=SeedsModel(work, after=2)) as server:
            exe, argv, env = chat_command(server.base_url, str(work), "--window", str(WINDOW))
            child = pexpect.spawn(exe, argv, env=env, encoding="utf-8", timeout=60, dimensions=(50, 200))

            class Sink:
                def write(self, s: str) -> None:
                    screen.append(s)

                def flush(self) -> None:
                    pass

            child.logfile_read = Sink()
            for line in INPUTS:
                child.expect("> ")
                child.sendline(line)
            child.expect(pexpect.EOF)
            child.close()
        text = "".join(screen).replace("\r\n", "\n").replace(str(work), "~/project")
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<session>", text)
    return "$ lossless chat --window 16000 ~/project\n" + text


def svg(text: str) -> str:
    lines = text.splitlines()
    width = max(len(line) for line in lines) * 7.8 + 32
    height = len(lines) * 17 + 28
    rows = "\n".join(f'<text x="16" y="{24 + 17 * i}" xml:space="preserve">{escape(line)}</text>'
                     for i, line in enumerate(lines))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
            f'viewBox="0 0 {width:.0f} {height}">\n'
            f'<rect width="100%" height="100%" rx="6" fill="#1e1e2e"/>\n'
            f'<g font-family="ui-monospace, Menlo, Consolas, monospace" font-size="13" fill="#e0e0e0">\n'
            f"{rows}\n</g>\n</svg>\n")


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
