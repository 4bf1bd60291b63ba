"""quote_users: the user's words in an account — the task whole or head+tail, repeats once, newest first to go in."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import data_path
from lossless.dialects.mini_swe import read_trajectory
from lossless.messages import Text
from lossless.account.users import clip_middle, quote_users
from lossless.store import handle_for

HANDLE = re.compile(r"recall (sha256:[0-9a-f]+)[\])]")
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
MARKERS = 2 * 120  # two markers (omitted task middle, earlier messages), each well under 120 characters


class Store:
    """A content-addressed put, as the artifact store's, kept in memory for the test."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def put(self, text: str) -> str:
        handle = handle_for(text.encode())
        self.items[handle] = text
        return handle

    def get(self, handle: str) -> str:
        """The text behind a full or short handle (the one stored handle that starts with it)."""
        (full,) = [h for h in self.items if h.startswith(handle)]
        return self.items[full]


def quote(texts, budget=1_000, task_budget=2_000):
    store = Store()
    entries, hidden = quote_users(texts, budget=budget, task_budget=task_budget, put=store.put)
    return entries, hidden, store


def recalled(entries, store) -> list[str]:
    """Every text the entries' handles lead to (a JSON list is opened)."""
    out = []
    for entry in entries:
        for handle in HANDLE.findall(entry):
            text = store.get(handle)
            listed = (entry.startswith("[") and "earlier user" in entry) or "differing only in numbers" in entry
            out.extend(json.loads(text) if listed else [text])
    return out


def test_short_task_and_messages_are_quoted_whole_oldest_first():
    entries, hidden, store = quote(["Fix the parser.", "Also add tests.", "Use type hints."])
    assert entries == ["Fix the parser.", "Also add tests.", "Use type hints."]
    assert hidden == 0 and not store.items


def test_long_task_keeps_head_and_tail_with_a_handle_to_the_whole():
    task = "Fix the bug in the parser.\n" + "context line\n" * 800 + "Finally run: " + SUBMIT
    entries, hidden, store = quote([task, "go on"], task_budget=1_500)
    first = entries[0]
    assert first.startswith("Fix the bug in the parser.") and first.endswith(SUBMIT)
    assert len(first) <= 1_500 and hidden == 1
    (handle,) = HANDLE.findall(first)
    assert store.get(handle) == task
    omitted = int(re.search(r"\[… ([\d,]+) characters omitted", first).group(1).replace(",", ""))
    assert omitted == len(task) - len(first.split("\n[…")[0]) - len(first.rsplit("]\n", 1)[1])


def test_repeated_reminder_is_kept_once_at_its_latest_position_with_a_count():
    reminder = "Please always provide EXACTLY ONE action in triple backticks."
    texts = ["task", reminder, "first ask", reminder + "\n\n", "second ask", "  " + reminder, "last ask"]
    entries, hidden, _ = quote(texts)
    assert entries == ["task", "first ask", "second ask", f"{reminder}\n(repeated 3×)", "last ask"]
    assert hidden == 0


def test_long_reminders_differing_only_in_numbers_are_one_entry_the_others_behind_a_handle():
    def reminder(n):
        return f"Please always provide EXACTLY ONE action in triple backticks, found {n} actions.\n" + "See the example. " * 12
    texts = ["task", reminder(2), "first ask", reminder(5), reminder(5), "second ask", reminder(3)]
    entries, hidden, store = quote(texts, budget=2_000)
    assert entries[:3] == ["task", "first ask", "second ask"] and len(entries) == 4
    latest, note = entries[3].rsplit("\n", 1)
    assert latest == reminder(3).strip()
    # a full handle: merging accounts reads the variants back (tests/test_accounts.py)
    assert re.fullmatch(r"\(4× in all, the others differing only in numbers — recall sha256:[0-9a-f]{24}\)", note)
    (handle,) = re.findall(r"sha256:[0-9a-f]{24}", note)
    assert json.loads(store.items[handle]) == [reminder(2), reminder(5), reminder(5)]
    assert hidden == 3


def test_short_messages_differing_in_numbers_stay_verbatim_each():
    entries, hidden, _ = quote(["task", "try option 1", "try option 2"])
    assert entries == ["task", "try option 1", "try option 2"] and hidden == 0


def test_older_messages_that_do_not_fit_are_named_by_one_line_with_a_handle():
    texts = ["task"] + [f"message {i}: " + "x" * 90 for i in range(20)]
    entries, hidden, store = quote(texts, budget=350)
    assert entries[0] == "task"
    line = entries[1]
    assert re.fullmatch(r"\[17 earlier user messages not shown — recall sha256:[0-9a-f]+\]", line)
    assert json.loads(store.items[HANDLE.findall(line)[0]]) == texts[1:18]
    assert entries[2:] == texts[18:] and hidden == 17


def test_a_newest_message_bigger_than_the_budget_is_cut_not_hidden():
    big = "Please look at this log:\n" + "log line\n" * 500 + "and tell me why it fails."
    entries, hidden, store = quote(["task", "older note", big], budget=600)
    assert entries[1].startswith("[1 earlier user message not shown")
    assert entries[2].startswith("Please look at this log:") and entries[2].endswith("why it fails.")
    assert big in recalled(entries, store) and hidden == 2


def test_no_texts_gives_nothing():
    assert quote_users([], budget=10, task_budget=10, put=Store().put) == ([], 0)


def test_clip_middle_respects_the_limit_and_leaves_short_text_alone():
    assert clip_middle("short", 10, "h") == "short"
    text = "".join(chr(65 + i % 26) for i in range(5_000))
    for limit in (0, 50, 200, 1_000, 4_999):
        out = clip_middle(text, limit, "sha256:abc")
        marker_len = len("[… 5,000 characters omitted — recall sha256:abc]")
        assert len(out) <= max(limit, marker_len + 1)
        assert text.startswith(out.split("\n[…")[0])


TEXTS = st.lists(
    st.one_of(
        st.text(max_size=300),
        st.sampled_from(["Please provide ONE action.", "  Please provide ONE action.\n", "ok", "", "   "]),
        st.text(alphabet="ab \n", min_size=500, max_size=3_000),
        st.builds(lambda n: f"Please always provide EXACTLY ONE action, found {n} actions.\n" + "Format it so. " * 20,
                  st.integers(0, 12)),
    ),
    max_size=25,
)


@settings(max_examples=80)
@given(TEXTS, st.integers(0, 4_000), st.integers(0, 4_000))
def test_every_message_is_quoted_or_recallable_within_the_size_bound(texts, budget, task_budget):
    entries, hidden, store = quote(texts, budget=budget, task_budget=task_budget)
    again, hidden_again, _ = quote(texts, budget=budget, task_budget=task_budget)
    assert (entries, hidden) == (again, hidden_again)  # deterministic
    if not texts:
        assert entries == []
        return
    behind = recalled(entries, store)
    for t in texts[1:]:
        s = t.strip()
        verbatim = any(e == s or e.startswith((s + "\n(repeated ", s + "\n(")) and "×" in e[len(s):]
                       for e in entries[1:])
        assert not s or verbatim or any(s in b for b in behind), t
    assert entries[0] == texts[0].strip() or texts[0] in behind
    assert sum(map(len, entries)) <= budget + task_budget + MARKERS
    task = texts[0].strip()
    assert entries[0].startswith(task[: min(len(task), max(0, task_budget - MARKERS) // 2)])
    assert 0 <= hidden <= len(texts)


def test_real_trajectories_keep_the_submit_instruction_and_one_copy_of_each_reminder():
    folder = data_path("mini-swe-agent")
    for path in sorted(folder.glob("*.traj.json")):
        s = read_trajectory(path)
        texts = ["\n".join(b.text for b in m.content if isinstance(b, Text)) for m in s.messages if m.role == "user"]
        texts = [t for t in texts if t]
        entries, _, store = quote(texts, budget=3_000, task_budget=4_000)
        assert SUBMIT in entries[0], path.name  # the tail of the task survives the cut
        assert entries[0][:200] == texts[0].strip()[:200]
        bodies = [e.split("\n(repeated ")[0] for e in entries[1:] if not e.startswith("[")]
        assert len(bodies) == len(set(bodies)), path.name
        assert sum(map(len, entries[1:])) <= 3_000 + MARKERS
        recalled(entries, store)  # every handle resolves


def test_with_the_task_elsewhere_a_reminder_that_opens_the_range_is_quoted_once():
    """When the task is pinned in context, the range's first message is one like the others: a harness's
    reminder that opens the range and comes back later (in other numbers) is one entry, not two."""
    store = Store()
    reminder = "Please always provide EXACTLY ONE action in triple backticks, found {} actions. " + "x" * 220
    texts = [reminder.format(2), "now check the parser", reminder.format(3)]
    entries, hidden = quote_users(texts, budget=10_000, task_budget=10_000, put=store.put, task=False)
    assert sum("EXACTLY ONE action" in e for e in entries) == 1
    assert "now check the parser" in entries
    assert hidden == 1  # the other occurrence, whole behind the handle its entry names
    assert any("2× in all" in e for e in entries)
