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
    # Indexes written before #2 paired a spent loan with the first deployment of its version:
    # with two v1 deployments (`ladle up`: mainnet and devnet) a devnet loan spent and
    # re-created read as ended (liquidation or repay, by whether the owner NFT was there) plus
    # a new borrow. The chain is not at hand in a migration, but both halves are rows: the k-th
    # ended row and the k-th borrow of one borrower, version and transaction are one loan
    # re-created (a correct decode never leaves such a pair: it pairs them itself). They merge
    # into the ended row, classified as `protocols.lending.actions._continuation` does (the
    # owner was present iff the ended row said repay), the borrow row goes, the transaction's
    # `seq` is renumbered and the spent loan's `spent_action` follows: the rows a fresh decode
    # writes (tested).
    Migration(
        COMPONENT,
        2,
        "re-pair loans spent and re-created across same-version deployments",
        """
        CREATE TEMP TABLE lending_fix_pairs AS
        WITH ended AS (
            SELECT txid, seq, version, borrower_hash, row_number() OVER (
                PARTITION BY txid, version, borrower_hash ORDER BY seq) AS k
            FROM lending_actions WHERE input_index IS NOT NULL AND output_index IS NULL
        ), born AS (
            SELECT txid, seq, version, borrower_hash, row_number() OVER (
                PARTITION BY txid, version, borrower_hash ORDER BY seq) AS k
            FROM lending_actions WHERE input_index IS NULL
        )
        SELECT e.txid AS txid, e.seq AS end_seq, b.seq AS borrow_seq
        FROM ended AS e JOIN born AS b USING (txid, version, borrower_hash, k);

        UPDATE lending_actions AS a SET
            kind = CASE
                WHEN a.version = 'v11' AND a.principal_before = b.principal_after
                    AND a.rate_before = b.rate_after AND a.loan_ts_before = b.loan_ts_after
                    AND a.collateral_before = b.collateral_after
                    AND a.delegate_hash IS NOT b.delegate_hash THEN 'delegate'
                WHEN a.version = 'v11' AND b.principal_after > a.principal_before
                    AND b.rate_after = a.rate_before AND b.loan_ts_after > a.loan_ts_before
                    AND a.kind <> 'repay' THEN 'accrue'
                WHEN a.principal_before <> b.principal_after OR a.rate_before <> b.rate_after
                    OR a.loan_ts_before <> b.loan_ts_after THEN 'refinance'
                WHEN b.collateral_after > a.collateral_before THEN 'add_collateral'
                ELSE 'refinance'
            END,
            delegate_hash = b.delegate_hash,
            output_index = b.output_index,
            collateral_after = b.collateral_after,
            principal_after = b.principal_after,
            rate_after = b.rate_after,
            loan_ts_after = b.loan_ts_after
        FROM lending_fix_pairs AS p JOIN lending_actions AS b
            ON b.txid = p.txid AND b.seq = p.borrow_seq
        WHERE a.txid = p.txid AND a.seq = p.end_seq;

        -- Interest is reported for actions that end or reset a loan only.
        UPDATE lending_actions SET interest = NULL
        WHERE kind IN ('add_collateral', 'delegate')
            AND (txid, seq) IN (SELECT txid, end_seq FROM lending_fix_pairs);

        DELETE FROM lending_actions
        WHERE (txid, seq) IN (SELECT txid, borrow_seq FROM lending_fix_pairs);

        UPDATE lending_loans AS l SET spent_action = a.kind
        FROM lending_fix_pairs AS p JOIN lending_actions AS a
            ON a.txid = p.txid AND a.seq = p.end_seq
        WHERE l.spent_txid = a.txid AND l.version = a.version
            AND l.borrower_hash = a.borrower_hash AND l.principal = a.principal_before
            AND l.rate_bp = a.rate_before AND l.loan_ts = a.loan_ts_before
            AND l.collateral = a.collateral_before;

        -- seq is dense per transaction in a fresh decode: renumber, in the same order.
        CREATE TEMP TABLE lending_fix_seq AS
        SELECT txid, seq, row_number() OVER (PARTITION BY txid ORDER BY seq) - 1 AS new_seq
        FROM lending_actions WHERE txid IN (SELECT txid FROM lending_fix_pairs);

        UPDATE lending_actions SET seq = -1 - seq
        WHERE txid IN (SELECT txid FROM lending_fix_seq);

        UPDATE lending_actions AS a SET seq = f.new_seq
        FROM lending_fix_seq AS f WHERE a.txid = f.txid AND a.seq = -1 - f.seq;

        DROP TABLE lending_fix_seq;

        DROP TABLE lending_fix_pairs;
        """,
    ),
    Migration(
        COMPONENT,
        3,
        "covering index of the live loans",
        """
        -- A page of live loans takes its keys from this index alone: with spent_height in it
        -- the index covers its own condition, so the rows a deep offset skips are index
        -- entries, not table lookups. Same name and leading columns as before.
        DROP INDEX IF EXISTS lending_loans_live;
        CREATE INDEX lending_loans_live
            ON lending_loans(version, height, position, vout, spent_height)
            WHERE spent_height IS NULL;
        """,
    ),
)
