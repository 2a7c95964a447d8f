"""Serving the OpenAPI document (`schemas/openapi.json`) and a self-contained HTML page that
lists every endpoint with its parameters and response schema (no scripts, no CDN)."""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from rest import spec

SPEC_PATH = Path(__file__).resolve().parents[1] / "schemas" / "openapi.json"


@cache
def spec_bytes() -> bytes:
    """The committed document (the build's output when the file is absent, e.g. a wheel)."""
    try:
        return SPEC_PATH.read_bytes()
    except OSError:
        return spec.dumps()


def spec_document() -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(spec_bytes())
    return doc


def _schema_text(schema: Any) -> str:
    if not isinstance(schema, dict):
        return html.escape(str(schema))
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f'<a href="#schema-{name}">{html.escape(name)}</a>'
    parts = []
    t = schema.get("type")
    if t is not None:
        parts.append(html.escape(" | ".join(t) if isinstance(t, list) else str(t)))
    if "enum" in schema:
        parts.append("one of " + html.escape(", ".join(map(str, schema["enum"]))))
    for key in ("minimum", "maximum", "default", "pattern"):
        if key in schema:
            parts.append(f"{key} {html.escape(str(schema[key]))}")
    if "items" in schema:
        parts.append("of " + _schema_text(schema["items"]))
    if "anyOf" in schema:
        parts.append(" or ".join(_schema_text(s) for s in schema["anyOf"]))
    return ", ".join(parts) or "any"


def _object_table(schema: dict[str, Any]) -> str:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return f"<p>{_schema_text(schema)}</p>"
    rows = []
    for name, sub in props.items():
        desc = sub.get("description", "") if isinstance(sub, dict) else ""
        inner = ""
        if isinstance(sub, dict) and sub.get("type") == "object":
            inner = _object_table(sub)
        elif isinstance(sub, dict) and isinstance(sub.get("items"), dict):
            items = sub["items"]
            if items.get("type") == "object":
                inner = _object_table(items)
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{_schema_text(sub)}</td>"
            f"<td>{html.escape(desc)}{inner}</td></tr>"
        )
    return (
        "<table><tr><th>field</th><th>type</th><th>meaning</th></tr>" + "".join(rows) + "</table>"
    )


@cache
def docs_html() -> str:
    doc = spec_document()
    info = doc["info"]
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(info['title'])}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
        "padding:.2em .5em;vertical-align:top;text-align:left}code{background:#f4f4f4}"
        "h3{margin-top:1.5em}</style></head><body>",
        f"<h1>{html.escape(info['title'])} {html.escape(info['version'])}</h1>",
        f"<p>{html.escape(info['description'])}</p>",
        "<p>Machine-readable: <a href='/openapi.json'>/openapi.json</a> (OpenAPI 3.1).</p>",
        "<h2>Endpoints</h2><ul>",
    ]
    for path in doc["paths"]:
        anchor = html.escape(path.strip("/").replace("/", "-").replace("{", "").replace("}", ""))
        out.append(f"<li><a href='#op-{anchor}'><code>GET {html.escape(path)}</code></a></li>")
    out.append("</ul>")
    for path, item in doc["paths"].items():
        operation = item["get"]
        anchor = html.escape(path.strip("/").replace("/", "-").replace("{", "").replace("}", ""))
        out.append(f"<h3 id='op-{anchor}'><code>GET {html.escape(path)}</code></h3>")
        out.append(f"<p>{html.escape(operation.get('summary', ''))}</p>")
        if operation.get("description"):
            out.append(f"<p>{html.escape(operation['description'])}</p>")
        params = operation.get("parameters", [])
        if params:
            out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>meaning</th></tr>")
            for p in params:
                req = " (required)" if p.get("required") else ""
                out.append(
                    f"<tr><td><code>{html.escape(p['name'])}</code>{req}</td>"
                    f"<td>{html.escape(p['in'])}</td><td>{_schema_text(p['schema'])}</td>"
                    f"<td>{html.escape(p.get('description', ''))}</td></tr>"
                )
            out.append("</table>")
        out.append("<p>Responses: ")
        shown = []
        for code, resp in operation["responses"].items():
            if "$ref" in resp:
                resp = doc["components"]["responses"][str(resp["$ref"]).rsplit("/", 1)[-1]]
            content: dict[str, Any] = resp.get("content", {})
            schema = next(iter(content.values())).get("schema") if content else None
            link = f" → {_schema_text(schema)}" if schema else ""
            shown.append(f"<b>{html.escape(code)}</b> {html.escape(resp['description'])}{link}")
        out.append("; ".join(shown) + "</p>")
    out.append("<h2>Schemas</h2>")
    for name, schema in doc["components"]["schemas"].items():
        out.append(f"<h3 id='schema-{html.escape(name)}'>{html.escape(name)}</h3>")
        desc = schema.get("description") if isinstance(schema, dict) else None
        if desc:
            out.append(f"<p>{html.escape(desc)}</p>")
        if isinstance(schema, dict) and schema.get("type") == "object":
            out.append(_object_table(schema))
        else:
            out.append(f"<p>{_schema_text(schema)}</p>")
    out.append("</body></html>")
    return "\n".join(out)
