"""``lossless`` imports only the command it runs (issue 21, point 6): ``lossless --help``
lists every command without importing one, and each command's own help is complete.
The time it takes is measured in bench/startup.py, never here."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from lossless.cli import COMMANDS, SUMMARIES, build_parser, main

LISTING = """
import sys
from lossless.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith("lossless")), file=sys.stderr)
"""


def loaded(*argv: str) -> tuple[str, set[str]]:
    """What ``lossless ARGV`` prints, and the lossless modules it imported (a fresh process)."""
    run = subprocess.run([sys.executable, "-c", LISTING, *argv], capture_output=True, text=True, check=True)
    return run.stdout, set(ast.literal_eval(run.stderr.splitlines()[-1]))


def test_help_lists_every_command_and_imports_none_of_them():
    out, modules = loaded("--help")
    assert modules == {"lossless", "lossless.cli", "lossless.cli._common", "lossless.errors"}
    listed = [line.split()[0] for line in out.split("COMMAND\n", 1)[1].splitlines() if line.startswith("    ")
              and not line.startswith("      ")]
    assert listed == list(COMMANDS)


def test_a_command_imports_its_own_module_and_no_other():
    _, modules = loaded("recall", "--help")
    commands = {m.rsplit(".", 1)[1] for m in modules if m.startswith("lossless.cli.") and m != "lossless.cli._common"}
    assert commands == {"recall"}


def test_the_listing_is_what_each_command_says_of_itself():
    """``SUMMARIES`` stands in for the modules in ``--help``: the page is the same either way."""
    assert set(SUMMARIES) <= set(COMMANDS)
    assert build_parser(()).format_help() == build_parser().format_help()


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_is_complete(command, capsys):
    full = next(a for a in build_parser()._actions if a.choices and command in a.choices).choices[command]
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == full.format_help()
    assert any(a.option_strings == ["-h", "--help"] for a in full._actions)
