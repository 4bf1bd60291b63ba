"""Outcomes and targets for account lines, checked on real results from both data sets."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import data_path
from lossless.dialects.detect import read_any
from lossless.dialects.mini_swe import read_trajectory
from lossless.messages import result_text
from lossless.rounds import INTERRUPTED
from lossless.account import OUTCOME_CHARS
from lossless.account.outcome import WINDOW, exit_status, outcome, target

# (file, tool_use id, outcome) — each read by eye against the full result.
REAL = [
    ("astropy__astropy-13398.traj.json", "mswe-6", "exit 0 — no output"),
    ("django__django-11087.traj.json", "mswe-23",  # too long whole: the exception without its module path
     "exit 1 — ImproperlyConfigured: Requested setting INSTALLED_APPS, but settings are not configured. You must "
     "either define the environment variable DJANGO_SETTIN…"),
    ("django__django-11087.traj.json", "mswe-28",  # the verdict, the failing test, its error (then the count, past this budget)
     "exit 1 — FAILED (errors=1, skipped=1); ERROR: test_relational_post_delete_signals_happ…; "
     "delete.models.S.DoesNotExist: S matching query does not exist."),
    ("django__django-11138.traj.json", "mswe-50",
     'exit 1 — IndentationError: expected an indented block; File "…/base.py", line 409'),
    ("django__django-11138.traj.json", "mswe-84",
     "exit 2 — python3: can't open file 'apply_fix.py': [Errno 2] No such file or directory"),
    ("django__django-15563.traj.json", "mswe-67",  # stdout interleaved
     'exit 1 — IndexError: tuple index out of range; File "…/compiler.py", line 1869, in pre_sql_setup'),
    ("pytest-dev__pytest-6197.traj.json", "mswe-9", "exit 0 — 1 passed"),
    ("pytest-dev__pytest-6197.traj.json", "mswe-29", "exit 127 — bash: line 1: ed: command not found"),
    ("sphinx-doc__sphinx-8459.traj.json", "mswe-32",
     "exit 4 — 7 warnings; ERROR: file or directory not found: tests/test_ext_autodoc_autodoc.py"),
    ("sphinx-doc__sphinx-9258.traj.json", "mswe-83",
     "exit 4 — 7 warnings, 1 error; ERROR tests/test_domain_py.py; SyntaxError: invalid syntax"),
    ("sympy__sympy-19040.traj.json", "mswe-78", "timed out — no output"),
    ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "toolu_01WdfD9cV8AuWAiUsJEdcgAt",  # Read
     "ok — lines 1–776; defines: SpotterWeb.SessionLive, mount, terminate, handle_info, handle_event, "
     "jump_to_tool_use, compute_sync_data, push_sync_events (+20 more)"),
    ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "toolu_0181AEpPhB3QjFAtjUhAp9nK",  # passing: its warnings
     "exit 0 — 15 tests, 0 failures; warning: a struct for Plug.Conn is expected on struct update:; "
     "warning: function svg_mini/1 is unused"),
    ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "toolu_011PBtiDwwmP44wZUbt17q6v",
     "exit 128 — fatal: The current branch spotter-dov has no upstream branch."),
    ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "toolu_01UjrpE6gQUJQhmx3jKdH9DJ", "ok — no output"),
    ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "toolu_01XK4qdtUEnYETQtLrNKXJBr",  # the path is the target
     "ok — File created successfully"),
    ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "toolu_01MqFE67xAqENpnkYuWd77EM",
     'exit 1 — ✘ [ERROR] Could not resolve "js/app.js"; Error: Build failed with 1 error:; '
     'error: Could not resolve "js/app.js"'),
    ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "toolu_01DCLR3rSnMNKmrb1EwDYB8V", "error — Sibling tool call errored"),
    ("ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "toolu_01JEX1PoyVkH96Phnv3AzYpf", "error — File does not exist."),
]


def _results(name: str):
    folder = "mini-swe-agent" if name.endswith(".traj.json") else "claude-code"
    path = data_path(folder, name)
    session = read_trajectory(path) if folder == "mini-swe-agent" else read_any(path)
    return {r.tool_use_id: r for m in session.messages for r in m.tool_results}


@pytest.mark.parametrize(("name", "tool_id", "expected"), REAL)
def test_real_results_read_as_checked_by_eye(name, tool_id, expected):
    r = _results(name)[tool_id]
    assert outcome(result_text(r), is_error=r.is_error) == expected


def test_every_real_shell_result_shows_its_exit_status():
    for name in ("django__django-11138.traj.json", "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"):
        for r in _results(name).values():
            text = result_text(r)
            head = re.match(r"<returncode>(-?\d+)</returncode>|Exit code (\d+)\n", text)
            if head:
                code = int(head.group(1) or head.group(2))
                assert exit_status(text) == code
                assert outcome(text, is_error=r.is_error, limit=40).startswith(f"exit {code}")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("<returncode>0</returncode>\n<output>\nok\n</output>", 0),
        ("<returncode>-9</returncode><output_head>\nx", -9),
        ("Exit code 128\nfatal: not a git repository", 128),
        ("<retrieval_status>success</retrieval_status>\n<exit_code>2</exit_code>\n<output>\n</output>", 2),
        ("building\n[Command finished with exit code 3]", 3),
        ("step 1\nProcess exited with code 1", 1),
        ("exit status 7", 7),
        ("the docs say a command can exit with code 3 when it fails", None),  # prose, not a status line
        ("     1→x = '<returncode>0</returncode>'", None),  # a file that quotes the tag is not a shell result
        ("hello", None),
        ("", None),
    ],
)
def test_exit_status_shapes(text, code):
    assert exit_status(text) == code


def test_status_is_kept_and_the_detail_cut_when_the_line_is_long():
    text = "<returncode>1</returncode>\n<output>\nValueError: " + "x" * 500 + "\n</output>"
    out = outcome(text, is_error=False, limit=60)
    assert out.startswith("exit 1 — ValueError: xxx") and out.endswith("…") and len(out) == 60


def test_interrupted_harness_tags_reminders_and_line_numbers():
    assert outcome(INTERRUPTED, is_error=True) == "interrupted"
    reminder = "\n\n<system-reminder>\nWhenever you read a file, consider malware.\n</system-reminder>\n"
    assert outcome("     1→a = 1\n     2→print(a)\n" + reminder, is_error=False) == "ok — lines 1–2"
    assert outcome("done building\n" + reminder, is_error=False) == "ok — done building"
    assert outcome("<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>", is_error=True) \
        == "error — String to replace not found in file."
    assert outcome("src/a.c:3:5: error: expected ';'\n1 error generated.", is_error=True) \
        == "error — src/a.c:3:5: error: expected ';'"


def test_chained_traceback_gives_the_final_exception():
    text = (
        "Exit code 1\nTraceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3\nRuntimeError: lookup failed"
    )
    assert outcome(text, is_error=True) == 'exit 1 — RuntimeError: lookup failed; File "a.py", line 3; KeyError: \'k\''



def test_only_the_head_and_tail_windows_are_read():
    head = "<returncode>1</returncode>\n<output>\n" + "progress line\n" * 5_000
    tail = "progress line\n" * 5_000 + "Traceback (most recent call last):\n  File \"x.py\", line 1\nOSError: disk full\n</output>"
    one = head + "progress line\n" * 400_000 + tail
    other = head + "Error: something in the middle\n" * 300_000 + tail
    assert outcome(one, is_error=False) == outcome(other, is_error=False) == 'exit 1 — OSError: disk full; File "x.py", line 1'
    assert len(one) > 10 * WINDOW


TARGETS = [
    ("Read", {"file_path": "/p/a.py"}, "/p/a.py"),
    ("Read", {"file_path": "/p/a.py", "offset": 70, "limit": 22}, "/p/a.py lines 70–91"),
    ("Edit", {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}, "/p/a.py"),
    ("MultiEdit", {"file_path": "/p/b.py", "edits": []}, "/p/b.py"),
    ("Write", {"file_path": "/p/c.py", "content": "..."}, "/p/c.py"),
    ("NotebookEdit", {"notebook_path": "/n.ipynb", "new_source": ""}, "/n.ipynb"),
    ("Bash", {"command": "pytest -q", "description": "run tests"}, "pytest -q"),
    ("bash", {"command": "cat <<'EOF' > a.py\nimport sys\nEOF\npython3 a.py"}, "cat <<'EOF' > a.py [1 lines] ; python3 a.py"),
    ("execute_bash", {"command": "cd src && \\\n  make"}, "cd src && make"),
    ("Grep", {"pattern": "TODO", "path": "src", "output_mode": "content"}, "'TODO' in src"),
    ("Glob", {"pattern": "**/*.py"}, "'**/*.py'"),
    ("WebFetch", {"url": "https://example.org/x", "prompt": "summarize"}, "https://example.org/x"),
    ("WebSearch", {"query": "filelock python"}, "filelock python"),
    ("Task", {"subagent_type": "Explore", "description": "Find the parser", "prompt": "..."}, "Explore: Find the parser"),
    ("TodoWrite", {"todos": [{"status": "completed"}, {"status": "in_progress"}, {"status": "pending"}]},
     "3 todos (1 completed, 1 in progress, 1 pending)"),
    ("LS", {"path": "/p"}, "/p"),
    ("str_replace_editor", {"command": "str_replace", "path": "/p/a.py", "old_str": "x"}, "str_replace /p/a.py"),
    ("read_file", {"path": "README.md"}, "README.md"),
    ("search", {"query": "where is recall"}, "'where is recall'"),
    ("fetch", {"url": "https://a.b/c"}, "https://a.b/c"),
    ("some_mcp_tool", {"filename": "x.txt", "mode": "w"}, "x.txt"),
    ("some_mcp_tool", {"n": [1, 2]}, '{"n": [1, 2]}'),
    ("EnterPlanMode", {}, ""),
]


@pytest.mark.parametrize(("tool", "input", "expected"), TARGETS)
def test_targets(tool, input, expected):
    assert target(tool, input) == expected


def test_every_real_tool_call_has_a_one_line_target():
    for name in ("4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "django__django-11138.traj.json"):
        folder = "mini-swe-agent" if name.endswith(".traj.json") else "claude-code"
        path = data_path(folder, name)
        session = read_trajectory(path) if folder == "mini-swe-agent" else read_any(path)
        for m in session.messages:
            for use in m.tool_uses:
                t = target(use.name, use.input, limit=120)
                assert len(t) <= 120 and "\n" not in t
                if use.name not in ("EnterPlanMode", "ExitPlanMode"):
                    assert t, use


RESULTS = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda code, body, tag: f"<returncode>{code}</returncode>\n<{tag}>\n{body}\n</{tag}>",
        st.integers(-300, 300), st.text(max_size=400), st.sampled_from(["output", "output_head", "output_tail"]),
    ),
    st.builds(lambda code, body: f"Exit code {code}\n{body}", st.integers(0, 255), st.text(max_size=300)),
    st.builds(lambda body: "Traceback (most recent call last):\n  File \"x\"\n" + body, st.text(max_size=200)),
)


@given(RESULTS, st.booleans(), st.integers(20, 300))
def test_outcome_is_one_bounded_line_with_the_status(text, is_error, limit):
    out = outcome(text, is_error=is_error, limit=limit)
    assert out == outcome(text, is_error=is_error, limit=limit)
    assert len(out.splitlines()) == 1 and out == out.strip()
    status = out.split(" — ", 1)[0]
    assert len(out) <= limit
    code = exit_status(text)
    if code is not None:
        assert status == f"exit {code}"


@given(st.text(max_size=30), st.dictionaries(st.text(max_size=12), st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=50), st.lists(st.integers(), max_size=3))))
def test_target_never_raises_and_is_one_line(tool, input):
    t = target(tool, input, limit=80)
    assert len(t) <= 80 and "\n" not in t


# Runners whose failing test's name and error sit away from each other (not in the shared data: written
# as each runner prints them). The account's budget, OUTCOME_CHARS.
CARGO = """running 3 tests
test lexer::tests::numbers ... ok
test parser::tests::rejects_trailing_comma ... FAILED
test eval::tests::add ... ok

failures:

---- parser::tests::rejects_trailing_comma stdout ----
thread 'parser::tests::rejects_trailing_comma' panicked at src/parser.rs:214:9:
assertion `left == right` failed
  left: Ok([1, 2])
 right: Err(TrailingComma { pos: 5 })
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    parser::tests::rejects_trailing_comma

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

error: test failed, to rerun pass `--lib`"""
CARGO_OLD = """running 2 tests
test a::b ... ok
test a::c ... FAILED

failures:

---- a::c stdout ----
thread 'a::c' panicked at 'called `Option::unwrap()` on a `None` value', src/a.rs:10:5

failures:
    a::c

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"""
GO_VERBOSE = """=== RUN   TestParse
--- PASS: TestParse (0.00s)
=== RUN   TestEval
    eval_test.go:42: Eval("2^10") = 1000, want 1024
--- FAIL: TestEval (0.00s)
=== RUN   TestLex
--- PASS: TestLex (0.00s)
FAIL
FAIL	github.com/u/calc	0.012s
FAIL"""
GO_QUIET = """--- FAIL: TestEval (0.00s)
    eval_test.go:42: Eval("2^10") = 1000, want 1024
FAIL
exit status 1
FAIL	github.com/u/calc	0.012s"""
JEST = """ PASS  src/utils/format.test.ts
 FAIL  src/api/client.test.ts
  ● ApiClient › retries on 503

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 1

      41 |     expect(fetchMock).toHaveBeenCalledTimes(3);
    > 42 |     expect(retries).toBe(3);
         |                     ^

      at Object.<anonymous> (src/api/client.test.ts:42:21)

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 23 passed, 24 total
Time:        3.212 s
Ran all test suites."""
RSPEC = """..F..

Failures:

  1) Cart#total applies the discount
     Failure/Error: expect(cart.total).to eq(90)

       expected: 90
            got: 100

     # ./spec/cart_spec.rb:14:in `block (3 levels) in <top (required)>'

Finished in 0.02 seconds (files took 0.1 seconds to load)
5 examples, 1 failure

Failed examples:

rspec ./spec/cart_spec.rb:12 # Cart#total applies the discount"""


@pytest.mark.parametrize(
    "text, kept",
    [
        (CARGO, ["test result: FAILED. 2 passed; 1 failed", "parser::tests::rejects_trailing_comma",
                 "panicked at src/parser.rs:214:9:"]),
        (CARGO_OLD, ["a::c", "panicked at 'called `Option::unwrap()` on a `None` value', src/a.rs:10:5"]),
        (GO_VERBOSE, ["--- FAIL: TestEval", 'eval_test.go:42: Eval("2^10") = 1000, want 1024']),
        (GO_QUIET, ["--- FAIL: TestEval", 'eval_test.go:42: Eval("2^10") = 1000, want 1024']),
        (JEST, ["Tests: 1 failed, 23 passed, 24 total", "● ApiClient › retries on 503",
                "expect(received).toBe(expected)"]),
        (RSPEC, ["5 examples, 1 failure", "Cart#total applies the discount",
                 "Failure/Error: expect(cart.total).to eq(90)", "expected: 90"]),
    ],
    ids=["cargo", "cargo-before-1.73", "go-v", "go", "jest", "rspec"],
)
def test_a_failing_run_keeps_the_test_and_its_error_whatever_the_runner(text, kept):
    out = outcome(text, is_error=True, limit=OUTCOME_CHARS)
    assert out.startswith(("error — ", "exit 1 — ")) and len(out) <= OUTCOME_CHARS
    for fragment in kept:
        assert fragment in out, (fragment, out)
    assert "PASS src/utils" not in out  # a passing file's line is not what went wrong


def test_npm_and_eslint_errors_are_error_lines():
    npm = ("npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR!\n"
           "npm ERR! While resolving: my-app@0.1.0\nnpm ERR! Found: react@18.2.0\n")
    assert outcome(npm, is_error=True, limit=OUTCOME_CHARS).startswith(
        "error — npm ERR! code ERESOLVE; npm ERR! ERESOLVE unable to resolve dependency tree")
    eslint = ("\n/app/src/index.js\n   3:10  error    'foo' is defined but never used  no-unused-vars\n"
              "  12:5   warning  Unexpected console statement     no-console\n\n✖ 2 problems (1 error, 1 warning)\n")
    assert "3:10 error 'foo' is defined but never used" in outcome(eslint, is_error=True, limit=OUTCOME_CHARS)


def _numbered(src: str) -> str:
    return "\n".join(f"{i + 1:>6}→{line}" for i, line in enumerate(src.split("\n")))


@pytest.mark.parametrize("src, names", [
    ("package a;\n\npublic class InvoiceService {\n    private final Repo repo;\n    public static final int MAX = max(1, 2);\n"
     "    public InvoiceService(Repo repo) {\n    }\n    public Map<String, List<Item>> byCustomer() {\n    }\n"
     "    static int total(List<Item> items) {\n    }\n}", ["InvoiceService", "byCustomer", "total"]),
    ("#include <stdio.h>\n\nstatic unsigned long djb2(const char *s) {\n    return 5381;\n}\n\n"
     "struct entry *hash_find(table *t, const char *k)\n{\n    return NULL;\n}\nint main(void) {\n}", ["djb2", "hash_find", "main"]),
    ("namespace A\n{\n    public sealed class Service : IService\n    {\n        public async Task<Invoice> CreateAsync(Customer c)\n"
     "        {\n        }\n    }\n}", ["Service", "CreateAsync"]),
    ("data class Point(val x: Int)\n\nfun distance(a: Point): Double = 0.0\n\nopen class Shape {\n"
     "    override fun toString(): String = \"shape\"\n}", ["Point", "distance", "Shape", "toString"]),
])
def test_a_read_names_what_a_java_c_csharp_or_kotlin_file_defines(src, names):
    out = outcome(_numbered(src), is_error=False, limit=200)
    defined = out.split("defines: ", 1)[1].split(", ")
    assert defined == names, out


def test_top_level_statements_that_call_are_not_definitions():
    src = "import os\nassert check(os)\nraise SystemExit(main())\nnew Widget(x)\n\ndef helper(x):\n    return x\n"
    assert outcome(_numbered(src), is_error=False) == "ok — lines 1–8; defines: helper"
