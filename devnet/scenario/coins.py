"""Who owns which coins, and building fully signed transactions from them.

The scenario never asks a node for its own coins: every transaction it builds updates the
`Book` (spent coins leave their purse, outputs paying a known wallet join one), which is both
faster than listunspent and independent of the node under test. Reorgs without conflicts do not
invalidate this view: the transactions return to the mempool and their outputs stay spendable.

Signatures are BCH Schnorr with SIGHASH_ALL|UTXOS|FORKID (0x61), the type covenant-era wallets
use; their sizes are fixed (65-byte signature, 33-byte key), so a transaction's size — and its
fee at 1 sat/byte — is known exactly before it is signed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bch.encoding import compact_size_len
from bch.policy import min_relay_fee
from bch.script import push_data
from bch.sighash import SIGHASH_DEFAULT, SighashCache
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet

CHANGE_DUST = 546  # a P2PKH output without tokens: 3 × (34 + 148)
TOKEN_DUST = 800  # a P2PKH output with a fungible-token prefix (at most ~675 is dust)
_SIG_PUSH = 1 + 65  # Schnorr signature + sighash byte
_KEY_PUSH = 1 + 33


class InsufficientFunds(Exception):  # noqa: N818 (a state the scenario recovers from)
    """A purse cannot pay for a transaction: the scenario funds it and tries again."""


@dataclass(slots=True)
class Purse:
    """One wallet's spendable coins: plain BCH and fungible tokens by category (wire order)."""

    name: str
    wallet: Wallet
    role: str
    coins: dict[OutPoint, TxOutput] = field(default_factory=dict)
    tokens: dict[bytes, dict[OutPoint, TxOutput]] = field(default_factory=dict)

    @property
    def locking(self) -> bytes:
        return self.wallet.locking_bytecode

    @property
    def pkh(self) -> bytes:
        return self.wallet.pkh

    def bch_balance(self) -> int:
        return sum(o.value for o in self.coins.values())

    def token_balance(self, category: bytes) -> int:
        coins = self.tokens.get(category)
        if not coins:
            return 0
        return sum(o.token.amount for o in coins.values() if o.token is not None)

    def add(self, op: OutPoint, out: TxOutput) -> None:
        if out.token is None:
            self.coins[op] = out
        else:
            self.tokens.setdefault(out.token.category, {})[op] = out

    def remove(self, op: OutPoint) -> None:
        if self.coins.pop(op, None) is not None:
            return
        for category, coins in self.tokens.items():
            if coins.pop(op, None) is not None:
                if not coins:
                    del self.tokens[category]
                return

    def token_coins(self, category: bytes, amount: int) -> list[tuple[OutPoint, TxOutput]]:
        """Coins of `category` holding at least `amount` (largest first)."""
        chosen: list[tuple[OutPoint, TxOutput]] = []
        total = 0
        coins = self.tokens.get(category, {})
        for op, out in sorted(coins.items(), key=_token_amount, reverse=True):
            if total >= amount:
                break
            chosen.append((op, out))
            assert out.token is not None
            total += out.token.amount
        if total < amount:
            raise InsufficientFunds(f"{self.name} holds {total} of {amount} tokens")
        return chosen


def _token_amount(item: tuple[OutPoint, TxOutput]) -> int:
    token = item[1].token
    return 0 if token is None else token.amount


class Book:
    """Every scenario wallet's purse, kept current from the transactions the scenario makes."""

    def __init__(self) -> None:
        self.purses: dict[bytes, Purse] = {}  # by locking bytecode
        self._owner: dict[OutPoint, Purse] = {}

    def register(self, purse: Purse) -> Purse:
        self.purses[purse.locking] = purse
        return purse

    def credit(self, purse: Purse, op: OutPoint, out: TxOutput) -> None:
        """A coin that no booked transaction created (e.g. given to a test)."""
        purse.add(op, out)
        self._owner[op] = purse

    def apply(self, tx: Transaction) -> None:
        """Spent coins leave their purse; outputs paying a registered wallet join it (NFTs are
        tracked by whoever created them, never spent as ordinary coins)."""
        for inp in tx.inputs:
            purse = self._owner.pop(inp.outpoint, None)
            if purse is not None:
                purse.remove(inp.outpoint)
        txid = tx.txid
        for i, out in enumerate(tx.outputs):
            purse = self.purses.get(out.locking)
            if purse is None or (out.token is not None and out.token.nft is not None):
                continue
            op = OutPoint(txid, i)
            purse.add(op, out)
            self._owner[op] = purse


@dataclass(frozen=True, slots=True)
class Spend:
    """One input: the coin it spends and how it is unlocked.

    `signer` None: the unlocking bytecode is given (a pool's trade path). With `redeem`, the
    input is a P2SH spend whose script code is `redeem` (a pool's withdraw path):
    `<sig> <pubkey> <redeem>`; otherwise a P2PKH spend `<sig> <pubkey>`.
    """

    outpoint: OutPoint
    output: TxOutput
    signer: Wallet | None = None
    unlocking: bytes = b""
    redeem: bytes | None = None

    def placeholder(self) -> bytes:
        """Unlocking bytecode of the final size (for the fee computation)."""
        if self.signer is None:
            return self.unlocking
        size = _SIG_PUSH + _KEY_PUSH
        if self.redeem is not None:
            size += len(push_data(self.redeem))
        return bytes(size)


@dataclass(slots=True)
class Draft:
    """A transaction under construction: inputs, outputs, then `complete` funds and signs it."""

    spends: list[Spend] = field(default_factory=list)
    outputs: list[TxOutput] = field(default_factory=list)

    def spend(self, spend: Spend) -> None:
        self.spends.append(spend)

    def spend_p2pkh(self, purse: Purse, op: OutPoint, out: TxOutput) -> None:
        self.spends.append(Spend(op, out, purse.wallet))

    def pay(self, output: TxOutput) -> int:
        self.outputs.append(output)
        return len(self.outputs) - 1

    def pay_tokens(self, purse: Purse, category: bytes, amount: int) -> int:
        return self.pay(TxOutput(TOKEN_DUST, purse.locking, TokenData(category, amount)))

    def spend_tokens(self, purse: Purse, category: bytes, amount: int) -> None:
        """Spend `purse`'s coins of `category` worth at least `amount`, the rest back to it."""
        total = 0
        for op, out in purse.token_coins(category, amount):
            self.spend_p2pkh(purse, op, out)
            assert out.token is not None
            total += out.token.amount
        if total > amount:
            self.pay_tokens(purse, category, total - amount)

    def _unsigned(self, outputs: list[TxOutput]) -> Transaction:
        inputs = [TxInput(s.outpoint, s.placeholder()) for s in self.spends]
        return Transaction.build(inputs, outputs)

    def _size(self, output_sizes: int, n_outputs: int) -> int:
        """The signed transaction's exact size, without serializing it."""
        inputs = 0
        for s in self.spends:
            n = len(s.placeholder())
            inputs += 40 + compact_size_len(n) + n
        return (
            8
            + compact_size_len(len(self.spends))
            + inputs
            + compact_size_len(n_outputs)
            + (output_sizes)
        )

    def complete(self, payer: Purse, *, change_to: Purse | None = None) -> Transaction:
        """Add `payer`'s BCH coins until the outputs and a 1 sat/byte fee are covered, send the
        change (if above dust) to `change_to` (default the payer), and sign every input."""
        change_purse = change_to or payer
        used = {s.outpoint for s in self.spends}
        available = sorted(
            ((op, out) for op, out in payer.coins.items() if op not in used),
            key=lambda item: item[1].value,
            reverse=True,
        )
        value_out = sum(o.value for o in self.outputs)
        fixed = sum(o.size() for o in self.outputs)
        change_size = TxOutput(0, change_purse.locking).size()
        n = len(self.outputs)
        while True:
            value_in = sum(s.output.value for s in self.spends)
            spare = value_in - value_out - min_relay_fee(self._size(fixed + change_size, n + 1))
            if spare >= CHANGE_DUST:
                outputs = [*self.outputs, TxOutput(spare, change_purse.locking)]
                break
            if value_in - value_out - min_relay_fee(self._size(fixed, n)) >= 0:
                outputs = list(self.outputs)  # the few sats left over go to the miner
                break
            if not available:
                raise InsufficientFunds(
                    f"{payer.name} cannot pay {value_out - value_in} sats and the fee"
                )
            op, out = available.pop(0)
            self.spend_p2pkh(payer, op, out)
        return self.sign(outputs)

    def sign(self, outputs: list[TxOutput]) -> Transaction:
        unsigned = self._unsigned(outputs)
        sources = [s.output for s in self.spends]
        cache = SighashCache(unsigned, sources)
        inputs: list[TxInput] = []
        for i, s in enumerate(self.spends):
            if s.signer is None:
                inputs.append(TxInput(s.outpoint, s.unlocking))
                continue
            code = s.output.locking if s.redeem is None else s.redeem
            digest = cache.digest(i, SIGHASH_DEFAULT, code)
            sig = s.signer.key.sign_schnorr(digest) + bytes((SIGHASH_DEFAULT,))
            unlocking = push_data(sig) + push_data(s.signer.public_key)
            if s.redeem is not None:
                unlocking += push_data(s.redeem)
            inputs.append(TxInput(s.outpoint, unlocking))
        signed = Transaction.build(inputs, outputs)
        # With its bytes attached, so the node and the block builder never re-encode it.
        return Transaction(signed.version, signed.inputs, signed.outputs, 0, signed.to_bytes())

    def source_outputs(self) -> list[TxOutput]:
        return [s.output for s in self.spends]
