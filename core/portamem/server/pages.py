"""The inspector's HTML, built from escaped parts: every text that reaches a page goes through ``el``.

Memory text is untrusted (a user, a tool or a web page wrote it), so pages are never assembled
from format strings: ``el`` escapes each child that is not already ``Html`` and every attribute
value, and only ``el`` makes ``Html``. The CSP the inspector sends forbids inline script and
style besides, which is why score bars are ``<meter>`` elements rather than styled spans.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from ..lifecycle.audit import AuditFinding
from ..lifecycle.explain import Explanation
from ..records import MemoryRecord, MemoryType, SearchHit, Status, Turn, from_iso, to_iso, utcnow

__all__ = ["Html", "el", "link", "page", "login_page", "home_page", "timeline_page", "search_page",
           "explanation_page", "review_page", "error_page", "COMPONENTS", "decayed_weight"]

#: the score components a search hit's bars show, in this order
COMPONENTS = ("vector", "keyword", "entity", "recency", "importance")
#: searches an explanation lists at most, newest first (the count above says how many there were)
SHOWN_SEARCHES = 200
_VOID = frozenset({"input", "meta", "link", "br", "hr"})


class Html(str):
    """Markup that is already escaped; any other ``str`` is text."""


def _children(items: Iterable[Any]) -> Iterable[str]:
    for item in items:
        if item is None or item is False:
            continue
        if isinstance(item, Html):
            yield item
        elif isinstance(item, (str, int, float)):
            yield html.escape(str(item), quote=False)
        else:
            yield from _children(item)


def el(tag: str, attrs: Mapping[str, Any] | None = None, *children: Any) -> Html:
    """``<tag attrs>children</tag>`` with every text child and attribute value escaped (None/False drop out)."""
    parts = [tag]
    for name, value in (attrs or {}).items():
        if value is None or value is False:
            continue
        parts.append(name if value is True else f'{name}="{html.escape(str(value), quote=True)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in _VOID and not children:
        return Html(opening)
    return Html(opening + "".join(_children(children)) + f"</{tag}>")


def frag(*children: Any) -> Html:
    return Html("".join(_children(children)))


def href(path: str, **params: Any) -> str:
    """A URL of the inspector; the caller's values are query parameters, never path segments."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return path + ("?" + query if query else "")


def link(text: Any, path: str, **params: Any) -> Html:
    return el("a", {"href": href(path, **params)}, text)


def when(value: datetime | None) -> Html:
    """A UTC time the script shows in the reader's own zone (the UTC text stays in the title)."""
    if value is None:
        return el("span", {"class": "muted"}, "-")
    iso = to_iso(value) or ""
    return el("time", {"datetime": iso, "title": iso}, f"{value:%Y-%m-%d %H:%M} UTC")


def decayed_weight(record: MemoryRecord, now: datetime) -> float:
    """The retained value the decay eviction judges a memory by (importance halved per half-life, plus access)."""
    from portamem_plugins.eviction import retained_value

    return float(retained_value(record, now))


def _badge(kind: str, value: str) -> Html:
    return el("span", {"class": f"badge {kind}-{value}"}, value)


def page(title: str, body: Any, *, user_id: str | None = None, csrf: str | None = None,
         who: str | None = None, notice: str | None = None) -> Html:
    """The frame of every page: head, navigation for the user in view, logout, the notice of the last action."""
    nav: list[Any] = [link("portamem inspector", "/ui")]
    if user_id is not None:
        nav += [el("span", {"class": "user"}, "user ", el("b", None, user_id)),
                link("Timeline", "/ui/memories", user=user_id), link("Search", "/ui/search", user=user_id),
                link("Review", "/ui/review", user=user_id)]
    if csrf is not None:
        nav.append(el("form", {"method": "post", "action": "/ui/logout", "class": "logout"},
                      el("input", {"type": "hidden", "name": "csrf", "value": csrf}),
                      el("span", {"class": "muted"}, "key ", who or ""), el("button", {"type": "submit"}, "Log out")))
    return Html("<!doctype html>" + el(
        "html", {"lang": "en"},
        el("head", None, el("meta", {"charset": "utf-8"}),
           el("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
           el("title", None, f"{title} - portamem"),
           el("link", {"rel": "stylesheet", "href": "/ui/static/inspector.css"}),
           el("script", {"src": "/ui/static/inspector.js", "defer": True})),
        el("body", None, el("nav", None, nav),
           el("main", None, el("h1", None, title),
              el("p", {"class": "notice", "role": "status"}, notice) if notice else None, body)),
    ))


def error_page(status: int, message: str) -> Html:
    return page(f"Error {status}", el("p", {"class": "error"}, message))


def login_page(*, open_access: bool, error: str | None = None) -> Html:
    """The key form: the key is posted once, then lives only in the server's session table."""
    hint = ("This server has no API keys: leave the field empty." if open_access
            else "Paste an API key (pm_<id>_<secret>, from `portamem keys create`).")
    return page("Log in", frag(
        el("p", {"class": "error"}, error) if error else None,
        el("form", {"method": "post", "action": "/ui/login", "class": "login"},
           el("label", {"for": "key"}, "API key"),
           el("input", {"type": "password", "id": "key", "name": "key", "autocomplete": "off",
                        "required": not open_access, "size": 60}),
           el("button", {"type": "submit"}, "Open the inspector")),
        el("p", {"class": "muted"}, hint)))


def home_page(users: Sequence[str] | None, **frame: Any) -> Html:
    """The users the key may inspect (a tenant-wide key lists the tenant's, a bound key its own)."""
    form = el("form", {"method": "get", "action": "/ui/memories", "class": "filters"},
              el("label", {"for": "user"}, "User id"), el("input", {"id": "user", "name": "user", "required": True}),
              el("button", {"type": "submit"}, "Show"))
    listing = (el("ul", {"class": "users"}, [el("li", None, link(u, "/ui/memories", user=u)) for u in users])
               if users else el("p", {"class": "muted"}, "No user holds memories yet."))
    return page("Users", frag(form, listing), **frame)


def _select(name: str, options: Sequence[str], chosen: str | None, all_label: str = "all") -> Html:
    return el("select", {"name": name, "id": name, "data-autosubmit": True},
              el("option", {"value": "", "selected": not chosen}, all_label),
              [el("option", {"value": o, "selected": o == chosen}, o) for o in options])


def _record_line(r: MemoryRecord, now: datetime, *, extra: Any = None, after: Any = None) -> Html:
    content = r.content if len(r.content) <= 600 else r.content[:600] + "…"
    return el("li", {"class": f"memory status-{r.status.value}", "data-memory-id": r.memory_id},
              el("div", {"class": "meta"}, when(r.created_at), " ", _badge("status", r.status.value), " ",
                 _badge("trust", r.trust.value), " ", el("span", None, f"importance {r.importance:.2f}"), " ",
                 el("span", None, f"weight {decayed_weight(r, now):.2f}"), " ",
                 el("span", None, f"accessed {r.access_count}×"),
                 el("span", {"class": "muted"}, f" · {r.kind}") if r.kind else None,
                 el("span", {"class": "muted"}, f" · agent {r.agent_id}") if r.agent_id else None),
              el("div", {"class": "content"}, content),
              el("div", {"class": "actions"}, link("why?", "/ui/memory", user=r.user_id, id=r.memory_id), extra),
              after)


def _window(session_id: str, turns: Sequence[Turn]) -> Html:
    """A session's working window: the turns a prompt shows verbatim, newest first."""
    return el("li", {"class": "memory window", "data-session-id": session_id},
              el("div", {"class": "meta"}, el("b", None, f"window of session {session_id}"),
                 f" · {len(turns)} turn(s)"),
              el("ol", {"class": "turns"}, [el("li", {"class": "turn"}, when(t.created_at),
                                               el("div", {"class": "content"}, el("b", None, "user: "), t.user),
                                               el("div", {"class": "content"}, el("b", None, "assistant: "),
                                                  t.assistant)) for t in reversed(turns)]))


def timeline_page(user_id: str, records: Sequence[MemoryRecord], filters: Mapping[str, str],
                  windows: Mapping[str, Sequence[Turn]] | None = None, **frame: Any) -> Html:
    """Memories newest first, one column per type; the working column leads with the session windows."""
    now = utcnow()
    form = el("form", {"method": "get", "action": "/ui/memories", "class": "filters"},
              el("input", {"type": "hidden", "name": "user", "value": user_id}),
              el("label", {"for": "type"}, "type"), _select("type", [t.value for t in MemoryType], filters.get("type")),
              el("label", {"for": "status"}, "status"),
              _select("status", [s.value for s in Status], filters.get("status"), "active + pending"),
              el("label", {"for": "agent"}, "agent"),
              el("input", {"id": "agent", "name": "agent", "value": filters.get("agent", ""), "size": 12}),
              el("label", {"for": "since"}, "from"),
              el("input", {"id": "since", "name": "since", "type": "datetime-local", "value": filters.get("since", "")}),
              el("label", {"for": "until"}, "to"),
              el("input", {"id": "until", "name": "until", "type": "datetime-local", "value": filters.get("until", "")}),
              el("button", {"type": "submit"}, "Filter"))
    columns = []
    for t in MemoryType:
        of_type = sorted((r for r in records if r.type is t), key=lambda r: r.created_at, reverse=True)
        lines = [_window(sid, turns) for sid, turns in (windows or {}).items() if turns and t is MemoryType.WORKING]
        lines += [_record_line(r, now) for r in of_type]
        columns.append(el("section", {"class": "column", "id": f"type-{t.value}"},
                          el("h2", None, f"{t.value} ({len(of_type)})"),
                          el("ol", {"class": "timeline"}, lines) if lines else el("p", {"class": "muted"}, "none")))
    return page(f"Memories of {user_id}", frag(form, el("div", {"class": "columns"}, columns)),
                user_id=user_id, **frame)


def _bars(hit: SearchHit) -> Html:
    b = hit.breakdown
    rows = []
    for name in COMPONENTS:
        value = float(b.components.get(name, 0.0))
        weight = b.weights.get(name)
        rows.append(el("tr", {"class": f"component-{name}"}, el("th", None, name),
                       el("td", None, el("meter", {"min": 0, "max": 1, "value": f"{max(0.0, min(1.0, value)):.4f}",
                                                   "title": f"{value:.3f}"})),
                       el("td", {"class": "num"}, f"{value:.3f}"),
                       el("td", {"class": "num muted"}, "" if weight is None else f"× {weight:g}")))
    return el("table", {"class": "bars"}, rows)


def search_page(user_id: str, query: str, hits: Sequence[SearchHit] | None, prompt: str, **frame: Any) -> Html:
    """Hits with their score breakdown, the retrievers that found them, conflicts, and the prompt they make."""
    form = el("form", {"method": "get", "action": "/ui/search", "class": "filters"},
              el("input", {"type": "hidden", "name": "user", "value": user_id}),
              el("label", {"for": "q"}, "Query"),
              el("input", {"id": "q", "name": "q", "value": query, "size": 50, "required": True, "autofocus": True}),
              el("button", {"type": "submit"}, "Search"))
    if hits is None:
        return page(f"Search {user_id}'s memories", form, user_id=user_id, **frame)
    by_id = {h.memory_id: h for h in hits}
    items = []
    for rank, h in enumerate(hits, 1):
        r = h.record
        conflicts = [el("li", None, link(by_id[m].content[:80] if m in by_id else m, "/ui/memory", user=user_id, id=m))
                     for m in h.conflicts_with]
        items.append(el("li", {"class": "hit", "data-memory-id": r.memory_id},
                        el("div", {"class": "meta"}, el("b", None, f"#{rank}  score {h.score:.3f}"), " ",
                           "found by ", el("span", {"class": "found-by"}, ", ".join(h.found_by) or "-"), " ",
                           _badge("trust", r.trust.value), " ", when(r.created_at)),
                        el("div", {"class": "content"}, r.content),
                        _bars(h),
                        el("div", {"class": "conflicts"}, "conflicts with:", el("ul", None, conflicts))
                        if conflicts else None,
                        el("div", {"class": "actions"}, link("why?", "/ui/memory", user=user_id, id=r.memory_id))))
    body = frag(form, el("h2", None, f"{len(hits)} hit(s)"),
                el("ol", {"class": "hits"}, items) if items else el("p", {"class": "muted"}, "No memory matched."),
                el("h2", None, "Prompt text"),
                el("pre", {"class": "prompt"}, prompt or "(nothing: no hit)"))
    return page(f"Search {user_id}'s memories", body, user_id=user_id, **frame)


def _detail(value: Any) -> str:
    return "" if not value else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)[:400]


def explanation_page(user_id: str, why: Explanation, **frame: Any) -> Html:
    """Where a memory came from, what happened to it since, and every search that returned it."""
    r, now = why.record, utcnow()
    facts = [("type", f"{r.type.value}" + (f" / {r.kind}" if r.kind else "")), ("status", r.status.value),
             ("source / trust", f"{r.source.value} / {r.trust.value}"),
             ("importance", f"{r.importance:.2f} (band {r.importance_band})"),
             ("decayed weight", f"{decayed_weight(r, now):.3f} (half-life {r.half_life_days:g} d)"),
             ("seen / accessed", f"{r.frequency}× / {r.access_count}×"),
             ("written", frag(when(why.written_at), f", {why.written_by}")),
             ("session / agent", f"{why.session_id or '-'} / {r.agent_id or '-'}")]
    if r.supersedes:
        facts.append(("supersedes", link(r.supersedes, "/ui/memory", user=user_id, id=r.supersedes)))
    if r.superseded_by:
        facts.append(("superseded by", link(r.superseded_by, "/ui/memory", user=user_id, id=r.superseded_by)))
    if why.guard:
        facts.append(("guard", f"{why.guard.get('action')}: {why.guard.get('reason')}"))
    if why.trust_note:
        facts.append(("trust note", _detail(why.trust_note)))
    if why.redactions:
        facts.append(("redacted", ", ".join(why.redactions)))
    turns = [el("li", {"class": "turn"}, when_text(t.get("created_at")),
                el("div", None, el("b", None, "user: "), str(t.get("user", ""))),
                el("div", None, el("b", None, "assistant: "), str(t["assistant"])) if t.get("assistant") else None)
             for t in why.turns]
    history = [el("tr", None, el("td", None, when(h["ts"])), el("td", None, h["action"]),
                  el("td", None, h.get("actor") or ""), el("td", {"class": "detail"}, _detail(h.get("detail"))))
               for h in why.history]
    searches = [el("tr", None, el("td", None, when(x.at)), el("td", None, x.query), el("td", {"class": "num"}, x.rank),
                   el("td", {"class": "num"}, f"{x.score:.3f}")) for x in reversed(why.retrievals[-SHOWN_SEARCHES:])]
    body = frag(
        el("div", {"class": "content big"}, r.content),
        el("dl", {"class": "facts"}, [frag(el("dt", None, k), el("dd", None, v)) for k, v in facts]),
        el("h2", None, "From which turn"),
        el("ol", {"class": "turns"}, turns) if turns else el("p", {"class": "muted"}, "Not from a turn: "
                                                              + why.written_by + "."),
        el("h2", None, "History"),
        el("table", {"class": "history"}, el("tr", None, [el("th", None, c) for c in ("when", "action", "by", "detail")]),
           history),
        el("h2", None, f"Returned by {len(why.retrievals)} search(es)"),
        el("table", {"class": "retrievals"},
           el("tr", None, [el("th", None, c) for c in ("when", "query", "rank", "score")]), searches)
        if searches else el("p", {"class": "muted"}, "No search has returned it yet."))
    return page("Why this memory", body, user_id=user_id, **frame)


def when_text(value: Any) -> Html:
    """A turn's time as its metadata holds it (an ISO string, usually)."""
    try:
        return when(from_iso(value))
    except (TypeError, ValueError):
        return el("span", None, str(value or "-"))


def _action(user_id: str, memory_id: str, action: str, label: str, csrf: str, *, ask: str | None = None) -> Html:
    return el("form", {"method": "post", "action": "/ui/act", "class": f"act act-{action}",
                       "data-confirm": ask},
              el("input", {"type": "hidden", "name": "csrf", "value": csrf}),
              el("input", {"type": "hidden", "name": "user", "value": user_id}),
              el("input", {"type": "hidden", "name": "id", "value": memory_id}),
              el("input", {"type": "hidden", "name": "action", "value": action}),
              el("button", {"type": "submit", "name": "do", "value": action}, label))


def review_page(user_id: str, findings: Sequence[AuditFinding], rejected: Sequence[MemoryRecord],
                **frame: Any) -> Html:
    """Pending and quarantined memories and the audit's findings, each with its buttons; rejected ones to restore."""
    now, csrf = utcnow(), frame["csrf"]

    def buttons(r: MemoryRecord) -> Html:
        out = []
        if r.status is Status.PENDING:
            out.append(_action(user_id, r.memory_id, "confirm", "Confirm", csrf))
        if r.status is Status.DELETED:
            out.append(_action(user_id, r.memory_id, "restore", "Restore", csrf))
        else:
            out.append(_action(user_id, r.memory_id, "reject", "Reject (forget)", csrf,
                               ask="Forget this memory? It can be restored until it is purged."))
        return frag(out)

    sections = []
    for title, status in (("Pending", Status.PENDING), ("Quarantined", Status.QUARANTINED), ("Findings", None)):
        group = [f for f in findings if (f.record.status is status if status is not None
                                         else f.record.status not in (Status.PENDING, Status.QUARANTINED))]
        items = [_record_line(f.record, now, extra=buttons(f.record),
                              after=el("ul", {"class": "reasons"}, [el("li", None, why) for why in f.reasons]))
                 for f in group]
        sections.append(el("section", {"class": "review", "id": f"review-{title.lower()}"},
                           el("h2", None, f"{title} ({len(group)})"),
                           el("ol", {"class": "timeline"}, items) if items else el("p", {"class": "muted"}, "none")))
    sections.append(el("section", {"class": "review", "id": "review-rejected"},
                       el("h2", None, f"Forgotten, restorable ({len(rejected)})"),
                       el("ol", {"class": "timeline"}, [_record_line(r, now, extra=buttons(r)) for r in rejected])
                       if rejected else el("p", {"class": "muted"}, "none")))
    return page(f"Review {user_id}'s memories", frag(sections), user_id=user_id, **frame)
