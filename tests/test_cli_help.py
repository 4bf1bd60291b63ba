"""Every option of every command says what it does, and a mistyped command gets the
nearest one (issue 19, point 7)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from lossless.cli import COMMANDS, build_parser, main

PENDING: dict[str, set[str]] = {}
"""Options known to lack help, by command, while their owner writes it; empty when none do."""


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command path, option, help)`` of every argument under ``parser``, sub-commands included;
    a sub-command's own line in its parent's listing counts as an argument of the parent."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield " ".join(path) or "lossless", name, lines.get(name)
                yield from walk(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), (action.option_strings or [action.dest])[-1], action.help


def test_every_option_of_every_command_has_help():
    missing: dict[str, set[str]] = {}
    for command, option, text in walk(build_parser()):
        if not text:  # argparse.SUPPRESS (a deliberately hidden option) is a text, and passes
            missing.setdefault(command, set()).add(option)
    assert missing == PENDING, f"options without help: {missing}"
    commands = {c.split()[0] for c, _, _ in walk(build_parser()) if c != "lossless"}
    assert commands == set(COMMANDS)  # every command was walked


def test_the_walk_finds_an_option_without_help():
    parser = argparse.ArgumentParser(prog="x")
    sub = parser.add_subparsers().add_parser("cmd", help="a command")
    sub.add_argument("--quiet", action="store_true")
    assert [(c, o) for c, o, t in walk(parser) if not t] == [("cmd", "--quiet")]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_with_two_letters_swapped_is_suggested(command, capsys):
    typo = command[0] + command[2] + command[1] + command[3:]
    assert main([typo, "--help"]) == 2
    assert capsys.readouterr().err == f"lossless: error: unknown command {typo!r}; did you mean {command!r}?\n"


def test_a_word_near_no_command_points_to_the_list(capsys):
    assert main(["xyzzy"]) == 2
    assert capsys.readouterr().err == "lossless: error: unknown command 'xyzzy'; lossless --help lists them\n"


def test_the_installed_command_suggests_in_one_line():
    lossless = Path(sys.executable).with_name("lossless")
    argv = [str(lossless)] if lossless.exists() else [sys.executable, "-m", "lossless.cli"]
    run = subprocess.run([*argv, "replya", "session.jsonl"], capture_output=True, text=True, timeout=30)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == "lossless: error: unknown command 'replya'; did you mean 'replay'?\n"


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every command path under ``parser`` (``("memory", "list")``…)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name)
                yield from _commands(sub, (*path, name))


@pytest.mark.parametrize("path", sorted(set(_commands(build_parser()))), ids=" ".join)
def test_an_unknown_option_is_named_by_the_command_it_was_given_to(path, capsys):
    """Before: ``lossless proxy --bogus`` printed lossless's own usage, not the proxy's."""
    argv = [*path, "--no-such-option"]
    if path[0] == "wrap":
        argv = ["wrap", "--no-such-option", "--", "true"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2
    assert err[-1].startswith(f"lossless {' '.join(path)}: error: "), err[-1]
    assert "--no-such-option" in err[-1] or "required" in err[-1]
