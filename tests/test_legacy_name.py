"""The project was called recollect: a store folder or an environment variable under that
name is still read, with a one-line notice naming the new spelling, and markers it wrote
then are still recognised as markers."""

from __future__ import annotations

import subprocess
import sys

from lossless.markers import is_marker


def lossless(*argv: str, cwd, env) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lossless.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def _env(**extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOSSLESS_", "RECOLLECT_"))}
    env.update(extra)
    return env


def test_an_old_store_folder_is_used_with_a_notice(tmp_path):
    old = tmp_path / ".recollect"
    put = lossless("memory", "add", "--type", "user", "--name", "tabs", "--description", "indents with tabs", "--body", "The user indents with tabs.",
                   cwd=tmp_path, env=_env(RECOLLECT_HOME=str(old)))
    assert put.returncode == 0, put.stderr
    assert "RECOLLECT_HOME" in put.stderr and "LOSSLESS_HOME" in put.stderr
    assert len(put.stderr.strip().splitlines()) == 1
    listed = lossless("memory", "list", cwd=tmp_path, env=_env())
    assert listed.returncode == 0, listed.stderr
    assert "tabs" in listed.stdout
    notice = listed.stderr.strip().splitlines()
    assert len(notice) == 1 and ".recollect" in notice[0] and ".lossless" in notice[0]
    assert not (tmp_path / ".lossless").exists()


def test_the_new_folder_wins_once_it_exists(tmp_path):
    (tmp_path / ".recollect" / "memory").mkdir(parents=True)
    (tmp_path / ".lossless" / "memory").mkdir(parents=True)
    listed = lossless("memory", "list", cwd=tmp_path, env=_env())
    assert listed.returncode == 0, listed.stderr
    assert ".recollect" not in listed.stderr


def test_markers_written_under_the_old_name_are_markers():
    assert is_marker("[recollect: cleared an older Bash result (1,200 characters); handle=sha256:" + "0" * 24 + "]")
    assert is_marker('<recollect-summary handle="sha256:' + "0" * 24 + '">')
    assert not is_marker("recollect the past")
