"""The lending decoder's tables (documented in docs/index-schema.md, "Lending").

Every row carries the height of the block that wrote it, and loan/allowance UTXOs the height
that spent them: undo deletes rows above a height and clears spends above it. `mtp` is the
block's median-time-past (median of the header times of it and the 10 blocks below).
"""

from __future__ import annotations

from indexer.store.schema import Migration

COMPONENT = "lending"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        COMPONENT,
        1,
        "loans, actions, bar and pool states, allowances",
        """
        -- Every loan UTXO (v1 and v11), live (spent_height IS NULL) or spent.
        CREATE TABLE lending_loans (
            txid           BLOB NOT NULL,
            vout           INTEGER NOT NULL,
            version        TEXT NOT NULL CHECK (version IN ('v1', 'v11')),
            borrower_hash  BLOB NOT NULL,
            delegate_hash  BLOB,
            principal      INTEGER NOT NULL,           -- cents
            rate_bp        INTEGER NOT NULL,
            loan_ts        INTEGER NOT NULL,
            collateral     INTEGER NOT NULL,           -- sats
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            mtp            INTEGER NOT NULL,
            position       INTEGER NOT NULL,
            spent_txid     BLOB,
            spent_height   INTEGER REFERENCES blocks(height),
            spent_time     INTEGER,
            spent_action   TEXT,
            PRIMARY KEY (txid, vout),
            CHECK ((spent_height IS NULL) = (spent_txid IS NULL))
        ) WITHOUT ROWID;
        CREATE INDEX lending_loans_live
            ON lending_loans(version, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX lending_loans_live_rate
            ON lending_loans(version, rate_bp) WHERE spent_height IS NULL;
        CREATE INDEX lending_loans_borrower ON lending_loans(borrower_hash, height);
        CREATE INDEX lending_loans_height ON lending_loans(height);
        CREATE INDEX lending_loans_spent_height
            ON lending_loans(spent_height) WHERE spent_height IS NOT NULL;

        -- One row per loan per transaction that touched it.
        CREATE TABLE lending_actions (
            txid               BLOB NOT NULL,
            seq                INTEGER NOT NULL,
            height             INTEGER NOT NULL REFERENCES blocks(height),
            time               INTEGER NOT NULL,
            mtp                INTEGER NOT NULL,
            position           INTEGER NOT NULL,
            version            TEXT NOT NULL,
            kind               TEXT NOT NULL CHECK (kind IN ('borrow', 'repay', 'redeem',
                                   'refinance', 'add_collateral', 'liquidation', 'delegate',
                                   'accrue')),
            borrower_hash      BLOB NOT NULL,
            delegate_hash      BLOB,
            input_index        INTEGER,
            output_index       INTEGER,
            collateral_before  INTEGER,
            collateral_after   INTEGER,
            principal_before   INTEGER,
            principal_after    INTEGER,
            rate_before        INTEGER,
            rate_after         INTEGER,
            loan_ts_before     INTEGER,
            loan_ts_after      INTEGER,
            interest           INTEGER,
            PRIMARY KEY (txid, seq)
        ) WITHOUT ROWID;
        CREATE INDEX lending_actions_order ON lending_actions(version, height, position, seq);
        CREATE INDEX lending_actions_borrower
            ON lending_actions(borrower_hash, height, position, seq);
        CREATE INDEX lending_actions_height ON lending_actions(height);

        -- v11 bar and pool states, one row per re-creation.
        CREATE TABLE lending_states (
            txid          BLOB NOT NULL,
            vout          INTEGER NOT NULL,
            kind          TEXT NOT NULL CHECK (kind IN ('bar', 'pool')),
            height        INTEGER NOT NULL REFERENCES blocks(height),
            time          INTEGER NOT NULL,
            mtp           INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            staked        INTEGER NOT NULL,
            shares        INTEGER NOT NULL,
            bch_pot       INTEGER NOT NULL,
            sats          INTEGER NOT NULL,
            token_amount  INTEGER NOT NULL,
            PRIMARY KEY (txid, vout)
        ) WITHOUT ROWID;
        CREATE INDEX lending_states_kind_mtp ON lending_states(kind, mtp, height, position);
        CREATE INDEX lending_states_height ON lending_states(height);

        -- Outputs paying an owner NFT hash (pay-to-NFT-hash), live or spent.
        CREATE TABLE lending_allowances (
            txid          BLOB NOT NULL,
            vout          INTEGER NOT NULL,
            owner_hash    BLOB NOT NULL,
            sats          INTEGER NOT NULL,
            category      BLOB,
            token_amount  INTEGER NOT NULL,
            height        INTEGER NOT NULL REFERENCES blocks(height),
            time          INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            spent_txid    BLOB,
            spent_height  INTEGER REFERENCES blocks(height),
            spent_time    INTEGER,
            PRIMARY KEY (txid, vout),
            CHECK ((spent_height IS NULL) = (spent_txid IS NULL))
        ) WITHOUT ROWID;
        CREATE INDEX lending_allowances_live
            ON lending_allowances(owner_hash, height) WHERE spent_height IS NULL;
        CREATE INDEX lending_allowances_height ON lending_allowances(height);
        CREATE INDEX lending_allowances_spent_height
            ON lending_allowances(spent_height) WHERE spent_height IS NOT NULL;
        """,
    ),
)
