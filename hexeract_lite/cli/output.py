"""What the commands print: aligned text tables, JSON objects and the ``inspect``
field list. A row the store could not decode is shown as ``malformed`` with the reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias, cast

from .._lazy import lazy_exports
from .._time import rfc3339

if TYPE_CHECKING:
    from ..migrate import MigrationReport
    from ..snapshot import MalformedSchedule, ScheduleSnapshot
    from ..store.stats import StoreStats

    Listed: TypeAlias = ScheduleSnapshot | MalformedSchedule
    """An item of a listing: a schedule, or a row the store could not decode."""

# The value classes are imported by the functions that show them: the plain ``list``
# command renders its rows without them.

LAST_ERROR_WIDTH = 60
"""How many characters of ``last_error`` the dead-letter text listing shows."""

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str | None, width: int | None = None) -> str:
    """``text`` on one line (control characters and whitespace runs as one space), cut
    to ``width`` with ``...``; ``-`` for None."""
    if text is None:
        return "-"
    flat = " ".join(_CONTROL_CHARS.sub(" ", text).split())
    if width is not None and len(flat) > width:
        flat = flat[: max(width - 3, 0)] + "..."
    return flat


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns separated by two spaces, under a header; a short row's last cell
    (a malformed row's reason) runs on to the end of the line."""
    widths = [len(h) for h in headers]
    for row in rows:
        aligned = row if len(row) == len(headers) else row[:-1]
        for i, cell in enumerate(aligned):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for line in (headers, *rows):
        cells = [cell.ljust(w) for cell, w in zip(line, widths, strict=False)]
        if len(line) < len(headers):
            cells[-1] = line[-1]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


MALFORMED = "malformed"
"""The status a listing shows for a row the store could not decode."""
MALFORMED_REASON_WIDTH = 200
"""How many characters of a malformed row's reason the text listings show."""


def _malformed_row(item: MalformedSchedule) -> tuple[str, str, str]:
    return (one_line(item.raw_id), MALFORMED, one_line(item.reason, MALFORMED_REASON_WIDTH))


def seconds(delta: timedelta | None) -> str:
    """A duration in seconds, to the millisecond (``1.500s``); ``-`` for None."""
    return "-" if delta is None else f"{delta.total_seconds():.3f}s"


def ts(value: datetime | None) -> str:
    """An instant as RFC 3339 text; ``-`` for None."""
    return rfc3339(value) or "-"


def local_ts(value: datetime, zone: str) -> str:
    """An instant on ``zone``'s wall clock: ``2026-12-02 08:30:00 CET``."""
    from ..zoned import load_zone

    local = value.astimezone(load_zone(zone))
    ms = f".{local.microsecond // 1000:03d}" if local.microsecond else ""
    return f"{local:%Y-%m-%d %H:%M:%S}{ms} {local.tzname()}"


def local_iso(value: datetime, zone: str) -> str:
    """An instant on ``zone``'s wall clock as RFC 3339 with its offset, to the
    millisecond: ``2026-12-02T08:30:00.000+01:00``."""
    from ..zoned import load_zone

    return value.astimezone(load_zone(zone)).isoformat(timespec="milliseconds")


def format_upcoming(instants: Sequence[datetime], zone: str) -> str:
    """The text of ``scheduler next``: each firing in UTC and on ``zone``'s wall clock."""
    return "\n".join(f"{ts(at)}  {local_ts(at, zone)}" for at in instants)


def _listed() -> object:
    from ..snapshot import MalformedSchedule, ScheduleSnapshot

    return ScheduleSnapshot | MalformedSchedule


__getattr__, __dir__, _ = lazy_exports(__name__, globals(), {}, {"Listed": _listed})

PENDING_HEADERS = (
    "SCHEDULE ID",
    "STATUS",
    "SCHEDULED FOR",
    "ATTEMPTS",
    "TRIGGER",
    "EVENT TYPE",
    "NAME",
)
"""The columns of the ``scheduler list`` text; :data:`LOCAL_HEADER` follows when a
listed schedule reads its rule on a zone other than UTC."""
LOCAL_HEADER = "LOCAL TIME"


def pending_cells(
    schedule_id: str,
    status: str,
    scheduled_for: datetime,
    attempts: object,
    max_attempts: object,
    trigger: str,
    event_type: str,
    name: str | None,
    zone: str,
) -> tuple[str, ...]:
    """One schedule's row of the ``scheduler list`` text, its last cell the scheduled
    instant on ``zone``'s wall clock (``-`` on UTC)."""
    return (
        schedule_id,
        status,
        ts(scheduled_for),
        f"{attempts}/{max_attempts}",
        one_line(trigger),
        one_line(event_type),
        one_line(name),
        "-" if zone == "UTC" else local_ts(scheduled_for, zone),
    )


def pending_table(rows: Sequence[Sequence[str]]) -> str:
    """The text of ``scheduler list`` from its rows (the local-time column only when a
    row has one)."""
    if not rows:
        return "no pending schedules"
    full = len(PENDING_HEADERS) + 1  # a malformed row is shorter
    if any(len(row) == full and row[-1] != "-" for row in rows):
        return format_table((*PENDING_HEADERS, LOCAL_HEADER), rows)
    return format_table(PENDING_HEADERS, [row[:-1] if len(row) == full else row for row in rows])


def _cells(s: ScheduleSnapshot) -> tuple[str, ...]:
    return pending_cells(
        str(s.schedule_id),
        s.status.value,
        s.scheduled_for,
        s.attempts,
        s.max_attempts,
        s.trigger.label(),
        s.event_type,
        s.name,
        s.trigger.zone,
    )


def format_pending(snapshots: Sequence[Listed]) -> str:
    """The text of ``scheduler list``."""
    from ..snapshot import MalformedSchedule

    return pending_table(
        [_malformed_row(s) if isinstance(s, MalformedSchedule) else _cells(s) for s in snapshots]
    )


def format_dead_letter(snapshots: Sequence[Listed]) -> str:
    """The text of ``scheduler dead-letter list``: ``list``'s columns but the name, then
    when and why it was dead-lettered."""
    if not snapshots:
        return "no dead-lettered schedules"
    from ..settle import error_summary  # the retry policy and config: not for other listings
    from ..snapshot import MalformedSchedule

    return format_table(
        (*PENDING_HEADERS[:-1], "DEAD-LETTERED AT", "LAST ERROR"),
        [
            _malformed_row(s)
            if isinstance(s, MalformedSchedule)
            else (
                *_cells(s)[:-2],
                ts(s.dead_lettered_at),
                one_line(error_summary(s.last_error), LAST_ERROR_WIDTH),
            )
            for s in snapshots
        ],
    )


def snapshot_json(
    snapshot: Listed, *, detail: bool = False, payload: bool = False
) -> dict[str, object]:
    """A listing's JSON object; with ``payload`` also the payload, with ``detail``
    (``inspect``) the payload and the occurrence id too."""
    from ..snapshot import MalformedSchedule

    if isinstance(snapshot, MalformedSchedule):
        return snapshot.to_json_dict()
    data = snapshot.to_json_dict()
    data.update(_rule_fields(snapshot))
    if "tz" in data:  # the text has its own line for it: ``scheduled for (local)``
        data["scheduled_for_local"] = local_iso(snapshot.scheduled_for, str(data["tz"]))
    if detail:
        data["occurrence_id"] = str(_occurrence_id(snapshot))
        data["snoozes"] = snapshot.snoozes
        data["abort_requested"] = snapshot.abort_requested
    if detail or payload:
        from .._json import strict_loads

        try:
            data["payload"] = strict_loads(snapshot.payload_json)
        except ValueError:  # a hand-edited row (not strict JSON): shown as stored text
            data["payload"] = snapshot.payload_json
    return data


def _rule_fields(snapshot: ScheduleSnapshot) -> dict[str, str]:
    """The optional fields a schedule has set, by their JSON names."""
    from ..interval import format_duration

    trigger = snapshot.trigger
    expr, interval = trigger.cron_expression, trigger.interval
    fields: dict[str, str] = {}
    if expr is not None and expr.tz != "UTC":
        fields["tz"] = expr.tz
    if interval is not None:
        fields["every"] = format_duration(interval.every)
        fields["anchor"] = ts(interval.anchor)
    if snapshot.misfire_grace is not None:
        fields["misfire_grace"] = format_duration(snapshot.misfire_grace)
    if snapshot.backfill_until is not None:
        fields["backfill_until"] = ts(snapshot.backfill_until)
    if snapshot.pause_note is not None:
        fields["pause_note"] = snapshot.pause_note
    if snapshot.next_after_lease is not None:
        fields["next_after_lease"] = ts(snapshot.next_after_lease)
    return fields


_FIELD_NAMES = {
    "tz": "time zone",
    "misfire_grace": "misfire grace",
    "backfill_until": "backfilling until",
    "pause_note": "pause note",
    "next_after_lease": "then moves to",
}


def _occurrence_id(snapshot: ScheduleSnapshot) -> object:
    from ..occurrence import OccurrenceId

    return OccurrenceId.derive(snapshot.schedule_id, snapshot.occurrence_at)


def policy_lines(snapshot: ScheduleSnapshot) -> list[tuple[str, str]]:
    """``inspect``'s (and the console's) lines for a policy; none without one."""
    from ..interval import format_duration

    policy = snapshot.policy
    if policy is None:
        return []
    lines = []
    if policy.end_at is not None:
        lines.append(("end", ts(policy.end_at)))
    firings = str(snapshot.firings)
    if policy.max_firings is not None:
        firings += f" of at most {policy.max_firings} ({snapshot.firings_left} left)"
    lines.append(("firings", firings))
    if policy.jitter is not None:
        lines.append(
            (
                "jitter",
                f"up to {format_duration(policy.jitter)}"
                f" (this firing: +{format_duration(snapshot.jitter_offset)}, rule instant"
                f" {ts(snapshot.occurrence_at)})",
            )
        )
    catch_up: str = policy.catch_up
    if catch_up == "all":
        catch_up += f" (at most {policy.catch_up_limit})"
    lines.append(("catch-up", catch_up))
    return lines


def format_inspect(snapshot: ScheduleSnapshot) -> str:
    """The text of ``scheduler inspect``: ``field  value`` lines, then any traceback."""
    from ..settle import error_summary

    s = snapshot
    zone = s.trigger.zone
    fields = [
        ("schedule id", str(s.schedule_id)),
        ("name", one_line(s.name)),
        ("status", s.status.value),
        ("event type", one_line(s.event_type)),
        ("target", one_line(s.target.label())),
        ("trigger", one_line(s.trigger.label())),
        *((_FIELD_NAMES.get(name, name), value) for name, value in _rule_fields(s).items()),
        *policy_lines(s),
        ("scheduled for", ts(s.scheduled_for)),
        *([("scheduled for (local)", local_ts(s.scheduled_for, zone))] if zone != "UTC" else []),
        ("occurrence id", str(_occurrence_id(s))),
        ("attempts", f"{s.attempts}/{s.max_attempts}"),
        *([("snoozes", str(s.snoozes))] if s.snoozes else []),
        ("leased until", ts(s.leased_until)),
        *([("abort requested", s.abort_requested)] if s.abort_requested else []),
        (
            "error before delivery" if s.delivered_at is not None else "last error",
            one_line(error_summary(s.last_error)),
        ),
        ("created at", ts(s.created_at)),
        ("delivered at", ts(s.delivered_at)),
        ("cancelled at", ts(s.cancelled_at)),
        ("dead-lettered at", ts(s.dead_lettered_at)),
        ("payload", s.payload_json),
    ]
    text = _field_lines(fields)
    story = (s.last_error or "").split("\n")[1:]
    if story:  # the traceback kept with the error, each line cleaned of control characters
        text += "\ntraceback\n" + "\n".join("  " + _CONTROL_CHARS.sub(" ", line) for line in story)
    return text


def format_migration(report: MigrationReport) -> str:
    """The counts line of ``scheduler migrate``."""
    return (
        f"read {report.read}, copied {report.copied},"
        f" skipped {report.skipped} (already in the destination)"
    )


def format_size(value: int | None) -> str:
    """A size in bytes as B, KiB, MiB or GiB; ``-`` for None."""
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return f"{value:.1f} GiB"


def format_stats(stats: StoreStats) -> str:
    """The text of ``scheduler stats``: one ``field  value`` line per figure."""
    lag = stats.oldest_due_lag
    counts = cast("dict[str, int]", stats.as_json()["counts"])  # by status, and the total
    fields = [
        *((name, str(n)) for name, n in counts.items()),
        ("due, not claimed", str(stats.due)),
        ("in flight", str(stats.in_flight)),
        ("in retry backoff", str(stats.in_backoff)),
        ("oldest due lag", "-" if lag is None else f"{lag.total_seconds():.3f} s"),
        ("next wake-up", ts(stats.next_wakeup)),
        ("file size", format_size(stats.file_bytes)),
        ("WAL size", format_size(stats.wal_bytes)),
    ]
    return _field_lines(fields)


def _field_lines(fields: Sequence[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in fields)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in fields)
