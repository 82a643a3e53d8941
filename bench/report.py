"""The targets, the printed table and the JSON document of one benchmark run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench import cli_verbs, durable, serve_load, writers
from bench.harness import NOT_MEASURED, Section, Target, absent, check


def ratio_target(sections: Mapping[str, Section], key: str, label: str, text: str,
                 limit: float, *, at_least: bool, also: bool = True,
                 detail: str = "") -> Target:
    section = sections.get(key)
    if section is None:
        return absent(text, NOT_MEASURED, "section skipped")
    if section.status is not None:
        return absent(text, section.status)
    if not any(r.label == label for r in section.ratios):
        return absent(text, NOT_MEASURED, "; ".join(section.notes))
    return check(text, section.ratio(label).median, limit, at_least=at_least, also=also,
                 detail=detail)


def _floor(sections: Mapping[str, Section], key: str, label: str, name: str) -> str:
    """The floor beside a target, as its detail: `name` and the ratio `label`, if measured."""
    section = sections.get(key)
    found = [r for r in section.ratios if r.label == label] if section is not None else []
    return f"{name} {found[0].median:.2f}x" if found else ""


def targets(sections: Mapping[str, Section]) -> list[Target]:
    floor = "the floor, waypost's SQL alone:"
    found = [
        ratio_target(sections, "durable", durable.VS_LANGGRAPH,
                     "durable transition >= 1.0x LangGraph SqliteSaver.put", 1.0,
                     at_least=True, detail=_floor(sections, "durable",
                                                  durable.SQL_VS_LANGGRAPH, floor)),
        ratio_target(sections, "durable", durable.VS_RAW,
                     "durable transition >= 0.75x raw sqlite3 insert+upsert", 0.75,
                     at_least=True, detail=_floor(sections, "durable", durable.SQL_VS_RAW,
                                                  floor)),
        ratio_target(sections, "cli", cli_verbs.HEARTBEAT_RATIO,
                     "`waypost heartbeat` <= 3.0x `python -c pass`", 3.0, at_least=False,
                     detail=_floor(sections, "cli", cli_verbs.FLOOR_RATIO,
                                   "the dependency floor (msgspec, sqlite3):")),
    ]
    errors = sections["writers"].counts.get(f"errors, {writers.name(16)}", 0) \
        if "writers" in sections else 0
    found.append(ratio_target(sections, "writers", writers.ratio_label(16),
                              "16 writers: zero errors, aggregate >= 0.7x one writer", 0.7,
                              at_least=True, also=errors == 0, detail=f"{errors} errors"))
    if "serve" not in sections:  # the section checks its own: named here when skipped
        found += [absent(text, NOT_MEASURED, "section skipped") for text in serve_load.TARGETS]
    extra = [t for s in sections.values() for t in s.targets]
    return found + extra


# --- the table ------------------------------------------------------------------------


def _number(value: float, unit: str) -> str:
    if unit == "ops/s":
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def table(sections: Sequence[Section], found: Sequence[Target], header: str) -> str:
    width = 58
    lines = [header, ""]
    for section in sections:
        better = "higher is better" if section.higher_is_better else "lower is better"
        lines.append(f"{section.title}  [{section.unit}, {better}]")
        if section.status is not None:
            lines.append(f"  {section.status}")
        else:
            lines.append(f"  {'':{width}} {'median':>10} {'min - max':>21}")
            for figure in section.figures:
                spread = (f"{_number(figure.low, section.unit)} - "
                          f"{_number(figure.high, section.unit)}")
                note = f"  ({figure.note})" if figure.note else ""
                lines.append(f"  {figure.name:{width}} "
                             f"{_number(figure.median, section.unit):>10} {spread:>21}{note}")
            for ratio in section.ratios:
                spread = f"{ratio.low:.2f} - {ratio.high:.2f}"
                lines.append(f"  {'ratio ' + ratio.label:{width}} {ratio.median:>9.2f}x "
                             f"{spread:>21}")
        lines.extend(f"  · {note}" for note in section.notes)
        lines.append("")
    lines.append("Targets")
    lines.extend(f"  {t.status:<14} {t.text}" + (f"  ({t.detail})" if t.detail else "")
                 for t in found)
    return "\n".join(lines) + "\n"


def document(sections: Sequence[Section], found: Sequence[Target],
             meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"meta": dict(meta), "sections": [s.as_dict() for s in sections],
            "targets": [t.as_dict() for t in found]}
