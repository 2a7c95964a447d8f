"""The libauth helper: official vectors verify, tampering is caught, failures fail closed."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from bch.hashes import hash160
from bch.script import p2pkh_locking, p2sh20_locking, push_data, pushes
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from tests.conftest import load_vectors
from verify.libauth import (
    SCRIPT,
    AsyncLibauthVerifier,
    LibauthVerifier,
    VerifierUnavailable,
    VerifyResult,
)

pytestmark = pytest.mark.node

CASHTOKENS = "vmb/bch_2025_standard.core.cashtokens.vmb_tests.json"
SIGNING = "vmb/bch_2025_standard.core.signing-serialization.vmb_tests.json"
MISSING_NODE = "/nonexistent/bin/node"
VALID = VerifyResult(True, None)

# 2026-only redeem script: OP_1 OP_1 OP_LSHIFTNUM OP_2 OP_NUMEQUAL (1 << 1 == 2). In the 2025
# rule set 0x8d is the disabled OP_2MUL, so the same spend must fail there.
SHIFT_REDEEM = bytes((0x51, 0x51, 0x8D, 0x52, 0x9C))
TRUE_REDEEM = bytes((0x51,))


@pytest.fixture(scope="module")
def verifier() -> Iterator[LibauthVerifier]:
    """One helper process for the whole module, as the devnet's mempool uses it."""
    with LibauthVerifier() as v:
        yield v


def _vmb(name: str) -> list[list[Any]]:
    vectors: list[list[Any]] = load_vectors(name)
    return vectors


def _flip_value_byte(tx_hex: str) -> str:
    """Flip one byte of output 0's value (sets bit 47): outputs then exceed inputs."""
    tx = Transaction.from_hex(tx_hex)
    first = tx.outputs[0]
    assert first.value < 1 << 47
    tampered = dataclasses.replace(first, value=first.value ^ (0x80 << 40))
    return Transaction(tx.version, tx.inputs, (tampered, *tx.outputs[1:]), tx.locktime).hex()


def _flip_signature_byte(tx_hex: str, input_index: int) -> str:
    """Flip one byte inside the signature of a signing-serialization vector's tested input."""
    tx = Transaction.from_hex(tx_hex)
    txin = tx.inputs[input_index]
    items = pushes(txin.unlocking)  # <preimage> <signature> <redeem script>
    assert len(items) == 3
    sig = bytearray(items[1])
    sig[10] ^= 0x01  # inside r for both Schnorr and DER encodings
    items[1] = bytes(sig)
    inputs = list(tx.inputs)
    inputs[input_index] = dataclasses.replace(
        txin, unlocking=b"".join(push_data(item) for item in items)
    )
    return Transaction(tx.version, tuple(inputs), tx.outputs, tx.locktime).hex()


def _p2sh20_spend(redeem: bytes, pay: int) -> tuple[Transaction, list[TxOutput]]:
    """A one-input spend of a P2SH20 output holding 100,000 sats, paying `pay` to a P2PKH."""
    source = [TxOutput(100_000, p2sh20_locking(hash160(redeem)))]
    tx = Transaction.build(
        [TxInput(OutPoint(bytes(range(32)), 0), push_data(redeem))],
        [TxOutput(pay, p2pkh_locking(bytes(range(20))))],
    )
    return tx, source


def _mixed_sample() -> list[tuple[str, str]]:
    """Every 10th cashtokens vector, each followed by its tampered copy: valid and invalid
    answers interleave, so a reply matched to the wrong request would be noticed."""
    sample: list[tuple[str, str]] = []
    for vector in _vmb(CASHTOKENS)[::10]:
        tx_hex, source_hex = vector[4], vector[5]
        sample += [(tx_hex, source_hex), (_flip_value_byte(tx_hex), source_hex)]
    return sample


# --- the official vectors ----------------------------------------------------------------------


def test_every_cashtokens_vector_verifies_in_one_process(verifier: LibauthVerifier) -> None:
    vectors = _vmb(CASHTOKENS)
    verifier.start()
    pid = verifier.pid
    failures = []
    ran = 0
    for vector_id, _desc, _unlock, _lock, tx_hex, source_hex, *_ in vectors:
        result = verifier.verify(tx_hex, source_hex, vm=2025, standard=True)
        ran += 1
        if result != VALID:
            failures.append((vector_id, result.error))
    assert failures == []
    assert ran == len(vectors)
    assert ran >= 600
    assert verifier.pid == pid  # no restart: one long-lived helper served them all
    assert verifier.libauth_version == "3.1.0-next.8"


def test_tampered_value_is_invalid_for_every_vector(verifier: LibauthVerifier) -> None:
    for vector_id, _desc, _unlock, _lock, tx_hex, source_hex, *_ in _vmb(CASHTOKENS):
        for standard in (True, False):
            result = verifier.verify(
                _flip_value_byte(tx_hex), source_hex, vm=2025, standard=standard
            )
            assert not result.valid, vector_id
            assert result.error is not None
            assert "output values exceeds the sum of transaction inputs" in result.error


def test_tampered_signature_is_invalid(verifier: LibauthVerifier) -> None:
    vectors = [v for v in _vmb(SIGNING) if ", valid (P2SH" in v[1]]
    schnorr = [v for v in vectors if "single schnorr signature" in v[1]]
    ecdsa = [v for v in vectors if "single ECDSA signature" in v[1]]
    assert len(schnorr) >= 18
    assert len(ecdsa) >= 18
    for vector in schnorr + ecdsa:
        vector_id, _desc, _unlock, _lock, tx_hex, source_hex, *rest = vector
        index = rest[0] if rest else 0
        assert verifier.verify(tx_hex, source_hex, vm=2025) == VALID, vector_id
        result = verifier.verify(_flip_signature_byte(tx_hex, index), source_hex, vm=2025)
        assert not result.valid, vector_id
        assert result.error is not None
        assert "signature" in result.error


# --- request parameters reach the right VM -----------------------------------------------------


def test_vm_year_is_honoured(verifier: LibauthVerifier) -> None:
    tx, source = _p2sh20_spend(SHIFT_REDEEM, 99_000)
    for standard in (True, False):
        assert verifier.verify(tx, source, vm=2026, standard=standard) == VALID
        assert not verifier.verify(tx, source, vm=2025, standard=standard).valid


def test_standard_flag_is_honoured(verifier: LibauthVerifier) -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 100)  # a 100-sat P2PKH output is dust
    for vm in (2025, 2026):
        assert verifier.verify(tx, source, vm=vm, standard=False) == VALID
        result = verifier.verify(tx, source, vm=vm, standard=True)
        assert not result.valid
        assert result.error is not None
        assert "dust" in result.error.lower()


def test_model_objects_and_hex_give_the_same_answer(verifier: LibauthVerifier) -> None:
    for pay in (99_000, 100_001):  # the second spends more than the input holds
        tx, source = _p2sh20_spend(TRUE_REDEEM, pay)
        by_model = verifier.verify(tx, source, vm=2026)
        by_hex = verifier.verify(tx.hex(), "01" + source[0].encode().hex(), vm=2026)
        assert by_model == by_hex
        assert by_model.valid is (pay == 99_000)


def test_unknown_vm_year_is_refused_before_sending(verifier: LibauthVerifier) -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    with pytest.raises(ValueError, match="vm must be"):
        verifier.verify(tx, source, vm=2024)


def test_undecodable_input_is_invalid_not_fatal(verifier: LibauthVerifier) -> None:
    verifier.start()
    pid = verifier.pid
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    for tx_hex, source_hex in [("zz", "00"), (tx.hex()[:-2], "00"), (tx.hex(), "0201")]:
        result = verifier.verify(tx_hex, source_hex, vm=2026)
        assert not result.valid
        assert result.error
    assert verifier.verify(tx, source) == VALID
    assert verifier.pid == pid


# --- the helper process itself -----------------------------------------------------------------


def test_malformed_requests_get_an_error_reply_never_a_crash() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    good = {"tx": tx.hex(), "source_outputs": "01" + source[0].encode().hex(), "standard": True}
    lines = [
        b"not json",
        b"[1, 2]",
        b"null",
        orjson.dumps({"id": 1}),
        orjson.dumps({**good, "id": 2, "vm": 2024}),
        orjson.dumps({**good, "id": 3, "vm": 2026, "standard": "yes"}),
        orjson.dumps({**good, "id": 4, "vm": 2026, "tx": "abc"}),
        orjson.dumps({**good, "id": {"x": 1}, "vm": 2026}),
        orjson.dumps({**good, "id": 9, "vm": 2026}),
    ]
    proc = subprocess.run(
        ["node", str(SCRIPT)],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=60,
        check=True,
    )
    replies = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert replies[0]["ready"] is True
    answers = replies[1:]
    assert len(answers) == len(lines)
    assert [a["id"] for a in answers] == [None, None, None, 1, 2, 3, 4, None, 9]
    for answer in answers[:-1]:
        assert answer["valid"] is False
        assert answer["error"].startswith("invalid request")
    assert answers[-1] == {"id": 9, "valid": True}


def test_missing_node_raises_unavailable() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    v = LibauthVerifier(node=MISSING_NODE)
    with pytest.raises(VerifierUnavailable):
        v.verify(tx, source)
    with pytest.raises(VerifierUnavailable):
        v.start()
    v.close()


async def test_async_missing_node_raises_unavailable() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    async with AsyncLibauthVerifier(node=MISSING_NODE) as v:
        with pytest.raises(VerifierUnavailable):
            await v.verify(tx, source)


def test_missing_libauth_raises_unavailable(tmp_path: Path) -> None:
    """The helper copied to where no node_modules can be found cannot load libauth."""
    script = tmp_path / "verifier.mjs"
    shutil.copy(SCRIPT, script)
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    with (
        LibauthVerifier(script=script) as v,
        pytest.raises(VerifierUnavailable, match="libauth"),
    ):
        v.verify(tx, source)


def test_missing_script_raises_unavailable(tmp_path: Path) -> None:
    with (
        LibauthVerifier(script=tmp_path / "absent.mjs") as v,
        pytest.raises(VerifierUnavailable, match="not found"),
    ):
        v.start()


def test_restarts_once_after_the_helper_died() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    with LibauthVerifier() as v:
        v.start()
        first = v.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert v.verify(tx, source) == VALID
        assert v.pid not in (None, first)


def test_a_stuck_helper_times_out_then_is_replaced() -> None:
    """A helper that stops answering (SIGSTOP) is reported, never taken as an answer."""
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    with LibauthVerifier(timeout=0.5) as v:
        v.start()
        stuck = v.pid
        assert stuck is not None
        os.kill(stuck, signal.SIGSTOP)
        with pytest.raises(VerifierUnavailable, match="timed out"):
            v.verify(tx, source)
        assert v.verify(tx, source) == VALID
        assert v.pid not in (None, stuck)


def test_sync_client_is_thread_safe(verifier: LibauthVerifier) -> None:
    sample = _mixed_sample()
    expected = [verifier.verify(t, s, vm=2025) for t, s in sample]
    assert {r.valid for r in expected} == {True, False}
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda p: verifier.verify(p[0], p[1], vm=2025), sample))
    assert got == expected


# --- the asyncio client ------------------------------------------------------------------------


async def test_async_client_agrees_with_sync_client(verifier: LibauthVerifier) -> None:
    sample = _mixed_sample()
    expected = [verifier.verify(t, s, vm=2025) for t, s in sample]
    assert {r.valid for r in expected} == {True, False}
    async with AsyncLibauthVerifier() as v:
        # All requests in flight at once: replies are matched by id, not by order of arrival.
        got = await asyncio.gather(*(v.verify(t, s, vm=2025) for t, s in sample))
        assert v.libauth_version == "3.1.0-next.8"
    assert list(got) == expected


async def test_async_client_restarts_after_the_helper_died() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    async with AsyncLibauthVerifier() as v:
        await v.start()
        first = v.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await asyncio.sleep(0.2)  # let the reader see end of file
        assert await v.verify(tx, source) == VALID
        assert v.pid not in (None, first)


async def test_async_stuck_helper_times_out_then_is_replaced() -> None:
    tx, source = _p2sh20_spend(TRUE_REDEEM, 99_000)
    async with AsyncLibauthVerifier(timeout=0.5) as v:
        await v.start()
        stuck = v.pid
        assert stuck is not None
        os.kill(stuck, signal.SIGSTOP)
        with pytest.raises(VerifierUnavailable, match="timed out"):
            await v.verify(tx, source)
        assert await v.verify(tx, source) == VALID
        assert v.pid not in (None, stuck)


async def test_async_client_survives_a_cancelled_request() -> None:
    tx, source = _p2sh20_spend(SHIFT_REDEEM, 99_000)
    async with AsyncLibauthVerifier() as v:
        await v.start()
        pid = v.pid
        task = asyncio.create_task(v.verify(tx, source, vm=2026))
        await asyncio.sleep(0)
        task.cancel()
        results = await asyncio.gather(v.verify(tx, source, vm=2026), v.verify(tx, source, vm=2025))
        assert results[0] == VALID
        assert not results[1].valid
        assert v.pid == pid
