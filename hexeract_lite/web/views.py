"""What each console page shows, read from a store (every read bounded): plain dicts
and lists the templates draw, with the chart's and the timeline's geometry.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from .._json import strict_loads
from ..cli.output import local_ts, policy_lines, seconds, ts
from ..control import SchedulerControl
from ..errors import InvalidArgument
from ..runlog import RunRecord
from ..settle import error_summary
from ..snapshot import MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from ..upcoming import upcoming_firings
from .history import NO_RUNS_YET, RUNS_UNAVAILABLE, hourly_counts
from .words import trigger_words

if TYPE_CHECKING:
    from ..store.base import ScheduleStore

PAGE_SIZE = 50
"""Rows per page of the schedules and dead-letter listings."""
TIMELINE_SCAN = 10_000
"""The most pending and paused rows the timeline reads, looking for pending ones."""
TIMELINE_SCHEDULES = 40
"""How many of the soonest pending schedules the timeline draws (one lane each)."""
TIMELINE_PER_SCHEDULE = 200
"""How many firings of one schedule the timeline draws at most (the rest are counted)."""
WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}
"""The timeline's windows, by the name its ``window`` parameter takes."""

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


Params = Mapping[str, str]
"""A request's query and path parameters, by name."""
View = Callable[["ScheduleStore", Params], dict[str, Any]]
"""A page: its template's context from the store and the request's parameters."""


def schedule_uuid(text: str) -> uuid.UUID:
    """A schedule id from a URL; else :class:`InvalidArgument`."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise InvalidArgument(f"not a schedule id: {text!r:.80}") from None


def shown(text: object) -> str:
    """``text`` as the console prints it: control, zero-width and bidirectional
    formatting characters as a visible ``⟨U+202E⟩``; None as ``-`` (not HTML-escaped)."""
    if text is None:
        return "-"
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", str(text))


def _when(at: datetime | None, zone: str) -> dict[str, str]:
    """An instant in UTC and on ``zone``'s wall clock (``-`` for None)."""
    if at is None:
        return {"utc": "-", "local": "-", "iso": ""}
    return {"utc": ts(at), "local": local_ts(at, zone), "iso": ts(at)}


def _run_row(run: RunRecord) -> dict[str, object]:
    """A run as the schedule page's runs table shows it."""
    return {
        "finished": ts(run.finished),
        "scheduled_for": ts(run.scheduled_for),
        "attempt": run.attempt,
        "outcome": run.outcome.value,
        "started": ts(run.started),
        "lag": seconds(run.lag),
        "duration": seconds(run.duration),
        "worker": f"{run.host}:{run.pid}",
        "error": run.error,
    }


def _lag(delta: timedelta | None) -> str:
    if delta is None:
        return "-"
    whole = int(delta.total_seconds())
    if whole < 60:
        return f"{whole}s"
    minutes, s = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {s}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h {m}m" if hours < 48 else f"{hours // 24}d {hours % 24}h"


# -- overview -------------------------------------------------------------------------

CHART_WIDTH = 760
CHART_HEIGHT = 180
_CHART_LEFT = 40
_CHART_BOTTOM = 24


def _chart(store: ScheduleStore, now: datetime) -> dict[str, Any]:
    """The per-hour chart of the last 24 hours: bars, axis ticks and the caption."""
    counts = hourly_counts(store, now - timedelta(hours=23), now)
    delivered = counts.delivered or [0] * len(counts.hours)
    top = max([*delivered, *counts.failed, 1])
    plot_w = CHART_WIDTH - _CHART_LEFT - 8
    plot_h = CHART_HEIGHT - _CHART_BOTTOM - 10
    slot = plot_w / len(counts.hours)
    bars = []
    for i, hour in enumerate(counts.hours):
        x = _CHART_LEFT + i * slot
        for j, (kind, n) in enumerate((("delivered", delivered[i]), ("failed", counts.failed[i]))):
            if kind == "delivered" and counts.delivered is None:
                continue
            h = plot_h * n / top
            bars.append(
                {
                    "kind": kind,
                    "x": round(x + 2 + j * (slot - 4) / 2, 1),
                    "w": round((slot - 4) / 2, 1),
                    "y": round(10 + plot_h - h, 1),
                    "h": round(h, 1),
                    "title": f"{hour:%H}:00 UTC: {n} {kind}",
                }
            )
    ticks = [
        {"x": round(_CHART_LEFT + i * slot + slot / 2, 1), "label": f"{hour:%H}:00"}
        for i, hour in enumerate(counts.hours)
        if hour.hour % 3 == 0
    ]
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "bars": bars,
        "ticks": ticks,
        "top": top,
        "axis_y": CHART_HEIGHT - _CHART_BOTTOM,
        "left": _CHART_LEFT,
        "total_delivered": None if counts.delivered is None else sum(counts.delivered),
        "total_failed": sum(counts.failed),
        "capped": counts.capped,
        "source": counts.source,
        "failed_label": "dead-lettered" if counts.delivered is None else "failed",
    }


def overview_page(store: ScheduleStore, params: Params) -> dict[str, Any]:
    """Counts by status, due now, in flight, in backoff, the oldest lag, the chart."""
    stats = store.stats()
    return {
        "stats": stats,
        "counts": list(cast("dict[str, int]", stats.as_json()["counts"]).items()),
        "lag": _lag(stats.oldest_due_lag),
        "next_wakeup": ts(stats.next_wakeup),
        "chart": _chart(store, stats.at),
        "now": ts(stats.at),
    }


# -- schedules ------------------------------------------------------------------------


def _malformed(item: MalformedSchedule) -> dict[str, Any]:
    return {"malformed": True, "id": item.raw_id, "reason": item.reason}


def _row(item: ScheduleSnapshot | MalformedSchedule, now: datetime) -> dict[str, Any]:
    if isinstance(item, MalformedSchedule):
        return _malformed(item)
    zone = item.trigger.zone
    nxt = upcoming_firings(item, now, 1)
    return {
        "malformed": False,
        "id": str(item.schedule_id),
        "name": item.name,
        "status": item.status.value,
        "event_type": item.event_type,
        "trigger": trigger_words(item.trigger),
        "attempts": f"{item.attempts}/{item.max_attempts}",
        "next": _when(nxt[0] if nxt else None, zone),
        "zone": zone,
    }


def schedules_page(store: ScheduleStore, params: Params) -> dict[str, Any]:
    """One page of ``list_schedules`` (schedule id order) under the filters ``status``,
    ``group`` (a name's part before its first dot) and ``name`` (which wins over
    ``group``), after the id ``after``."""
    filters = {k: params.get(k, "").strip() for k in ("status", "group", "name")}
    after = params.get("after") or None
    group = filters["group"]
    items = store.list_schedules(
        status=filters["status"] or None,
        name=filters["name"] or (f"{group}.*" if group else None),
        after=None if after is None else schedule_uuid(after),
        limit=PAGE_SIZE,
    )
    now = store.clock.now()
    last = items[-1].schedule_id if len(items) == PAGE_SIZE else None
    return {
        "rows": [_row(item, now) for item in items],
        "next_after": None if last is None else str(last),
        "now": ts(now),
        "filters": filters,
        "query": urllib.parse.urlencode({k: v for k, v in filters.items() if v}),
    }


# -- one schedule ---------------------------------------------------------------------


def _pretty(payload_json: str) -> str:
    try:
        return json.dumps(strict_loads(payload_json), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return payload_json


def schedule_page(store: ScheduleStore, params: Params) -> dict[str, Any]:
    """The schedule ``sid``: its fields, its trigger in words, its next 10 firings, its
    last error, its payload and its last 50 runs."""
    schedule_id = schedule_uuid(params["sid"])
    control = SchedulerControl(store)
    snap = control.inspect(schedule_id)
    zone = snap.trigger.zone
    firings = control.upcoming(schedule_id, count=10)
    runs = [_run_row(run) for run in store.runs(schedule_id, limit=50)]
    status = snap.status
    return {
        "s": snap,
        "id": str(snap.schedule_id),
        "status": status.value,
        "zone": zone,
        "words": trigger_words(snap.trigger),
        "label": snap.trigger.label(),
        "firings": [_when(at, zone) for at in firings],
        "payload": _pretty(snap.payload_json),
        "error_line": error_summary(snap.last_error),
        "policy": policy_lines(snap),
        "fields": [
            ("scheduled for", _when(snap.scheduled_for, zone)),
            ("backfilling until", _when(snap.backfill_until, zone)),
            ("created", _when(snap.created_at, zone)),
            ("leased until", _when(snap.leased_until, zone)),
            ("delivered", _when(snap.delivered_at, zone)),
            ("cancelled", _when(snap.cancelled_at, zone)),
            ("dead-lettered", _when(snap.dead_lettered_at, zone)),
        ],
        "runs": runs,
        "runs_note": None if runs else NO_RUNS_YET if store.keeps_runs else RUNS_UNAVAILABLE,
        "can": {
            "pause": status is ScheduleStatus.PENDING,
            "resume": status is ScheduleStatus.PAUSED,
            "cancel": not status.is_terminal,
            "run_now": status is ScheduleStatus.PENDING,
            "reschedule": not status.is_terminal,
            "replay": status is ScheduleStatus.DEAD_LETTERED,
        },
        "default_at": ts(store.clock.now() + timedelta(hours=1)),
    }


# -- dead letters ---------------------------------------------------------------------


def dead_letters_page(store: ScheduleStore, params: Params) -> dict[str, Any]:
    """The newest :data:`PAGE_SIZE` dead letters, most recently dead-lettered first
    (``more``: there may be older ones; the overview counts them all), and the count a
    replay-all redirected with (``replayed``)."""
    replayed = params.get("replayed", "")
    rows = [
        _malformed(item)
        if isinstance(item, MalformedSchedule)
        else {
            "malformed": False,
            "id": str(item.schedule_id),
            "name": item.name,
            "event_type": item.event_type,
            "attempts": f"{item.attempts}/{item.max_attempts}",
            "dead_lettered_at": ts(item.dead_lettered_at),
            "error": error_summary(item.last_error),
        }
        for item in store.list_dead_letter(PAGE_SIZE)
    ]
    return {
        "rows": rows,
        "more": len(rows) == PAGE_SIZE,
        "replayed": int(replayed) if replayed.isdigit() else None,
    }


# -- timeline -------------------------------------------------------------------------

TIMELINE_WIDTH = 960
_LABEL_W = 240
_LANE_H = 20
_TOP = 26


def _soonest_pending(store: ScheduleStore, end: datetime) -> list[ScheduleSnapshot]:
    """The soonest pending schedules due by ``end``, twice as many as the timeline draws if
    there are: reading on past paused ones that sort first, up to :data:`TIMELINE_SCAN` rows."""
    limit = TIMELINE_SCHEDULES * 2
    while True:
        items = store.list_pending(limit)
        found = [
            item
            for item in items
            if isinstance(item, ScheduleSnapshot)
            and item.status is ScheduleStatus.PENDING
            and item.scheduled_for <= end
        ]
        last = items[-1] if items else None
        past_end = isinstance(last, ScheduleSnapshot) and last.scheduled_for > end
        enough = len(found) >= TIMELINE_SCHEDULES * 2 or past_end
        if enough or len(items) < limit or limit >= TIMELINE_SCAN:
            return found
        limit = min(limit * 4, TIMELINE_SCAN)


def timeline_page(store: ScheduleStore, params: Params) -> dict[str, Any]:
    """The next firings of the soonest pending schedules over ``window`` (a key of
    :data:`WINDOWS`, default 24h) as SVG lanes: one per schedule, a mark per firing; past
    :data:`TIMELINE_PER_SCHEDULE` of them, a band from the last mark to the end."""
    window = params.get("window", "24h")
    if window not in WINDOWS:
        raise InvalidArgument(f"window must be one of {', '.join(WINDOWS)}")
    span = WINDOWS[window]
    now = store.clock.now()
    end = now + span
    plot_w = TIMELINE_WIDTH - _LABEL_W - 12
    lanes: list[dict[str, Any]] = []
    total = 0
    for item in _soonest_pending(store, end):
        if len(lanes) == TIMELINE_SCHEDULES:
            break
        firings = upcoming_firings(item, now, TIMELINE_PER_SCHEDULE + 1, end)
        if not firings:
            continue
        total += min(len(firings), TIMELINE_PER_SCHEDULE)
        y = _TOP + len(lanes) * _LANE_H
        xs = [round(_LABEL_W + plot_w * (at - now) / span, 1) for at in firings]
        marks = [
            {"x": x, "title": ts(at)}
            for x, at in zip(xs[:TIMELINE_PER_SCHEDULE], firings, strict=False)
        ]
        band = None
        if len(firings) > TIMELINE_PER_SCHEDULE:  # the rest drawn as a band to the end
            drawn = firings[:TIMELINE_PER_SCHEDULE]
            period = (drawn[-1] - drawn[0]) / (len(drawn) - 1)
            band = {
                "x": xs[TIMELINE_PER_SCHEDULE - 1],
                "w": round(_LABEL_W + plot_w - xs[TIMELINE_PER_SCHEDULE - 1], 1),
                "title": f"{TIMELINE_PER_SCHEDULE} firings drawn; more after"
                f" {ts(drawn[-1])}, about every {_lag(period)}",
            }
        lanes.append(
            {
                "id": str(item.schedule_id),
                "label": item.name or item.event_type,
                "y": y,
                "marks": marks,
                "band": band,
            }
        )
    daily = span > timedelta(hours=24)
    step, fmt = (timedelta(days=1), "%a %d %b") if daily else (timedelta(hours=3), "%H:%M")
    tick = now.replace(hour=0 if daily else now.hour, minute=0, second=0, microsecond=0)
    ticks = []
    while tick <= end:
        if tick >= now:
            ticks.append(
                {"x": round(_LABEL_W + plot_w * (tick - now) / span, 1), "label": f"{tick:{fmt}}"}
            )
        tick += step
    height = _TOP + max(len(lanes), 1) * _LANE_H + 10
    return {
        "window": window,
        "windows": list(WINDOWS),
        "lanes": lanes,
        "ticks": ticks,
        "total": total,
        "capped": any(lane["band"] for lane in lanes),
        "width": TIMELINE_WIDTH,
        "height": height,
        "label_w": _LABEL_W,
        "now": ts(now),
        "end": ts(end),
        "lane_h": _LANE_H,
        "limit": TIMELINE_SCHEDULES,
        "top": _TOP,
    }
