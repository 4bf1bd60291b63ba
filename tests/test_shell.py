"""shell_files: which files a command reads and modifies — heredoc bodies are data, sed -i edits."""

from __future__ import annotations

import keyword
import re
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import data_path
from lossless.dialects.mini_swe import read_trajectory
from lossless.account.shell import command_line, shell_files

# Real commands from the mini-swe-agent runs: (instance, tool id, reads, writes), each checked by eye.
REAL = [
    ("astropy__astropy-13398", "mswe-1", ["astropy/coordinates/builtin_frames/intermediate_rotation_transforms.py"], []),
    ("astropy__astropy-13398", "mswe-4", [], []),  # grep: a search, not a read
    ("astropy__astropy-13398", "mswe-5", ["astropy/coordinates/tests/test_intermediate_transformations.py"], []),
    ("astropy__astropy-13398", "mswe-6", [], ["reproduce_issue.py"]),  # cat <<'EOF' > f, a Python body
    ("astropy__astropy-13398", "mswe-7", [], []),
    ("astropy__astropy-13398", "mswe-14", [],
     ["astropy/coordinates/builtin_frames/itrs_observed_transforms.py", "astropy/coordinates/builtin_frames/__init__.py"]),
    ("astropy__astropy-13398", "mswe-34", [], ["reproduce_issue.py", "test_transforms.py"]),
    ("astropy__astropy-13398", "mswe-35", [], []),  # the submit command
    ("django__django-11087", "mswe-1", ["django/db/models/deletion.py"], []),
    ("django__django-11087", "mswe-30", ["django/db/models/deletion.py"], []),
    ("django__django-11138", "mswe-27", [], ["django/db/backends/sqlite3/base.py"]),
    ("django__django-11138", "mswe-28", [], ["django/db/backends/sqlite3/base.py"]),  # two sed -i lines
    ("django__django-11138", "mswe-35", ["django/db/backends/utils.py"], []),
    ("django__django-11138", "mswe-41", ["django/db/backends/sqlite3/base.py"], []),  # comment line first
    ("django__django-11138", "mswe-42", [], ["django/db/backends/sqlite3/base.py"]),
    ("django__django-11138", "mswe-65", [], ["django/db/backends/sqlite3/base.py"]),  # \-continued && chain
    ("django__django-14349", "mswe-20", [], ["patch.py"]),  # printf "...open('x', 'w')..." > patch.py
    ("django__django-14349", "mswe-36", [], ["reproduce_issue.py"]),
    ("django__django-14349", "mswe-46", [], ["fix.py"]),
    ("django__django-14349", "mswe-68", ["django/core/validators.py"], []),
    ("django__django-15554", "mswe-60", [], []),  # export PYTHONPATH=$PYTHONPATH:.
    ("django__django-15563", "mswe-3", [], ["reproduce_app/__init__.py"]),
    ("django__django-15563", "mswe-31", [], ["django/db/models/sql/subqueries.py.new", "django/db/models/sql/subqueries.py"]),
    ("django__django-15563", "mswe-38", ["django/db/models/sql/compiler.py", "django/db/models/sql/compiler.py.part"],
     ["django/db/models/sql/compiler.py.new", "django/db/models/sql/compiler.py"]),
    ("pytest-dev__pytest-6197", "mswe-29", [], ["src/_pytest/main.py"]),  # ed f <<EOF ... w
    ("pytest-dev__pytest-6197", "mswe-74", ["src/_pytest/main.py"], ["src/_pytest/main.py"]),  # python3 -c open(.., "w")
    ("sphinx-doc__sphinx-8459", "mswe-19", ["sphinx/util/inspect.py"], []),
    ("sphinx-doc__sphinx-8548", "mswe-2", [], ["example.py", "reproduction/", "conf.py", "index.rst"]),
    ("sphinx-doc__sphinx-8548", "mswe-41", ["sphinx/ext/autodoc/__init__.py"],
     ["sphinx/ext/autodoc/__init__.py.new", "sphinx/ext/autodoc/__init__.py"]),
    ("sphinx-doc__sphinx-8548", "mswe-77", [], ["sphinx/ext/autodoc/__init__.py.modified", "sphinx/ext/autodoc/__init__.py"]),
    ("sphinx-doc__sphinx-8638", "mswe-7", [], ["reproduce_issue/conf.py"]),
    ("sphinx-doc__sphinx-9258", "mswe-23", [], ["reproduction/example.py"]),
]


def _commands(instance: str) -> dict[str, str]:
    session = read_trajectory(data_path("mini-swe-agent", f"{instance}.traj.json"))
    return {u.id: u.input["command"] for m in session.messages for u in m.tool_uses}


@pytest.mark.parametrize(("instance", "tool_id", "reads", "writes"), REAL)
def test_real_commands_as_labelled_by_hand(instance, tool_id, reads, writes):
    assert shell_files(_commands(instance)[tool_id]) == (reads, writes)


SYNTHETIC = [
    ("sed -i 's/a/b/' x.py", [], ["x.py"]),
    ("sed -i.bak 's/a/b/' x.py", [], ["x.py"]),
    ("sed -i '' -e 's/a/b/' x.py", [], ["x.py"]),
    ("sed -i -e 's/a/b/' -e 's/c/d/' x.py y.py", [], ["x.py", "y.py"]),
    ("sed --in-place 's/a/b/' x.py", [], ["x.py"]),
    ("sed -n '1,20p' a.py", ["a.py"], []),
    ("sed 's/a/b/' a.py > b.py", ["a.py"], ["b.py"]),
    ("cat <<'EOF' > f.py\nimport sys\nfor x in sys.argv:\n    print(x)\nEOF", [], ["f.py"]),
    ("cat <<EOF > f.txt\n$HOME\nEOF\ncat f.txt", ["f.txt"], ["f.txt"]),
    ("cat > f.txt <<-EOF\n\timport os\n\tEOF", [], ["f.txt"]),
    ("tee out.log <<EOF\nfrom a import b\nEOF", [], ["out.log"]),
    ("python - <<'EOF'\nimport sys\nwith open('gen.py', 'w') as f:\n    f.write('x')\nEOF", [], ["gen.py"]),
    ("python3 <<EOF\nimport sys\nprint(open('in.txt').read())\nEOF", [], []),
    ("python -c 'import sys; print(sys.path)'", [], []),
    ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: src/b.py\n+z\n"
     "*** Delete File: src/c.py\n*** End Patch\nEOF", [], ["src/a.py", "src/b.py", "src/c.py"]),
    ("git apply <<'EOF'\ndiff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-a\n+b\nEOF", [], ["p.py"]),
    ("cat > fix.diff <<'EOF'\n--- a/q.py\n+++ b/q.py\n@@\nEOF\npatch -p1 < fix.diff", ["fix.diff"], ["fix.diff", "q.py"]),
    ("git apply fix.patch", ["fix.patch"], []),
    ("git apply --check fix.patch", [], []),
    ("patch -p1 < x.diff", ["x.diff"], []),
    ("patch src/a.c fix.diff", [], ["src/a.c"]),
    ("cp a.py b.py", [], ["b.py"]),
    ("cp -r src/ -t backup/", [], ["backup/"]),
    ("mv old.py new.py", [], ["old.py", "new.py"]),
    ("touch pkg/__init__.py && rm -rf build dist", [], ["pkg/__init__.py", "build", "dist"]),
    ("cd src && cat main.py", ["main.py"], []),
    ("head -n 20 a.py; tail -5 b.py; wc -l c.py", ["a.py", "b.py", "c.py"], []),
    ("cat $FILE *.py {a,b}.txt ~/$X", [], []),
    ("echo hi > /dev/null 2>&1; ls 2> err.txt", [], ["err.txt"]),
    ("for f in a.py b.py; do echo $f; done > list.txt", [], ["list.txt"]),
    ("git commit -m \"$(cat <<'EOF'\nfeat: it's done (really\nEOF\n)\" && cat notes.md", ["notes.md"], []),
    ("diff <(cat a.txt) b.txt", ["a.txt"], []),
    ("sudo -u root sed -i 's/x/y/' /etc/hosts", [], ["/etc/hosts"]),
    ("timeout 10 python run.py > log.txt", [], ["log.txt"]),
    ("FOO=1 BAR=2 cat x.cfg", ["x.cfg"], []),
    ("perl -pi -e 's/a/b/' f1.txt f2.txt", [], ["f1.txt", "f2.txt"]),
    ("git checkout main && git checkout -- setup.py", [], ["setup.py"]),
    ("cat a.py 'unclosed", ["a.py"], []),
]


@pytest.mark.parametrize(("command", "reads", "writes"), SYNTHETIC)
def test_forms(command, reads, writes):
    assert shell_files(command) == (reads, writes)


def _outside_heredocs(command: str) -> str:
    """The command without its heredoc bodies, by a plain line scan independent of the lexer."""
    lines, out, i = command.replace("\\\n", " ").split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        for m in re.finditer(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2", lines[i]):
            j = i + 1
            while j < len(lines) and (lines[j].lstrip("\t") if m.group(1) else lines[j]) != m.group(3):
                j += 1
            i = j
        i += 1
    return "\n".join(out)


def _sed_targets(command: str) -> list[str]:
    """The last word of every ``sed -i`` invocation, read line by line with shlex."""
    out = []
    for line in _outside_heredocs(command).split("\n"):
        try:
            tokens = list(shlex.shlex(line, posix=True, punctuation_chars=True)) + [";"]
        except ValueError:
            continue
        words: list[str] = []
        redirected = False
        for tok in tokens:
            if tok[0] in "<>" or tok in ("&>", ">&"):
                redirected = True  # the next word is a redirection target, not sed's
                if words and words[-1].isdigit():
                    words.pop()
            elif tok in (";", "&&", "||", "|", "&", "(", ")"):
                if words and words[0] == "sed" and any(w.startswith(("-i", "--in-place")) for w in words[1:]):
                    out.append(words[-1])
                words = []
            elif redirected:
                redirected = False
            else:
                words.append(tok)
    return out


def test_every_command_of_the_real_runs():
    folder = data_path("mini-swe-agent")
    commands = [u.input["command"] for p in sorted(folder.glob("*.traj.json"))
                for m in read_trajectory(p).messages for u in m.tool_uses]
    edits = 0
    for command in commands:
        reads, writes = shell_files(command)
        for target in _sed_targets(command):  # every sed -i target is reported modified
            edits += 1
            assert target in writes, command
        outside = _outside_heredocs(command)
        for name in reads + writes:  # no heredoc body word, flag, keyword or number is ever a file
            named_by_body = re.search(rf"(?:\+\+\+ b/|File: |open\(['\"]){re.escape(name)}", command)
            assert name in outside or named_by_body, (name, command)
            assert not name.startswith("-") and not keyword.iskeyword(name) and not name.isdigit(), (name, command)
            assert "$" not in name and "*" not in name
    assert edits >= 200  # the runs edit mostly with sed -i: the oracle must have found them


BODY = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c"
                                                 "\x1c\x1d\x1e\x85\u2028\u2029"), max_size=40), max_size=8)


@given(BODY, st.sampled_from(["EOF", "'EOF'", "\"EOF\"", "-EOF"]))
def test_a_heredoc_body_is_never_a_file(lines, delimiter):
    lines = [ln for ln in lines if ln.lstrip("\t") != "EOF"]
    command = f"cat <<{delimiter} > out.txt\n" + "\n".join(lines) + "\nEOF\ncat out.txt"
    assert shell_files(command) == (["out.txt"], ["out.txt"])


@given(st.text(max_size=300))
def test_any_text_gives_two_lists_of_str(text):
    reads, writes = shell_files(text)
    assert all(isinstance(x, str) and x for x in reads + writes)
    assert len(set(reads)) == len(reads) and len(set(writes)) == len(writes)
    assert "\n" not in command_line(text)


@given(st.text(alphabet="ab $()<>|&;'\"`\\\n{}#=-", max_size=200))
def test_shell_syntax_soup_never_raises(text):
    reads, writes = shell_files(text)
    assert all(isinstance(x, str) for x in reads + writes)


def test_deeply_nested_substitutions_stay_bounded():
    text = "echo " + "$(" * 400 + "cat f.txt" + ")" * 400
    reads, _ = shell_files(text)
    assert reads in ([], ["f.txt"])


def test_command_line():
    assert command_line("cat <<'EOF' > a.py\nimport sys\nEOF\npython3 a.py") == "cat <<'EOF' > a.py [1 lines] ; python3 a.py"
    assert command_line("# note\ncd src && \\\n  make") == "cd src && make"
