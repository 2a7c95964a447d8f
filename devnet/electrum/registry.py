"""The method table: names, parameter lists, and which flag (Rostrum, control) enables them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from devnet.electrum.errors import METHOD_NOT_FOUND, RpcError, bad_params

if TYPE_CHECKING:
    from devnet.electrum.server import ElectrumServer
    from devnet.electrum.session import Session


class Kind(Enum):
    CORE = "core"
    ROSTRUM = "rostrum"  # extensions Fulcrum lacks; off with `rostrum=False`
    CONTROL = "control"  # devnet.*; off with `control=False`


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler may touch: its connection and the server (hence node and devnet)."""

    session: Session
    server: ElectrumServer


Handler = Callable[..., Awaitable[object]]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    handler: Handler
    params: tuple[str, ...]
    required: int
    kind: Kind

    def bind(self, params: list[Any] | dict[str, Any]) -> list[Any]:
        """Positional or named parameters → the handler's positional arguments."""
        if isinstance(params, dict):
            unknown = set(params) - set(self.params)
            if unknown:
                raise bad_params(f"unknown parameter(s) {sorted(unknown)} for {self.name}")
            args = []
            for i, name in enumerate(self.params):
                if name in params:
                    args.append(params[name])
                elif i < self.required:
                    raise bad_params(f"missing parameter {name!r} for {self.name}")
                else:
                    break
            return args
        if not self.required <= len(params) <= len(self.params):
            expected = (
                str(self.required)
                if self.required == len(self.params)
                else f"{self.required} to {len(self.params)}"
            )
            raise bad_params(f"{self.name} takes {expected} parameters, got {len(params)}")
        return list(params)


METHODS: dict[str, MethodSpec] = {}


def method(
    name: str, *params: str, required: int | None = None, kind: Kind = Kind.CORE
) -> Callable[[Handler], Handler]:
    """Register a handler `async def h(call, *args)`; parameters after `required` are optional
    (the handler gives them defaults)."""

    def register(handler: Handler) -> Handler:
        n_required = len(params) if required is None else required
        METHODS[name] = MethodSpec(name, handler, params, n_required, kind)
        return handler

    return register


def lookup(name: str, *, rostrum: bool, control: bool) -> MethodSpec:
    spec = METHODS.get(name)
    if (
        spec is None
        or (spec.kind is Kind.ROSTRUM and not rostrum)
        or (spec.kind is Kind.CONTROL and not control)
    ):
        raise RpcError(METHOD_NOT_FOUND, f"Unsupported request: {name}")  # Fulcrum's words
    return spec
