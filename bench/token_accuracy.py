"""How close lossless's token estimate is to o200k_base, per content class, and how fast.

Usage (from the repo root)::

    python bench/token_accuracy.py [--data DIR] [--json] [--per-class N]

Samples come from the shared corpora (``../shared/data``): Claude Code sessions
(user and assistant prose, thinking, tool results by tool: Bash → shell, Read →
code, Grep/Glob → listing, other tools, tool_use inputs and raw tool data → json),
mini-swe-agent trajectories (observations, assistant thoughts), LoCoMo dialogue
(chat prose), plus synthetic base64/hex blobs and hand-written non-Latin prose.
Each sample is counted by o200k_base (the reference), by chars/4 and by
``ContentAwareEstimator.count_text``; errors are ``(estimate − o200k) / o200k``.

The tokenizer files are loaded offline from ``<data>/tokenizers/tiktoken-cache``.
Nothing is written: the table goes to stdout (``--json`` for machines).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lossless.messages import Message, block_text  # noqa: E402
from lossless.calibration import Calibrator  # noqa: E402
from lossless.tokens import ContentAwareEstimator  # noqa: E402

MIN_CHARS = 64
"""Shorter texts are left out: their per-message overhead dwarfs the text itself."""
MAX_CHARS = 60_000
"""Longer texts are cut here, so that one huge file does not dominate the run time."""

SHELL_TOOLS = {"Bash", "BashOutput", "TaskOutput"}
LISTING_TOOLS = {"Grep", "Glob", "LS"}


@dataclass(frozen=True, slots=True)
class Sample:
    cls: str
    source: str
    text: str


# --- corpora --------------------------------------------------------------------------


def _cc_texts(path: Path) -> Iterator[tuple[str, str]]:
    """(class, text) pairs from one Claude Code JSONL transcript."""
    tools: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            entry = json.loads(line)
            msg = entry.get("message")
            if not isinstance(msg, dict):
                continue
            raw = entry.get("toolUseResult")
            if isinstance(raw, (dict, list)):
                yield "json", json.dumps(raw, ensure_ascii=False)
            content = msg.get("content")
            if isinstance(content, str):
                yield ("user-prose" if entry.get("type") == "user" else "assistant-prose"), content
                continue
            for block in content or ():
                kind = block.get("type")
                if kind == "text":
                    yield ("user-prose" if entry.get("type") == "user" else "assistant-prose"), block["text"]
                elif kind == "thinking":
                    yield "thinking", block.get("thinking", "")
                elif kind == "tool_use":
                    tools[block["id"]] = block["name"]
                    yield "json", json.dumps(block.get("input", {}), ensure_ascii=False)
                elif kind == "tool_result":
                    body = block.get("content")
                    if isinstance(body, list):
                        body = "\n".join(b.get("text", "") for b in body if isinstance(b, dict))
                    name = tools.get(block.get("tool_use_id", ""), "")
                    if name in SHELL_TOOLS:
                        cls = "shell"
                    elif name == "Read":
                        cls = "code"
                    elif name in LISTING_TOOLS:
                        cls = "listing"
                    else:
                        cls = "tool-other"
                    yield cls, body or ""


def _swe_texts(path: Path) -> Iterator[tuple[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    for i, msg in enumerate(data.get("messages", ())):
        content = msg.get("content")
        if not isinstance(content, str):
            continue
        if msg.get("role") == "assistant":
            yield "swe-thought", content
        elif msg.get("role") == "user" and i > 1:
            yield "swe-observation", content


def _locomo_texts(path: Path) -> Iterator[tuple[str, str]]:
    for conv in json.loads(path.read_text(encoding="utf-8")):
        sessions = conv.get("conversation", {})
        for key, turns in sessions.items():
            if key.startswith("session_") and isinstance(turns, list):
                yield "chat-prose", "\n".join(f"{t['speaker']}: {t['text']}" for t in turns)


def _blobs(seed: int = 7) -> Iterator[tuple[str, str]]:
    rng = random.Random(seed)
    for _ in range(40):
        raw = rng.randbytes(rng.choice((48, 200, 900, 3000, 12000)))
        b64 = base64.b64encode(raw).decode()
        if rng.random() < 0.3:  # MIME-style wrapping
            b64 = "\n".join(b64[i : i + 76] for i in range(0, len(b64), 76))
        yield "base64", b64
        yield "hex", raw.hex() if rng.random() < 0.7 else hashlib.sha256(raw).hexdigest() * 4


# Hand-written for this bench (not taken from any corpus).
NON_LATIN: dict[str, tuple[str, ...]] = {
    "cjk": (
        "我们的团队正在开发一个用于管理大型语言模型上下文窗口的工具。它会在每次调用模型之前检查历史记录的大小，"
        "如果超过限制，就先移除最旧的工具输出，然后再考虑生成摘要。这样做的好处是成本低，而且不会丢失任何信息，"
        "因为所有被移出的内容都可以通过一个句柄重新取回。",
        "昨天下午下了一场大雨，街道上的积水很深。孩子们穿着雨靴在水坑里跳来跳去，笑声传遍了整个小区。"
        "雨停以后，天边出现了一道彩虹，很多人拿出手机拍照。晚饭时，奶奶做了热腾腾的饺子，大家围坐在一起聊天。",
        "请注意：配置文件中的窗口大小必须至少为一千零二十四个令牌。如果设置的值太小，程序会报错并提示你修改配置。"
        "默认情况下，系统会为模型的回答保留两万个令牌，并在距离上限一万三千个令牌时自动压缩对话。",
        "東京の朝は早い。通勤電車は六時台からすでに混み始め、駅のホームには会社員や学生が列を作って並んでいる。"
        "駅前のコーヒーショップでは、店員が手際よく注文をさばき、香ばしい匂いが通りまで漂ってくる。",
        "このライブラリは、会話の履歴が長くなりすぎたときに、古いツールの出力を安全に取り除きます。"
        "取り除いた内容はすべて保存されるので、あとから必要になったときにいつでも呼び戻すことができます。",
        "오늘은 날씨가 맑고 따뜻해서 친구들과 함께 한강 공원에 갔습니다. 자전거를 빌려서 강변을 따라 달렸고, "
        "점심으로는 김밥과 떡볶이를 먹었습니다. 해가 질 무렵에는 다리 위의 불빛이 물에 비쳐 정말 아름다웠습니다.",
    ),
    "cyrillic": (
        "Наша библиотека следит за размером контекста языковой модели. Перед каждым вызовом она проверяет, "
        "сколько токенов занимает история, и если места не хватает, сначала убирает старые результаты инструментов, "
        "а уже потом, в крайнем случае, просит модель составить краткое изложение разговора.",
        "Вчера вечером мы долго гуляли по набережной. Ветер с реки был холодным, но небо оставалось ясным, "
        "и над городом медленно поднималась полная луна. По дороге домой мы зашли в маленькое кафе и заказали "
        "горячий чай с лимоном и пирог с вишней.",
        "Ошибка: не удалось открыть файл конфигурации. Проверьте, что путь указан верно и что у текущего "
        "пользователя есть права на чтение. Если проблема повторяется, удалите временный каталог и запустите "
        "программу ещё раз с параметром подробного журнала.",
        "Сьогодні вранці ми поїхали до бабусі в село. Дорога була довгою, але дуже гарною: обабіч тягнулися "
        "поля соняшників, а вдалині видніли ся старі вітряки. Бабуся зустріла нас свіжим хлібом і медом.",
        "Трассировка показала, что функция вызывается дважды: сначала из обработчика запроса, а затем из фоновой "
        "задачи. Я добавил блокировку и проверку состояния, после чего тесты прошли успешно. Осталось обновить "
        "документацию и описать новое поведение в журнале изменений.",
        "Здравейте! Благодаря за бързия отговор. Ще изпратя файловете утре сутринта, след като проверя дали всички "
        "таблици са попълнени правилно. Ако имате въпроси, моля, пишете ми по всяко време.",
    ),
    "other-scripts": (
        "Η βιβλιοθήκη μας διαχειρίζεται το παράθυρο συμφραζομένων ενός γλωσσικού μοντέλου. Πριν από κάθε κλήση "
        "ελέγχει το μέγεθος του ιστορικού και, αν χρειαστεί, αφαιρεί πρώτα τα παλαιότερα αποτελέσματα εργαλείων.",
        "हमारी लाइब्रेरी भाषा मॉडल की संदर्भ विंडो का प्रबंधन करती है। हर कॉल से पहले यह बातचीत के इतिहास का आकार "
        "जाँचती है और ज़रूरत पड़ने पर सबसे पुराने टूल परिणामों को हटा देती है, ताकि कोई भी जानकारी हमेशा के लिए न खोए।",
        "เมื่อวานนี้ฝนตกหนักมาก ถนนหน้าบ้านมีน้ำท่วมขัง เด็ก ๆ ออกมาเล่นน้ำกันอย่างสนุกสนาน "
        "ตอนเย็นแม่ทำต้มยำกุ้งให้ทุกคนกิน แล้วเราก็นั่งคุยกันจนดึก",
        "Hôm nay trời đẹp nên chúng tôi đi dạo quanh hồ. Buổi trưa cả nhóm ăn phở ở một quán nhỏ gần chợ, "
        "sau đó ngồi uống cà phê sữa đá và nói chuyện về kế hoạch cho chuyến đi sắp tới.",
        "Great job on the release 🎉🎉 The new dashboard looks amazing 😍 — can't wait to try it 🚀👍 "
        "Let's celebrate on Friday 🍕🍻 (bring your own 🎸 if you want to play!) ✅ done ❤️",
    ),
    "rtl": (
        "تقوم مكتبتنا بإدارة نافذة السياق لنماذج اللغة الكبيرة. قبل كل استدعاء للنموذج، تتحقق من حجم سجل المحادثة، "
        "وإذا تجاوز الحد المسموح به، فإنها تزيل أولاً نتائج الأدوات القديمة، ثم تلجأ إلى التلخيص عند الضرورة فقط.",
        "ذهبنا يوم الجمعة إلى السوق القديم في وسط المدينة. كانت الشوارع مزدحمة بالناس، ورائحة القهوة والتوابل "
        "تملأ المكان. اشترينا بعض التمر والخبز الطازج، ثم جلسنا في مقهى صغير نشرب الشاي ونتحدث عن خطط الصيف.",
        "تنبيه: لم يتم العثور على ملف الإعدادات في المسار المحدد. يرجى التأكد من صحة المسار ومن أن لديك صلاحية "
        "القراءة، ثم أعد تشغيل البرنامج. إذا استمرت المشكلة، تواصل مع فريق الدعم الفني وأرفق سجل الأخطاء.",
        "هدف این پروژه ساختن ابزاری است که تاریخچهٔ گفتگو را در محدودهٔ پنجرهٔ مدل نگه دارد، بدون اینکه چیزی "
        "برای همیشه از دست برود. هر محتوایی که از متن حذف می‌شود، در یک مخزن ذخیره شده و قابل بازیابی است.",
        "הספרייה שלנו מנהלת את חלון ההקשר של מודל השפה. לפני כל קריאה היא בודקת את גודל ההיסטוריה, ואם "
        "צריך, היא מסירה קודם את תוצאות הכלים הישנות ביותר ורק אחר כך מסכמת את השיחה.",
    ),
}


def _non_latin() -> Iterator[tuple[str, str]]:
    for cls, texts in NON_LATIN.items():
        yield from ((cls, t) for t in texts)
        # Longer samples too: a few paragraphs together, as a document would have them.
        yield cls, "\n\n".join(texts)
        yield cls, "\n\n".join(reversed(texts))


def load_samples(data: Path, per_class: int = 300, seed: int = 0) -> list[Sample]:
    """Every sample, deduplicated, cut to MAX_CHARS, at most ``per_class`` per class."""
    sources: list[tuple[str, Iterable[tuple[str, str]]]] = []
    for path in sorted((data / "claude-code").rglob("*.jsonl")):
        sources.append((f"claude-code/{path.name}", _cc_texts(path)))
    for path in sorted((data / "mini-swe-agent").glob("*.traj.json")):
        sources.append((f"mini-swe-agent/{path.name}", _swe_texts(path)))
    locomo = data / "locomo" / "locomo-dev.json"
    if locomo.exists():
        sources.append(("locomo", _locomo_texts(locomo)))
    sources.append(("synthetic", _blobs()))
    sources.append(("hand-written", _non_latin()))

    seen: set[str] = set()
    by_class: dict[str, list[Sample]] = {}
    for source, pairs in sources:
        for cls, text in pairs:
            text = text[:MAX_CHARS]
            if len(text) < MIN_CHARS:
                continue
            key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
            if key in seen:
                continue
            seen.add(key)
            by_class.setdefault(cls, []).append(Sample(cls, source, text))
    rng = random.Random(seed)
    out: list[Sample] = []
    for cls in sorted(by_class):
        items = by_class[cls]
        out.extend(rng.sample(items, per_class) if len(items) > per_class else items)
    return out


# --- measuring --------------------------------------------------------------------------


def _stats(errors: list[float]) -> dict[str, float]:
    return {
        "mean_signed_pct": round(100 * sum(errors) / len(errors), 1),
        "mean_abs_pct": round(100 * sum(abs(e) for e in errors) / len(errors), 1),
        "worst_under_pct": round(100 * min(0.0, min(errors)), 1),
        "worst_over_pct": round(100 * max(0.0, max(errors)), 1),
    }


def measure(samples: list[Sample], encoding: Any, estimator: ContentAwareEstimator) -> dict[str, Any]:
    rows: dict[str, dict[str, list[float]]] = {}
    totals = {"o200k": 0, "chars4": 0, "estimate": 0}
    for s in samples:
        truth = len(encoding.encode_ordinary(s.text))
        if truth == 0:
            continue
        c4 = (len(s.text) + 3) // 4
        est = estimator.count_text(s.text)
        totals["o200k"] += truth
        totals["chars4"] += c4
        totals["estimate"] += est
        row = rows.setdefault(s.cls, {"chars4": [], "estimate": []})
        row["chars4"].append((c4 - truth) / truth)
        row["estimate"].append((est - truth) / truth)

    classes = {
        cls: {"samples": len(r["estimate"]), "chars4": _stats(r["chars4"]), "estimate": _stats(r["estimate"])}
        for cls, r in sorted(rows.items())
    }
    every = {k: [e for r in rows.values() for e in r[k]] for k in ("chars4", "estimate")}
    overall = {
        "samples": len(every["estimate"]),
        "chars4": _stats(every["chars4"]),
        "estimate": _stats(every["estimate"]),
        "class_mean_abs_pct": {
            k: round(sum(c[k]["mean_abs_pct"] for c in classes.values()) / len(classes), 1)
            for k in ("chars4", "estimate")
        },
        "total_tokens": totals,
    }
    return {"classes": classes, "overall": overall}


def throughput(samples: list[Sample], encoding: Any, estimator: ContentAwareEstimator, rounds: int = 3) -> dict[str, float]:
    """MB/s (UTF-8) of the estimator and of tiktoken over the same texts, best of ``rounds``."""
    texts = [s.text for s in samples]
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6

    def best(fn: Any) -> float:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for t in texts:
                fn(t)
            times.append(time.perf_counter() - t0)
        return size / min(times)

    est = best(estimator.count_text)
    tik = best(encoding.encode_ordinary)
    return {"megabytes": round(size, 2), "estimate_mb_s": round(est, 1), "tiktoken_mb_s": round(tik, 1),
            "speedup": round(est / tik, 1)}


# --- next-call estimate against recorded Claude Code usage ------------------------------------


def calibration(data: Path, estimator: ContentAwareEstimator) -> dict[str, Any] | None:
    """Predict each recorded call's context size (input + cache writes + cache reads) before it
    is made, from the messages of its request, and compare with what Claude reported.

    Two metrics, every predictor in the same run:

    - ``whole``: the error on the whole next request.  A calibrated estimate reuses the
      previous call's reported size, which is most of the request, so even a counter that
      counts every text as zero scores well here: this metric says little about a counter;
    - ``appended``: the error on what was appended since the previous call (the tokens the
      estimator actually decides): predicted appended tokens against the recorded delta
      (this call's reported size minus the previous one's), over the calls that extend the
      previous request.  Per call ``(predicted − delta) / delta`` on calls whose delta is
      positive, and a token-weighted figure ``Σ|predicted − delta| / Σ delta`` over all.

    Predictors of the appended part: ``zero`` (counts nothing), ``chars/4``, lossless's
    estimate, and lossless's estimate × the calibration ratio (reported / estimated of the
    previous request, what ``Calibrator(scale_appended=True)`` adds).

    The files lack the system prompt and tool schemas, so the uncalibrated whole-request
    modes get the same overhead: the first call's reported size minus our estimate of its
    messages (what a pipeline would know by counting its own system prompt and tools).
    After a compaction recorded in the file the request no longer extends the previous one;
    those calls are reported apart (ratio-scaled raw estimate)."""
    try:
        from lossless.dialects.claude_code import read_session
    except ImportError:
        return None

    def chars4(m: Message) -> int:
        return sum((len(block_text(b)) + 3) // 4 for b in m.content)

    def size(usage: Any) -> int:
        return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))

    whole: dict[str, list[float]] = {"chars/4 + overhead": [], "estimate + overhead": [],
                                     "reported + appended × 0 (zero counter)": [],
                                     "reported + appended chars/4": [],
                                     "reported + appended estimate": [],
                                     "reported + appended estimate × ratio": [],
                                     "after a compaction (scaled)": []}
    appended: dict[str, list[tuple[int, int]]] = {"zero": [], "chars/4": [], "estimate": [], "estimate × ratio": []}
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        session = read_session(path)
        calls = [c for c in session.calls if c.usage and size(c.usage) > 0]
        if len(calls) < 2:
            continue
        plain, scaled = Calibrator(estimator), Calibrator(estimator, scale_appended=True)
        first = session.messages[session.request_start(calls[0]) : calls[0].index]
        base = size(calls[0].usage)
        overhead_est = base - sum(estimator.count_message(m) for m in first)
        overhead_c4 = base - sum(chars4(m) for m in first)
        for prev, call in zip(calls, calls[1:]):
            before = session.messages[session.request_start(prev) : prev.index]
            request = session.messages[session.request_start(call) : call.index]
            truth, reported = size(call.usage), size(prev.usage)
            for cal in (plain, scaled):
                cal.observe(reported, before, overhead=overhead_est)
            whole["chars/4 + overhead"].append((overhead_c4 + sum(chars4(m) for m in request) - truth) / truth)
            raw = overhead_est + sum(estimator.count_message(m) for m in request)
            whole["estimate + overhead"].append((raw - truth) / truth)
            got, by_ratio = plain.explain(request, overhead_est), scaled.explain(request, overhead_est)
            if got.mode != "calibrated":
                whole["after a compaction (scaled)"].append((by_ratio.tokens - truth) / truth)
                continue
            new = request[len(before):]
            predicted = {"zero": 0, "chars/4": sum(chars4(m) for m in new), "estimate": got.appended,
                         "estimate × ratio": by_ratio.tokens - reported}
            delta = truth - reported
            for name, label in (("zero", "reported + appended × 0 (zero counter)"),
                                ("chars/4", "reported + appended chars/4"),
                                ("estimate", "reported + appended estimate"),
                                ("estimate × ratio", "reported + appended estimate × ratio")):
                whole[label].append((reported + predicted[name] - truth) / truth)
                appended[name].append((predicted[name], delta))
    out: dict[str, Any] = {"whole": {mode: {"calls": len(e), **_stats(e)} for mode, e in whole.items() if e}}
    out["appended"] = {name: _appended_stats(pairs) for name, pairs in appended.items() if pairs}
    return out


def _appended_stats(pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """Error of predicted appended tokens against the recorded delta."""
    positive = [(p - d) / d for p, d in pairs if d > 0]
    ordered = sorted(abs(e) for e in positive)
    total = sum(d for _, d in pairs)
    return {
        "calls": len(pairs),
        "positive_delta_calls": len(positive),
        "recorded_tokens": total,
        "predicted_tokens": sum(p for p, _ in pairs),
        **_stats(positive),
        "median_abs_pct": round(100 * ordered[len(ordered) // 2], 1),
        "weighted_abs_pct": round(100 * sum(abs(p - d) for p, d in pairs) / total, 1) if total > 0 else 0.0,
    }


# --- output -----------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    head = f"{'class':<16}{'n':>5} | {'chars/4: signed':>15} {'abs':>6} {'worst':>7} | {'estimate: signed':>16} {'abs':>6} {'worst':>7}"
    lines = ["token estimate vs o200k_base (error % = (estimate − o200k)/o200k; worst = worst under-estimate)", "",
             head, "-" * len(head)]

    def fmt(name: str, n: int, a: dict[str, float], b: dict[str, float]) -> str:
        return (f"{name:<16}{n:>5} | {a['mean_signed_pct']:>+15.1f} {a['mean_abs_pct']:>6.1f} {a['worst_under_pct']:>7.1f}"
                f" | {b['mean_signed_pct']:>+16.1f} {b['mean_abs_pct']:>6.1f} {b['worst_under_pct']:>7.1f}")

    for cls, row in result["classes"].items():
        lines.append(fmt(cls, row["samples"], row["chars4"], row["estimate"]))
    ov = result["overall"]
    lines += ["-" * len(head), fmt("all samples", ov["samples"], ov["chars4"], ov["estimate"])]
    cm = ov["class_mean_abs_pct"]
    tt = ov["total_tokens"]
    lines += [
        f"mean over classes of mean |error|: chars/4 {cm['chars4']:.1f} %, estimate {cm['estimate']:.1f} %",
        f"total tokens: o200k {tt['o200k']:,}  chars/4 {tt['chars4']:,} ({100 * (tt['chars4'] / tt['o200k'] - 1):+.1f} %)"
        f"  estimate {tt['estimate']:,} ({100 * (tt['estimate'] / tt['o200k'] - 1):+.1f} %)",
    ]
    cal = result.get("calibration")
    if cal:
        lines += ["", "next-call context size vs Claude's reported usage (Claude Code sessions): whole request",
                  f"{'mode':<40}{'calls':>6} {'signed':>8} {'abs':>6} {'worst':>7}"]
        for mode, st in cal["whole"].items():
            lines.append(f"{mode:<40}{st['calls']:>6} {st['mean_signed_pct']:>+8.1f} {st['mean_abs_pct']:>6.1f}"
                         f" {st['worst_under_pct']:>7.1f}")
        ap = cal["appended"]
        if ap:
            any_ = next(iter(ap.values()))
            lines += ["", f"what was appended since the previous call: predicted vs recorded delta "
                      f"({any_['calls']} calls, {any_['recorded_tokens']:,} recorded tokens; per-call errors on the "
                      f"{any_['positive_delta_calls']} calls whose delta is positive)",
                      f"{'predictor':<20}{'predicted':>11} {'signed':>8} {'abs':>6} {'median':>7} {'worst':>7} {'weighted':>9}"]
            for name, st in ap.items():
                lines.append(f"{name:<20}{st['predicted_tokens']:>11,} {st['mean_signed_pct']:>+8.1f} "
                             f"{st['mean_abs_pct']:>6.1f} {st['median_abs_pct']:>7.1f} {st['worst_under_pct']:>7.1f} "
                             f"{st['weighted_abs_pct']:>9.1f}")
    tp = result.get("throughput")
    if tp:
        lines.append(f"throughput over {tp['megabytes']} MB: estimate {tp['estimate_mb_s']} MB/s, "
                     f"tiktoken o200k {tp['tiktoken_mb_s']} MB/s → {tp['speedup']}× faster")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--per-class", type=int, default=300, help="samples per class at most (default 300)")
    args = parser.parse_args(argv)

    cache = args.data / "tokenizers" / "tiktoken-cache"
    if not cache.is_dir():
        print(f"no tokenizer cache at {cache}; pass --data DIR", file=sys.stderr)
        return 2
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache.resolve())
    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed: pip install 'lossless[tokenizers]'", file=sys.stderr)
        return 2
    encoding = tiktoken.get_encoding("o200k_base")
    estimator = ContentAwareEstimator()
    samples = load_samples(args.data, per_class=args.per_class)
    result = measure(samples, encoding, estimator)
    result["estimator"] = estimator.name
    result["throughput"] = throughput(samples, encoding, estimator)
    result["calibration"] = calibration(args.data, estimator)
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
