"""The supervisor over real child processes (small Python programs): stages, the merged ready
object, restarts with backoff on the announced port, the stop in reverse order, a child that
fails before it is ready, and no child outliving a supervisor killed with SIGKILL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from runtime.argv import options_argv
from runtime.supervise import Backoff, Child, ChildFailedError, Supervisor, parse_ready
from tests.runtime.procs import alive, children

# A child: argv = name, log file, [fail=status | port]. Like a `ladle` command, it dies with the
# supervisor (`runtime.orphans`); it prints a line for people, its
# ready object (with its pid and a port it keeps across restarts when told one), and on SIGTERM
# writes "<name> stopped" to the log.
CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from runtime.orphans import die_with_supervisor
    die_with_supervisor()  # as `ladle`'s main does
    name, log = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3 and sys.argv[3].startswith("fail="):
        print("about to fail", flush=True)
        sys.exit(int(sys.argv[3][5:]))
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 1000 + os.getpid() % 1000
    def stop(*_):
        with open(log, "a") as fh:
            fh.write(f"{name} stopped\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    print(f"{name}: up", flush=True)
    ready = {name: f"tcp://127.0.0.1:{port}", "pid": os.getpid()}
    print("LADLE_READY " + json.dumps(ready), flush=True)
    while True:
        time.sleep(1)
    """
)


def child(name: str, log: Path, *extra: str) -> Child:
    def argv(ready: Mapping[str, Any], first: Mapping[str, Any] | None) -> list[str]:
        if first is not None:  # a restart keeps the port it announced first
            return [name, str(log), str(first[name]).rsplit(":", 1)[1]]
        return [name, str(log), *extra]

    return Child(name, argv, (name,))


def supervisor(stages: list[list[Child]]) -> Supervisor:
    return Supervisor(stages, command=[sys.executable, "-c", CHILD], grace=5)


async def wait_until(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


async def test_stages_ready_restart_and_stop_in_reverse_order(tmp_path: Path) -> None:
    log = tmp_path / "log"
    sup = supervisor([[child("a", log)], [child("b", log), child("c", log)]])
    await sup.start()
    watching = asyncio.create_task(sup.watch())
    try:
        ready = sup.ready
        assert list(ready) == ["a", "b", "c"]  # stage order, only the declared keys
        assert sup.lines_of("b") == ["b: up"]
        first_b = sup.pid("b")
        port_b = ready["b"]

        # b dies: it is restarted, on the port it announced first.
        restarts = sup.restarts.get("b", 0)
        os.kill(first_b, signal.SIGKILL)
        await wait_until(lambda: sup.restarts.get("b", 0) == restarts + 1)
        await wait_until(lambda: sup.pid("b") != first_b and sup.ready["b"] == port_b)
        assert alive(sup.pid("b")) and not alive(first_b)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        pids = [sup.pid(n) for n in "abc"]
        await sup.stop()
    stopped = log.read_text().split("\n")
    assert stopped[-1] == "" and stopped[-2] == "a stopped"  # the first stage stops last
    assert set(stopped[:2]) == {"b stopped", "c stopped"}
    assert not any(alive(pid) for pid in pids)


async def test_a_child_that_fails_before_ready_fails_the_start(tmp_path: Path) -> None:
    log = tmp_path / "log"
    sup = supervisor([[child("a", log)], [child("b", log, "fail=2")]])
    with pytest.raises(ChildFailedError) as failed:
        await sup.start()
    assert (failed.value.name, failed.value.status) == ("b", 2)
    assert sup.lines_of("b") == ["about to fail"]
    a = sup.pid("a")
    await sup.stop()
    assert not alive(a) and log.read_text() == "a stopped\n"


SUPERVISOR = textwrap.dedent(
    """
    import asyncio, sys
    from tests.runtime.test_supervise import supervisor, child
    from pathlib import Path

    async def main():
        log = Path(sys.argv[1])
        sup = supervisor([[child("a", log)], [child("b", log)]])
        await sup.start()
        print("ready", flush=True)
        await sup.watch()

    asyncio.run(main())
    """
)


async def test_children_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SUPERVISOR,
        str(tmp_path / "log"),
        stdout=asyncio.subprocess.PIPE,
        cwd=root,
    )
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"ready\n"
        kids = children(proc.pid)
        assert len(kids) == 2
        proc.kill()  # SIGKILL: the supervisor cannot stop them itself
        await proc.wait()
        await wait_until(lambda: not any(alive(pid) for pid in kids))
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_ready_lines_and_lines_for_people() -> None:
    assert parse_ready('LADLE_READY {"a": 1}') == {"a": 1}
    assert parse_ready('{"rest": "http://x"}\n') == {"rest": "http://x"}
    assert parse_ready("router: ws://x (3 live pools)") is None
    assert parse_ready("LADLE_READY [1]") is None and parse_ready("{broken") is None


def test_backoff_doubles_to_its_cap_and_resets_after_a_stable_run() -> None:
    backoff = Backoff(first=0.5, cap=3.0, stable=60.0)
    assert [backoff.delay(1.0) for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.delay(61.0) == 0.5


def test_options_are_written_back_as_a_command_line() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--nodes", type=int, default=1)
        parser.add_argument("--no-verify", action="store_true")
        parser.add_argument("--source", action="append")
        parser.add_argument("--urls", nargs="+")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--ports", type=int, default=50001)

    parser = argparse.ArgumentParser()
    options(parser)
    given = ["--nodes", "3", "--no-verify", "--source", "a=1", "--source", "b=2", "--urls", "x"]
    args = parser.parse_args([*given, "--ports", "0"])
    argv = options_argv(options, args, skip={"ports"})
    assert argv == given
    assert parser.parse_args(argv) == argparse.Namespace(**{**vars(args), "ports": 50001})
    assert options_argv(options, parser.parse_args([])) == []
