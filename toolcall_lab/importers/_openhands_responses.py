"""Which OpenHands response is which: responses told apart by their id and the calls they hold, and
each one's ``metrics.response_latencies`` figure found by the strongest evidence (see
`toolcall_lab.importers.openhands`). A source can give every response one id (a local server's
``chatcmpl-local``) or list an id twice in its metrics: the import pairs what the log ties together
and reports the rest, never silently giving one response another's figure."""

from __future__ import annotations

from typing import Any

from toolcall_lab.importers._build import Issue


def response_key(action: dict[str, Any]) -> tuple[str, str] | None:
    """What tells one logged response from another: its id, and the ids of the calls it holds (a
    source can give every response one id, as a local server's ``chatcmpl-local``)."""
    body = (action.get("tool_call_metadata") or {}).get("model_response")
    if not isinstance(body, dict) or not body.get("id"):
        return None
    message = ((body.get("choices") or [{}])[0] or {}).get("message") or {}
    calls = message.get("tool_calls") or [] if isinstance(message, dict) else []
    ids = ",".join(str(c.get("id")) for c in calls if isinstance(c, dict))
    return str(body["id"]), ids


def responses(
    events: list[dict[str, Any]], label: str = "", issues: list[Issue] | None = None
) -> list[tuple[str, tuple[str, str]]]:
    """The logged responses in the order of the events: (response id, key); responses that share an
    id (with other calls) are each their own, and said (when `issues` is given)."""
    seen: dict[tuple[str, str], None] = {}
    for e in events:
        if "action" in e and e.get("tool_call_metadata") and (k := response_key(e)) is not None:
            seen.setdefault(k, None)
    out = [(k[0], k) for k in seen]
    if issues is not None:
        shared: dict[str, int] = {}
        for rid, _ in out:
            shared[rid] = shared.get(rid, 0) + 1
        for rid, n in shared.items():
            if n > 1:
                issues.append(
                    Issue(
                        kind="note",
                        where=label,
                        what=f"{n} responses with other calls share the response id {rid} (the source's "
                        "ids): each is read as its own, its actions found by the calls it holds",
                    )
                )
    return out


def pair_latencies(
    order: list[tuple[str, tuple[str, str]]], entries: list[tuple[str, Any]], label: str, issues: list[Issue]
) -> dict[tuple[str, str], Any]:
    """Each logged response's ``response_latencies`` figure, by the strongest evidence: its id, when
    one entry has it; when an id repeats, the order of the calls (as many responses as entries with
    that id: in order; one response: the entry in its place among its neighbours); otherwise none,
    reported. A response without a figure is timed from the events."""
    where_of: dict[str, list[int]] = {}
    for k, (rid, _) in enumerate(entries):
        where_of.setdefault(rid, []).append(k)
    keys_of: dict[str, list[tuple[str, str]]] = {}
    for rid, key in order:
        keys_of.setdefault(rid, []).append(key)
    seq = [rid for rid, _ in order]
    out: dict[tuple[str, str], Any] = {}

    def shown(ks: list[int]) -> str:
        return ", ".join(f"entry {k}: {entries[k][1]!r} s" for k in ks)

    for rid, keys in keys_of.items():
        ks = where_of.get(rid, [])
        if not ks:
            continue
        if len(ks) == 1 and len(keys) == 1:
            out[keys[0]] = entries[ks[0]][1]
            continue
        if len(ks) == len(keys):
            out.update({key: entries[k][1] for key, k in zip(keys, ks, strict=True)})
            issues.append(
                Issue(
                    kind="note",
                    where=label,
                    what=f"{len(keys)} responses share the id {rid}, and so do {len(ks)} "
                    "metrics.response_latencies entries: paired in the order of the calls",
                )
            )
            continue
        pos = seq.index(rid)

        def in_place(k: int, pos: int = pos, rid: str = rid) -> bool:
            """Entry `k` stands where response `rid` stands: a neighbour is the neighbouring response's."""
            before = entries[k - 1][0] if k > 0 else None
            after = entries[k + 1][0] if k + 1 < len(entries) else None
            return (pos > 0 and before == seq[pos - 1] != rid) or (
                pos + 1 < len(seq) and after == seq[pos + 1] != rid
            )

        placed = [k for k in ks if in_place(k)] if len(keys) == 1 else []
        if len(placed) == 1:
            out[keys[0]] = entries[placed[0]][1]
        issues.append(
            Issue(
                kind="damaged",
                where=label,
                what=f"metrics.response_latencies lists response {rid} {len(ks)} times ({shown(ks)})"
                + (f" for {len(keys)} responses with that id" if len(keys) > 1 else "")
                + (
                    f": entry {placed[0]}, in its place in the order of the calls, is used; the other(s) "
                    "are not"
                    if len(placed) == 1
                    else ": which is whose is not known; none is used (timed from the events)"
                ),
            )
        )
    untimed = list(dict.fromkeys(rid for rid, key in order if key not in out)) if entries else []
    if untimed:
        issues.append(
            Issue(
                kind="note",
                where=label,
                what=f"{len(untimed)} response(s) have no metrics.response_latencies entry of their own "
                f"({', '.join(untimed[:3])}{', ...' if len(untimed) > 3 else ''}): timed from the events",
            )
        )
    return out
