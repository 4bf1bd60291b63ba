"""Configuration of the context pipeline and the budget it derives.

One frozen dataclass, ``ContextConfig``, carries every knob with the seeds'
defaults.  ``Budget`` turns it into the token lines the pipeline acts on.

The absolute defaults (20,000 output reserve, 13,000 auto-compact buffer, 20,000
warning buffer, 3,000 blocking buffer) were made for 200k windows.  For small
windows each is capped by a fraction of what it is taken from, so a 16k or 32k
window still gets a positive, sensible threshold instead of a negative one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .errors import ConfigError

SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "run_command", "execute_bash", "terminal", "BashOutput"})
COMPACTABLE_TOOLS = frozenset(
    {
        "Read", "read_file", "Bash", "bash", "shell", "Grep", "grep", "Glob", "glob", "WebFetch",
        "WebSearch", "Edit", "Write", "MultiEdit", "NotebookEdit", "LS", "ls", "BashOutput",
        "str_replace_editor", "execute_bash", "run_command", "list_files", "search", "fetch",
    }
)
READ_TOOLS = frozenset({"Read", "read_file", "view", "str_replace_editor"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextConfig:
    window: int = 200_000
    """The model's context window, in tokens."""
    max_output: int | None = None
    """The max_tokens the caller asks for; min(max_output, output_reserve) is reserved.
    None means min(32,000, window / 4), so a small window keeps room for its input."""
    output_reserve: int = 20_000
    """Cap on the tokens reserved for the answer (the seeds' MAX_OUTPUT_TOKENS_FOR_SUMMARY)."""
    autocompact_buffer: int = 13_000
    """Auto-compact threshold = effective window − this."""
    warning_buffer: int = 20_000
    """Warning and error states start this far below the threshold."""
    blocking_buffer: int = 3_000
    """Blocking limit = effective window − this: no request is sent above it."""

    persist_chars: int = 50_000
    """A tool result longer than this is persisted to the artifact store."""
    persist_shell_chars: int = 30_000
    """The same limit for shell tools, whose output is the least dense."""
    persist_message_chars: int = 200_000
    """A user message whose tool results total more than this has its largest persisted."""
    persist_threshold_fraction: float = 0.5
    """A tool result (or one message's results together) over this fraction of the
    auto-compact threshold, in tokens, is persisted whatever its characters: on a small
    window the character limits alone let one result crowd out everything, and the
    summary would then have to swallow the very round the model has not read yet.
    Inactive on large windows (200k: ~83k tokens, far above the character limits)."""
    preview_chars: int = 2_000
    """Characters of a persisted result kept in the marker."""
    shell_tools: frozenset[str] = SHELL_TOOLS

    micro_keep: int = 3
    """Micro-compact keeps the results of this many most recent compactable calls."""
    micro_keep_reads: bool = False
    """When true, results of file reads are never micro-compacted."""
    micro_trigger_fraction: float = 1.0
    """Micro-compact considers clearing only above this fraction of the threshold.  It runs after
    snip, so at 1.0 it clears old outputs only when removing whole rounds could not bring the
    context under the threshold (a few huge rounds): the recent work stays verbatim."""
    micro_min_batch_fraction: float = 0.25
    """…and only when it would free at least this fraction of the window at once."""
    micro_idle_minutes: float = 60.0
    """When the last assistant message is older than this, the cache is cold: clear freely."""
    micro_idle_keep: int = 5
    compactable_tools: frozenset[str] = COMPACTABLE_TOOLS
    read_tools: frozenset[str] = READ_TOOLS

    snip_trigger_fraction: float = 1.0
    """Snip fires above this fraction of the threshold…"""
    snip_target_fraction: float = 0.65
    """…and removes the oldest middle rounds until the context is at this fraction of it (one
    batch; rounds go whole, so it lands in a band from 10 % of the threshold under it to 5 % over
    it, 55–70 %): the most recent rounds stay verbatim, and the next snip is at least 30 % of the
    threshold of new work away (hysteresis: never on consecutive requests).  Measured on real
    sessions against the peers (bench/RESULTS.md §6): what the model works from is the recent
    output itself, which an account cannot stand for; 0.3 kept a catalog of handles and little of
    it, and 0.65 keeps 2–4 % more facts than 0.6 for 3–4 % more input cost."""
    snip_min_batch_fraction: float = 0.05
    """…and only when it frees at least this fraction of the window (or gets under the
    threshold): a small snip would change the cached prefix for little gain."""
    pin_head_messages: int = 5
    """Messages at the start that snip never removes: the task statement and the first rounds of
    work on it (the first look at the code, which later work keeps coming back to), as the best
    peer keeps its first events; extended to a round boundary…"""
    pin_head_max_fraction: float = 0.4
    """…while they hold at most this fraction of the threshold; beyond it only the task is pinned,
    so the recent work keeps at least a third of the landing.  Swept side by side at 32k
    (bench/RESULTS.md §6): 23 % of facts kept with the task alone, 26 % with the first rounds up to
    0.15–0.3 of the threshold, 33.5 % up to 0.4, 38.5 % up to 0.5 or uncapped, each for a slightly lower
    cost; 0.4 is the most that leaves the recent rounds their share.  Where the system prompt and
    tools take so much of the target that this would leave the recent rounds less than a third of
    it (or less than the newest round, which stays verbatim), the head gets only what leaves them
    that (``stages.snip.pinned_head``)."""
    keep_tail_rounds: int = 4
    """Rounds at the end that snip never removes."""

    account_fraction: float = 0.4
    """An account (what a removal leaves in context) takes at most this fraction of the
    tokens it replaces…"""
    account_max_fraction: float = 0.13
    """…and at most this fraction of the threshold (accounts merge as removals repeat; a tenth
    of the window in tokens, whatever this says; both less in proportion where the system prompt
    and tools leave less than a snip's target under the threshold: ``account_room``).  Both chosen
    by the fidelity sweep (bench/RESULTS.md §6): with key lines under the calls, 0.13 keeps 1–3 %
    more facts than 0.12, and 0.14 takes a 32k account past a tenth of the window."""
    account_min_tokens: int = 400
    """…but never less than this (or a tenth of the window, if smaller: at a 2k window 400
    tokens would be a third of the room): the user's words and the last calls need some room."""
    verbatim_tail_fraction: float = 0.15
    """When snip fires, the newest rounds up to this fraction of the threshold stay verbatim whole; the
    model's replies in the older rounds it keeps give up their reasoning and keep their conclusions and
    code (``stages.thin``), so the budget holds more of the outputs.  1.0 keeps every reply whole."""
    account_conclusions_fraction: float = 0.125
    """The most of an account's room (what the users, files, ranges and earlier summaries leave) the
    assistant's conclusions take, newest first: the model's own words, which the range's handle keeps
    and the recent rounds continue, give way to the key lines of the outputs it cannot say again.
    Swept on the shared sessions at 32k against the peer (bench/RESULTS.md §6): a quarter, a sixth, an
    eighth and a twelfth kept 1,398 / 1,419 / 1,430 / 1,419 facts at the end of the live loop and
    1,272 / 1,286 / 1,297 / 1,300 one-shot; the held-out sessions agreed."""

    collapse_trigger_fraction: float = 0.9
    """With a model, collapse summarises finished episodes above this fraction of the threshold…"""
    collapse_target_fraction: float = 0.5
    """…until the context is at this fraction of it.  0.5 rather than 0.7: fewer, larger
    batches keep as many facts for less (the with-model sweep in bench/RESULTS.md §6)."""
    collapse_episode_tokens: int = 20_000
    """…and a stretch without a user turn longer than this is collapsed as several episodes, cut at
    natural boundaries (a todo done, a passing test run, a commit): a session is never one episode."""
    notes_every_tokens: int = 5_000
    """With a model, the session notes are refreshed each time the history has grown by this
    many tokens since the last refresh (the seeds' 5,000), once it is past the warning line."""

    tail_fraction: float = 0.45
    """The summary keeps a verbatim recent tail of up to this fraction of the threshold (at
    least the last round when it fits): with the summary and its account on top it lands near
    60 % of the threshold, the recent work in hand verbatim and the next compaction a good
    stretch of work away."""
    summary_user_chars: int = 12_000
    """Budget for the user's own messages quoted verbatim in the fallback summary."""

    def __post_init__(self) -> None:
        for name in ("window", "max_output"):
            value = getattr(self, name)
            if not (value is None and name == "max_output") and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{name} must be a whole number of tokens, not {type(value).__name__} {value!r}")
        if self.window < 1024:
            raise ConfigError(f"window ({self.window}) must be at least 1024 tokens")
        if self.max_output is not None and not 0 < self.max_output < self.window:
            raise ConfigError(f"max_output ({self.max_output}) must be smaller than the window ({self.window})")
        if not 0 < self.collapse_target_fraction < self.collapse_trigger_fraction:
            raise ConfigError(f"collapse_target_fraction ({self.collapse_target_fraction}) must be above 0 and below "
                              f"collapse_trigger_fraction ({self.collapse_trigger_fraction})")
        if not 0 <= self.verbatim_tail_fraction <= 1:
            raise ConfigError(f"verbatim_tail_fraction ({self.verbatim_tail_fraction}) must be from 0 to 1 "
                              "(1 keeps every reply whole)")
        if self.collapse_episode_tokens < 1:
            raise ConfigError(f"collapse_episode_tokens ({self.collapse_episode_tokens}) must be at least 1")
        if self.notes_every_tokens < 1:
            raise ConfigError(f"notes_every_tokens ({self.notes_every_tokens}) must be at least 1")
        room = self.window - min(self.output_tokens, self.output_reserve)
        if room < self.window // 8:
            # Below this the buffers round to nothing and the budget lines collapse.
            raise ConfigError(
                f"max_output ({self.output_tokens}) leaves only {room} tokens of the {self.window}-token window "
                f"for the conversation; lower max_output to at most {self.window - self.window // 8}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ContextConfig:
        """Build from a dict (a YAML file, say); an unknown key is an error, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown configuration {'key' if len(unknown) == 1 else 'keys'} {', '.join(map(repr, unknown))}; known: {sorted(known)}")
        return cls(**values)

    def account_tokens(self, replaced: int, overhead: int = 0) -> int:
        """The token budget of the account that stands for ``replaced`` removed tokens, in a request
        whose system prompt and tools take ``overhead`` tokens (see ``account_room``)."""
        cap = int(self.account_max_fraction * self.budget.threshold * self.account_room(overhead))
        return max(min(self.account_min_tokens, self.window // 10), min(int(self.account_fraction * replaced), cap))

    def account_room(self, overhead: int) -> float:
        """The share of its caps an account gets when the system prompt and tools take ``overhead``
        tokens: all of them while the room they leave under the threshold holds a snip's target,
        then in proportion, so a large fixed part does not leave the account most of what is left."""
        threshold = self.budget.threshold
        target = self.snip_target_fraction * threshold
        return 1.0 if target <= 0 else min(1.0, max(0, threshold - overhead) / target)

    def account_lines(self) -> tuple[int, int]:
        """(earlier ranges, lines of hidden user messages) an account carries at most: fewer
        than ``KEEP_RANGES``/``KEEP_HIDDEN`` where its largest budget cannot hold them (a range
        line is ~25 tokens, a hidden one ~30: at a 2k window six of each were a third of it)."""
        most = self.account_tokens(self.window)
        return max(1, min(6, most // 250)), max(1, min(4, most // 250))

    @property
    def output_tokens(self) -> int:
        return self.max_output if self.max_output is not None else min(32_000, self.window // 4)

    @property
    def budget(self) -> Budget:
        return Budget.from_config(self)


@dataclass(frozen=True, slots=True)
class Budget:
    """The token lines, all derived from one ``ContextConfig``."""

    window: int
    effective: int
    threshold: int
    warning: int
    blocking: int
    _cfg: ContextConfig | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_config(cls, cfg: ContextConfig) -> Budget:
        reserve = min(cfg.output_tokens, cfg.output_reserve)
        effective = cfg.window - reserve
        # Caps keep each buffer proportionate on small windows; on 200k they are inactive.
        auto_buf = min(cfg.autocompact_buffer, int(effective * 0.10))
        threshold = effective - auto_buf
        warn_buf = min(cfg.warning_buffer, int(threshold * 0.15))
        block_buf = min(cfg.blocking_buffer, int(effective * 0.02))
        return cls(
            window=cfg.window,
            effective=effective,
            threshold=threshold,
            warning=threshold - warn_buf,
            blocking=effective - block_buf,
            _cfg=cfg,
        )

    def percent_left(self, tokens: int) -> float:
        """Percent of the window still free (may go negative), as a person reads "% left";
        how near auto-compaction is, is ``above_warning``/``above_threshold``."""
        return round(100.0 * (self.window - tokens) / self.window, 1)

    def state(self, tokens: int) -> dict[str, Any]:
        return {
            "tokens": tokens,
            "window": self.window,
            "threshold": self.threshold,
            "percent_left": self.percent_left(tokens),
            "above_warning": tokens >= self.warning,
            "above_error": tokens >= self.warning,
            "above_threshold": tokens >= self.threshold,
            "blocking": tokens >= self.blocking,
        }
