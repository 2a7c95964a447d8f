"""Benchmark of the `bch` layer: transaction parsing, ~32 MB block parsing, sighash preimages.

Every figure is measured next to a baseline in the same run: hashlib double-SHA256 over the same
bytes (for parsing, the transactions; for preimages, the preimages), so the ratio says how far
our pure-Python code is from "just hashing the data" on this machine.

    .venv/bin/python scripts/bench_bch.py [--json out.json] [--block-mb 32] [--seed 1]

The transaction mix is synthetic but shaped like mainnet traffic with Cauldron activity: mostly
small P2PKH spends, some token transfers, some Cauldron trades (10-300 pool inputs with 69-byte
unlockings and FT-carrying P2SH32 pool outputs), and a few consolidations of up to 700 inputs.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bch.block import Block
from bch.script import p2pkh_locking, p2sh32_locking, push_data
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput

# The Cauldron pool contract (shared/reference/cauldron.md) around a 20-byte owner pkh.
POOL_HEAD = bytes.fromhex("746376a914")
POOL_TAIL = bytes.fromhex(
    "88ac67c0d1c0ce88c25288c0cdc0c788c0c6c0d095c0c6c0cc9490539502e80396c0cc7c94c0d3957ca268"
)
SIGHASH_ALL_UTXOS = 0x61

Spend = tuple[Transaction, list[TxOutput]]


# --- the transaction mix ---------------------------------------------------------------------


def _p2pkh_unlocking(rng: random.Random) -> bytes:
    """<65-byte Schnorr signature + sighash byte> <33-byte public key>."""
    return push_data(rng.randbytes(65)) + push_data(b"\x02" + rng.randbytes(32))


def _p2pkh_input(rng: random.Random, token: TokenData | None = None) -> tuple[TxInput, TxOutput]:
    txin = TxInput(OutPoint(rng.randbytes(32), rng.randrange(4)), _p2pkh_unlocking(rng))
    value = rng.randrange(2_000, 10**9)
    return txin, TxOutput(value, p2pkh_locking(rng.randbytes(20)), token)


def _p2pkh_spend(rng: random.Random, n_in: int, n_out: int) -> Spend:
    pairs = [_p2pkh_input(rng) for _ in range(n_in)]
    total = sum(o.value for _, o in pairs)
    outputs = [
        TxOutput(max(546, total // (n_out + 1)), p2pkh_locking(rng.randbytes(20)))
        for _ in range(n_out)
    ]
    return Transaction.build([i for i, _ in pairs], outputs), [o for _, o in pairs]


def _token_transfer(rng: random.Random) -> Spend:
    category = rng.randbytes(32)
    amount = rng.randrange(1, 10**12)
    nft = NFT(Capability.NONE, rng.randbytes(rng.randrange(0, 41))) if rng.random() < 0.3 else None
    token_in, token_src = _p2pkh_input(rng, TokenData(category, amount, nft))
    fee_in, fee_src = _p2pkh_input(rng)
    sent = rng.randrange(1, amount + 1)
    outputs = [TxOutput(1000, p2pkh_locking(rng.randbytes(20)), TokenData(category, sent, nft))]
    if sent < amount:
        outputs.append(
            TxOutput(1000, p2pkh_locking(rng.randbytes(20)), TokenData(category, amount - sent))
        )
    outputs.append(TxOutput(fee_src.value - 3000, p2pkh_locking(rng.randbytes(20))))
    return Transaction.build([token_in, fee_in], outputs), [token_src, fee_src]


def _cauldron_trade(rng: random.Random, pools: int) -> Spend:
    """Pools at inputs/outputs 0..n-1 (trade path: one push of the 68-byte redeem script), then
    the trader's funding input, bought tokens and change."""
    category = rng.randbytes(32)
    inputs: list[TxInput] = []
    source: list[TxOutput] = []
    outputs: list[TxOutput] = []
    bought = 0
    for _ in range(pools):
        redeem = POOL_HEAD + rng.randbytes(20) + POOL_TAIL
        locking = p2sh32_locking(hashlib.sha256(hashlib.sha256(redeem).digest()).digest())
        sats = rng.randrange(10**5, 10**9)
        tokens = rng.randrange(10**3, 10**12)
        take = tokens // 100
        bought += take
        inputs.append(TxInput(OutPoint(rng.randbytes(32), rng.randrange(3)), push_data(redeem)))
        source.append(TxOutput(sats, locking, TokenData(category, tokens)))
        outputs.append(TxOutput(sats + sats // 99, locking, TokenData(category, tokens - take)))
    funding_in, funding_src = _p2pkh_input(rng)
    inputs.append(funding_in)
    source.append(funding_src)
    outputs.append(TxOutput(1000, p2pkh_locking(rng.randbytes(20)), TokenData(category, bought)))
    outputs.append(TxOutput(10_000, p2pkh_locking(rng.randbytes(20))))
    return Transaction.build(inputs, outputs), source


def transaction_mix(count: int, seed: int) -> list[Spend]:
    """~85 % P2PKH (1-3 in), 9 % token transfers, 5 % Cauldron trades, 1 % consolidations."""
    rng = random.Random(seed)
    mix: list[Spend] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.85:
            mix.append(_p2pkh_spend(rng, rng.choice((1, 1, 1, 2, 2, 3)), rng.choice((1, 2, 2))))
        elif roll < 0.94:
            mix.append(_token_transfer(rng))
        elif roll < 0.99:
            mix.append(_cauldron_trade(rng, rng.choice((10, 10, 20, 40, 80, 150, 300))))
        else:
            mix.append(_p2pkh_spend(rng, rng.randrange(100, 701), 1))
    return mix


# --- measuring -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    unit: str
    items: int
    nbytes: int
    seconds: float
    baseline: str
    baseline_seconds: float

    @property
    def rate(self) -> float:
        return self.items / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6

    @property
    def baseline_rate(self) -> float:
        return self.items / self.baseline_seconds

    @property
    def ratio(self) -> float:
        """Our rate divided by the baseline's on the same items (and bytes)."""
        return self.baseline_seconds / self.seconds

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = asdict(self)
        out |= {
            "rate": round(self.rate, 1),
            "mb_per_s": round(self.mb_per_s, 2),
            "baseline_rate": round(self.baseline_rate, 1),
            "ratio": round(self.ratio, 4),
        }
        return out


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of `repeat` runs, with the garbage collector paused (as timeit does)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def _dsha_all(chunks: Sequence[bytes | memoryview]) -> None:
    sha = hashlib.sha256
    for chunk in chunks:
        sha(sha(chunk).digest()).digest()


def bench_transactions(raws: list[bytes], repeat: int) -> Row:
    from_bytes = Transaction.from_bytes

    def ours() -> None:
        for raw in raws:
            from_bytes(raw)

    return Row(
        "Transaction.from_bytes (mix)",
        "tx",
        len(raws),
        sum(map(len, raws)),
        best_time(ours, repeat),
        "hash256 of each tx",
        best_time(lambda: _dsha_all(raws), repeat),
    )


def build_block(raws: list[bytes], target_bytes: int) -> bytes:
    """Cycle through the mix until the block reaches `target_bytes` (coinbase = first tx)."""
    chosen: list[bytes] = []
    size = 0
    i = 0
    while size < target_bytes:
        raw = raws[i % len(raws)]
        chosen.append(raw)
        size += len(raw)
        i += 1
    return Block.build(chosen, prev_hash=bytes(32), time=1_700_000_000, bits=0x207FFFFF)


def bench_block(block_raw: bytes, repeat: int) -> list[Row]:
    block = Block(block_raw)
    view = memoryview(block_raw)
    chunks = [view[slice(*block.tx_span(i))] for i in range(len(block))]
    baseline = best_time(lambda: _dsha_all(chunks), repeat)
    size = len(block_raw)
    hits = len(block.find_transactions(POOL_TAIL))

    def decode_all() -> None:
        for _ in Block(block_raw).iter_transactions():
            pass

    def decode_pool_trades() -> None:
        parsed = Block(block_raw)
        for i in parsed.find_transactions(POOL_TAIL):
            parsed.transaction(i)

    def row(name: str, fn: Callable[[], object], runs: int) -> Row:
        return Row(name, "block", 1, size, best_time(fn, runs), "hash256 of each tx", baseline)

    return [
        row(f"Block scan + txids ({size / 1e6:.1f} MB)", lambda: Block(block_raw), repeat),
        row(f"  + decode all {len(block)} txs", decode_all, max(1, repeat - 1)),
        row(f"  + find & decode {hits} pool trades", decode_pool_trades, repeat),
    ]


def bench_preimages(spends: list[Spend], repeat: int) -> Row | str:
    try:
        from bch.sighash import signing_preimage
    except ImportError as exc:  # another engineer's module may not exist yet
        return f"skipped: bch.sighash not importable ({exc})"

    jobs: list[tuple[Transaction, list[TxOutput], int, bytes]] = []
    for tx, source in spends:
        for i, (txin, spent) in enumerate(zip(tx.inputs, source, strict=True)):
            # P2SH32 pools sign over the redeem script (the unlocking's one push); P2PKH over
            # the locking bytecode.
            pool = spent.locking[:2] == b"\xaa\x20"
            script_code = txin.unlocking[1:] if pool else spent.locking
            jobs.append((tx, source, i, script_code))
    preimages: list[bytes] = []

    def ours() -> None:
        preimages.clear()
        for tx, source, i, script_code in jobs:
            preimages.append(signing_preimage(tx, i, source, SIGHASH_ALL_UTXOS, script_code))

    seconds = best_time(ours, repeat)
    return Row(
        "signing_preimage, every input (0x61)",
        "preimage",
        len(jobs),
        sum(map(len, preimages)),
        seconds,
        "hash256 of each preimage",
        best_time(lambda: _dsha_all(preimages), repeat),
    )


def _table(rows: list[Row]) -> str:
    head = (
        f"{'measurement':<40} {'unit':<9} {'ours/s':>10} {'MB/s':>7}   "
        f"{'baseline: hash256/s':>19} {'MB/s':>7}   {'ratio':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        base_mb = r.nbytes / r.baseline_seconds / 1e6
        lines.append(
            f"{r.name:<40} {r.unit:<9} {r.rate:>10.1f} {r.mb_per_s:>7.1f}   "
            f"{r.baseline_rate:>19.1f} {base_mb:>7.1f}   {r.ratio:>6.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--block-mb", type=float, default=32.0, help="block size to parse (MB)")
    parser.add_argument("--mix", type=int, default=3000, help="distinct transactions to build")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    spends = transaction_mix(args.mix, args.seed)
    raws = [tx.to_bytes() for tx, _ in spends]
    inputs = sum(len(tx.inputs) for tx, _ in spends)
    print(
        f"mix: {len(raws)} transactions, {sum(map(len, raws)) / 1e6:.2f} MB, {inputs} inputs, "
        f"largest {max(len(tx.inputs) for tx, _ in spends)} inputs "
        f"(built in {time.perf_counter() - started:.1f} s)"
    )
    rows = [bench_transactions(raws, repeat=3)]
    block_raw = build_block(raws, int(args.block_mb * 1e6))
    rows += bench_block(block_raw, repeat=3)
    del block_raw
    preimage = bench_preimages(spends, repeat=2)
    if isinstance(preimage, Row):
        rows.append(preimage)
    else:
        print(preimage)
    print(_table(rows))
    machine = (
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    )
    print(f"{machine}; total {time.perf_counter() - started:.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine,
                    "mix": {"transactions": len(raws), "inputs": inputs, "seed": args.seed},
                    "rows": [r.as_json() for r in rows],
                    "notes": [] if isinstance(preimage, Row) else [preimage],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
