"""One declaration per endpoint: the request's parameters as a msgspec Struct (types, bounds,
patterns, defaults and descriptions in `Annotated[..., Meta(...)]`), the answer's schema and
the refusals no JSON Schema can state. The request parsing and the OpenAPI operation are both
derived from it, so what the document allows is what the server accepts.

Parsing keeps the API's strictness: an unknown, repeated or empty parameter is a 400 naming it;
integers are plain decimal digits. Everything else (bounds, patterns, choices, required fields)
is checked by msgspec against the same Struct whose JSON Schema the document publishes.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import inspect as mi
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rest.errors import bad_parameter
from runtime.errors import ApiError

IGNORED = frozenset({"_"})  # cache busters some HTTP clients append
MAX_DIGITS = 20  # longer digit strings exceed every bound; refused before int() parses them

_DIGITS = re.compile(r"[0-9]+")
_NEGATIVE = re.compile(r"-[0-9]+")
_PATH_FIELD = re.compile(r"\{([^}]+)\}")
_AT = re.compile(r" - at `\$\.([A-Za-z_]+)`$")
_MISSING = re.compile(r"^Object missing required field `([A-Za-z_]+)`")


class Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every endpoint's parameters (path and query alike)."""


class NoArgs(Args, frozen=True, kw_only=True):
    """An endpoint without parameters."""


A = TypeVar("A", bound=Args)
Handler = Callable[[Request, A], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 400 for a request the schema allows: a rule across parameters (or over the data) that
    JSON Schema cannot state. Documented in the operation; the fuzz test accepts a refusal of
    a schema-valid request only when it is one of these (same code and parameter)."""

    code: str
    parameter: str
    rule: str


@dataclass(frozen=True)
class Endpoint(Generic[A]):
    """A GET endpoint: `path` (Starlette template), its `args` Struct (fields named in the
    path are path parameters, the others query parameters), the component schema of its 200
    answer, and its documented refusals."""

    path: str
    args: type[A]
    answer: str
    summary: str
    description: str = ""
    refusals: tuple[Refusal, ...] = ()

    @cached_property
    def _fields(self) -> dict[str, mi.Field]:
        info = mi.type_info(self.args)
        assert isinstance(info, mi.StructType)
        return {f.name: f for f in info.fields}

    @cached_property
    def path_names(self) -> frozenset[str]:
        names = frozenset(_PATH_FIELD.findall(self.path))
        assert names <= set(self._fields), f"{self.path}: undeclared path parameter"
        return names

    @cached_property
    def query_names(self) -> tuple[str, ...]:
        return tuple(n for n in self._fields if n not in self.path_names)

    @cached_property
    def _integers(self) -> frozenset[str]:
        return frozenset(n for n, f in self._fields.items() if _is_int(f.type))

    def parse(self, request: Request) -> A:
        """The request's parameters, checked; any doubt is a 400 naming the parameter."""
        values: dict[str, Any] = {}
        allowed = self.query_names
        for name, text in request.query_params.multi_items():
            if name in IGNORED:
                continue
            if name not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                raise ApiError(
                    400,
                    "unknown_parameter",
                    f"{name}: not a parameter of this endpoint (accepted: {known})",
                    fields={"parameter": name},
                )
            if name in values:
                raise bad_parameter(name, "given more than once")
            values[name] = self._value(name, text)
        for name, text in request.path_params.items():
            values[name] = self._value(name, text)
        try:
            return msgspec.convert(values, self.args)
        except msgspec.ValidationError as e:
            raise self._refusal(str(e), values) from None

    def _value(self, name: str, text: str) -> str | int:
        if text == "":
            raise bad_parameter(name, "is empty")
        return parse_int(name, text) if name in self._integers else text

    def route(self, handler: Handler[A]) -> Route:
        """The Starlette route: parse, then call `handler(request, args)`."""

        async def endpoint(request: Request) -> Response:
            return await handler(request, self.parse(request))

        endpoint.__name__ = handler.__name__
        return Route(self.path, endpoint)

    @cached_property
    def _schemas(self) -> dict[str, dict[str, Any]]:
        """Each parameter's JSON Schema, as msgspec derives it (description included)."""
        _, components = msgspec.json.schema_components([self.args])
        props: dict[str, Any] = components[self.args.__name__].get("properties", {})
        return {name: _without_null(props[name]) for name in self._fields}

    def _refusal(self, message: str, values: dict[str, Any]) -> ApiError:
        """msgspec's validation error → a 400 naming the parameter; a pattern mismatch says
        what the pattern means (the description) rather than quoting the regex."""
        missing = _MISSING.match(message)
        if missing is not None:
            name = missing.group(1)
            return ApiError(
                400, "missing_parameter", f"{name}: required", fields={"parameter": name}
            )
        at = _AT.search(message)
        if at is None:  # every field error names its field; keep the message if one ever does not
            return ApiError(400, "invalid_parameter", message)
        name = at.group(1)
        why = message[: at.start()]
        why = why[:1].lower() + why[1:]
        if why.startswith("invalid enum value"):  # it shows the value already
            return bad_parameter(name, why)
        description = self._schemas.get(name, {}).get("description")
        if why.startswith("expected `str` matching regex") and description:
            why = f"must be {description}"
        return bad_parameter(name, f"{why}, got {show(str(values.get(name)))}")

    def operation(self) -> dict[str, Any]:
        """The OpenAPI GET operation (without its operationId and error responses)."""
        parameters = []
        for name, field in self._fields.items():
            schema = dict(self._schemas[name])
            description = schema.pop("description", "")
            where = "path" if name in self.path_names else "query"
            parameters.append(
                {
                    "name": name,
                    "in": where,
                    "required": where == "path" or field.required,
                    "description": description,
                    "schema": schema,
                }
            )
        out: dict[str, Any] = {"summary": self.summary, "parameters": parameters}
        description = self.description
        if self.refusals:
            rules = " ".join(f"{r.parameter} ({r.code}): {r.rule}." for r in self.refusals)
            description = f"{description} 400 beyond the schema: {rules}".strip()
        if description:
            out["description"] = description
        return out


def parse_int(name: str, text: str) -> int:
    """Plain decimal digits only (no sign, spaces, exponent or other scripts' digits)."""
    if _NEGATIVE.fullmatch(text):
        raise bad_parameter(name, f"must not be negative, got {text}")
    if not _DIGITS.fullmatch(text):
        raise bad_parameter(name, f"must be a non-negative integer, got {show(text)}")
    if len(text.lstrip("0")) > MAX_DIGITS:
        raise bad_parameter(name, f"must be at most {MAX_DIGITS} digits long")
    return int(text)


def show(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _is_int(t: mi.Type) -> bool:
    if isinstance(t, mi.Metadata):
        return _is_int(t.type)
    if isinstance(t, mi.UnionType):
        return any(_is_int(u) for u in t.types)
    return isinstance(t, mi.IntType)


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional parameter's schema: absent is how a query says none, never a null."""
    variants = schema.get("anyOf")
    out = dict(schema)
    if variants is not None:
        rest = [v for v in variants if v != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"]
            out = {**rest[0], **out}
    if out.get("default", 0) is None:
        del out["default"]
    return out
