"""The Cauldron decoder's tables (documented in docs/index-schema.md).

Conventions: 32-byte hashes (txids, categories) are BLOBs in *display* order, so `.hex()` of a
column is what every API shows; pkhs are 20-byte BLOBs; amounts are INTEGERs (sats ≤ 2.1e15 and
token amounts ≤ 2^63−1 fit). Every row records the height of the block that wrote it (and pool
UTXOs the height that spent them), which is all a reorg needs: undo deletes rows above the
fork and clears spends above it — no separate undo log.
"""

from __future__ import annotations

from indexer.store.schema import Migration

COMPONENT = "cauldron"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        COMPONENT,
        1,
        "pools, events, trades, tokens, owners, traders, value locked",
        """
        -- Every pool UTXO the index knows, live (spent_height IS NULL) or spent.
        CREATE TABLE cauldron_pools (
            txid          BLOB NOT NULL,
            vout          INTEGER NOT NULL,
            lineage_txid  BLOB NOT NULL,
            lineage_vout  INTEGER NOT NULL,
            owner_pkh     BLOB NOT NULL,
            category      BLOB NOT NULL,
            sats          INTEGER NOT NULL,
            tokens        INTEGER NOT NULL,
            height        INTEGER NOT NULL REFERENCES blocks(height),
            time          INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            via           TEXT NOT NULL CHECK (via IN
                              ('summon', 'known_owner', 'withdraw_recreate', 'continuation',
                               'discovered')),
            spent_txid    BLOB,
            spent_height  INTEGER REFERENCES blocks(height),
            spent_time    INTEGER,
            spent_kind    TEXT CHECK (spent_kind IN ('trade', 'withdraw')),
            PRIMARY KEY (txid, vout),
            CHECK ((spent_height IS NULL) = (spent_txid IS NULL)
                   AND (spent_height IS NULL) = (spent_time IS NULL)
                   AND (spent_height IS NULL) = (spent_kind IS NULL))
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_pools_live_category
            ON cauldron_pools(category, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_live_owner
            ON cauldron_pools(owner_pkh, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_lineage
            ON cauldron_pools(lineage_txid, lineage_vout, height, position, vout);
        CREATE INDEX cauldron_pools_height ON cauldron_pools(height);
        CREATE INDEX cauldron_pools_spent_height
            ON cauldron_pools(spent_height) WHERE spent_height IS NOT NULL;

        -- Every state change of a pool: one row per pool per transaction.
        CREATE TABLE cauldron_events (
            txid           BLOB NOT NULL,
            seq            INTEGER NOT NULL,
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            position       INTEGER NOT NULL,
            kind           TEXT NOT NULL CHECK (kind IN
                               ('create', 'buy', 'sell', 'deposit', 'unchanged', 'drain',
                                'withdraw', 'discover', 'invalidated')),
            lineage_txid   BLOB NOT NULL,
            lineage_vout   INTEGER NOT NULL,
            owner_pkh      BLOB NOT NULL,
            category       BLOB NOT NULL,
            input_index    INTEGER,
            output_index   INTEGER,
            sats_before    INTEGER,
            tokens_before  INTEGER,
            sats_after     INTEGER,
            tokens_after   INTEGER,
            d_sats         INTEGER,
            d_tokens       INTEGER,
            lp_fee         INTEGER,
            pools_touched  INTEGER NOT NULL,
            PRIMARY KEY (txid, seq)
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_events_lineage
            ON cauldron_events(lineage_txid, lineage_vout, height, position, seq);
        CREATE INDEX cauldron_events_category_time ON cauldron_events(category, time);
        CREATE INDEX cauldron_events_owner_time ON cauldron_events(owner_pkh, time);
        CREATE INDEX cauldron_events_height ON cauldron_events(height);
        CREATE INDEX cauldron_events_withdrawn
            ON cauldron_events(category) WHERE kind = 'withdraw';

        -- Buys and sells per transaction and token (the trade feed, volume, candlesticks).
        CREATE TABLE cauldron_trades (
            txid           BLOB NOT NULL,
            category       BLOB NOT NULL,
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            position       INTEGER NOT NULL,
            direction      TEXT NOT NULL CHECK (direction IN ('buy', 'sell')),
            sats           INTEGER NOT NULL,
            tokens         INTEGER NOT NULL,
            volume_sats    INTEGER NOT NULL,
            volume_tokens  INTEGER NOT NULL,
            lp_fee         INTEGER NOT NULL,
            pools          INTEGER NOT NULL,
            pools_touched  INTEGER NOT NULL,
            PRIMARY KEY (txid, category)
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_trades_category_time ON cauldron_trades(category, time);
        CREATE INDEX cauldron_trades_category_height
            ON cauldron_trades(category, height, position);
        CREATE INDEX cauldron_trades_time ON cauldron_trades(time);
        CREATE INDEX cauldron_trades_height ON cauldron_trades(height, position);

        -- Tokens seen in pools, with their first pool: least (height, position, out_index).
        CREATE TABLE cauldron_tokens (
            category         BLOB PRIMARY KEY,
            height           INTEGER NOT NULL REFERENCES blocks(height),
            time             INTEGER NOT NULL,
            position         INTEGER NOT NULL,
            out_index        INTEGER NOT NULL,
            first_pool_txid  BLOB NOT NULL,
            first_pool_vout  INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_tokens_height ON cauldron_tokens(height);

        -- Owner pkhs known to the index (SUMMON markers, pools created or spent).
        CREATE TABLE cauldron_owners (
            pkh     BLOB PRIMARY KEY,
            height  INTEGER NOT NULL REFERENCES blocks(height)
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_owners_height ON cauldron_owners(height);

        -- Addresses (pkhs) funding trades, per UTC month, with the first height seen.
        CREATE TABLE cauldron_trader_months (
            month   TEXT NOT NULL,
            pkh     BLOB NOT NULL,
            height  INTEGER NOT NULL REFERENCES blocks(height),
            PRIMARY KEY (month, pkh)
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_trader_months_height ON cauldron_trader_months(height);

        -- Value locked per token after each block that changed it: the state as of any height
        -- is the latest row at or below it (one index seek per token).
        CREATE TABLE cauldron_tvl (
            category  BLOB NOT NULL,
            height    INTEGER NOT NULL REFERENCES blocks(height),
            time      INTEGER NOT NULL,
            sats      INTEGER NOT NULL,
            tokens    INTEGER NOT NULL,
            pools     INTEGER NOT NULL,
            PRIMARY KEY (category, height)
        ) WITHOUT ROWID;
        CREATE INDEX cauldron_tvl_height ON cauldron_tvl(height);
        """,
    ),
    Migration(
        COMPONENT,
        2,
        "covering trade indexes for price points",
        """
        -- A token's trades as price points (time, height, position, volumes) read straight
        -- from the index, with no lookup into the table per trade: the candle series read a
        -- busy token's hundreds of thousands of trades in chain order, and windows in time
        -- order. Same names and leading columns, so every query they served is still served.
        DROP INDEX cauldron_trades_category_time;
        CREATE INDEX cauldron_trades_category_time
            ON cauldron_trades(category, time, height, position, volume_sats, volume_tokens);
        DROP INDEX cauldron_trades_category_height;
        CREATE INDEX cauldron_trades_category_height
            ON cauldron_trades(category, height, position, time, volume_sats, volume_tokens);
        """,
    ),
    Migration(
        COMPONENT,
        3,
        "drop the unused event index by lineage",
        """
        -- No query reads events by lineage (a lineage's states come from `cauldron_pools`, and
        -- the APY reads events by block range, token or owner): the index only cost a random
        -- B-tree insert per event during the sync.
        DROP INDEX cauldron_events_lineage;
        """,
    ),
    Migration(
        COMPONENT,
        4,
        "kind and via checks as OR chains",
        """
        -- SQLite evaluates `x IN (a, b, c, …)` with more than two constants through an
        -- ephemeral table that it fills again on every execution of the INSERT, and the sync
        -- executes one per row: ~5 µs per row for events and pool UTXOs, in the writer that
        -- bounds the sync. `x = a OR x = b OR …` accepts exactly the same values for nothing.
        -- SQLite cannot alter a CHECK in place: both tables are copied (same columns, same
        -- order, same keys) and their indexes made again, all in this migration's transaction.
        CREATE TABLE cauldron_pools_v4 (
            txid          BLOB NOT NULL,
            vout          INTEGER NOT NULL,
            lineage_txid  BLOB NOT NULL,
            lineage_vout  INTEGER NOT NULL,
            owner_pkh     BLOB NOT NULL,
            category      BLOB NOT NULL,
            sats          INTEGER NOT NULL,
            tokens        INTEGER NOT NULL,
            height        INTEGER NOT NULL REFERENCES blocks(height),
            time          INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            via           TEXT NOT NULL CHECK (via = 'summon' OR via = 'known_owner'
                              OR via = 'withdraw_recreate' OR via = 'continuation'
                              OR via = 'discovered'),
            spent_txid    BLOB,
            spent_height  INTEGER REFERENCES blocks(height),
            spent_time    INTEGER,
            spent_kind    TEXT CHECK (spent_kind IN ('trade', 'withdraw')),
            PRIMARY KEY (txid, vout),
            CHECK ((spent_height IS NULL) = (spent_txid IS NULL)
                   AND (spent_height IS NULL) = (spent_time IS NULL)
                   AND (spent_height IS NULL) = (spent_kind IS NULL))
        ) WITHOUT ROWID;
        INSERT INTO cauldron_pools_v4 SELECT * FROM cauldron_pools;
        DROP TABLE cauldron_pools;
        ALTER TABLE cauldron_pools_v4 RENAME TO cauldron_pools;
        CREATE INDEX cauldron_pools_live_category
            ON cauldron_pools(category, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_live_owner
            ON cauldron_pools(owner_pkh, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_lineage
            ON cauldron_pools(lineage_txid, lineage_vout, height, position, vout);
        CREATE INDEX cauldron_pools_height ON cauldron_pools(height);
        CREATE INDEX cauldron_pools_spent_height
            ON cauldron_pools(spent_height) WHERE spent_height IS NOT NULL;

        CREATE TABLE cauldron_events_v4 (
            txid           BLOB NOT NULL,
            seq            INTEGER NOT NULL,
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            position       INTEGER NOT NULL,
            kind           TEXT NOT NULL CHECK (kind = 'create' OR kind = 'buy'
                               OR kind = 'sell' OR kind = 'deposit' OR kind = 'unchanged'
                               OR kind = 'drain' OR kind = 'withdraw' OR kind = 'discover'
                               OR kind = 'invalidated'),
            lineage_txid   BLOB NOT NULL,
            lineage_vout   INTEGER NOT NULL,
            owner_pkh      BLOB NOT NULL,
            category       BLOB NOT NULL,
            input_index    INTEGER,
            output_index   INTEGER,
            sats_before    INTEGER,
            tokens_before  INTEGER,
            sats_after     INTEGER,
            tokens_after   INTEGER,
            d_sats         INTEGER,
            d_tokens       INTEGER,
            lp_fee         INTEGER,
            pools_touched  INTEGER NOT NULL,
            PRIMARY KEY (txid, seq)
        ) WITHOUT ROWID;
        INSERT INTO cauldron_events_v4 SELECT * FROM cauldron_events;
        DROP TABLE cauldron_events;
        ALTER TABLE cauldron_events_v4 RENAME TO cauldron_events;
        CREATE INDEX cauldron_events_category_time ON cauldron_events(category, time);
        CREATE INDEX cauldron_events_owner_time ON cauldron_events(owner_pkh, time);
        CREATE INDEX cauldron_events_height ON cauldron_events(height);
        CREATE INDEX cauldron_events_withdrawn
            ON cauldron_events(category) WHERE kind = 'withdraw';
        """,
    ),
    Migration(
        COMPONENT,
        5,
        "pool UTXOs and events keyed in chain order",
        """
        -- Keyed by (height, position, vout / seq) instead of (txid, vout / seq). A txid is
        -- random, so every block's rows went to random places of both tables: each batch of
        -- the sync dirtied (and its COMMIT wrote to the WAL again) nearly every page of the
        -- two largest tables, and on a long chain each row costs a page write. In chain order
        -- a block's rows go to the end of the table. The key is as unique: a transaction has
        -- one place in the chain. The outpoint and txid lookups (the mempool's checks) get
        -- indexes of their own, which the sync defers like every secondary index; the height
        -- indexes go, the keys begin with the height (undo and the APY's block ranges read
        -- the tables in key order).
        CREATE TABLE cauldron_pools_v5 (
            txid          BLOB NOT NULL,
            vout          INTEGER NOT NULL,
            lineage_txid  BLOB NOT NULL,
            lineage_vout  INTEGER NOT NULL,
            owner_pkh     BLOB NOT NULL,
            category      BLOB NOT NULL,
            sats          INTEGER NOT NULL,
            tokens        INTEGER NOT NULL,
            height        INTEGER NOT NULL REFERENCES blocks(height),
            time          INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            via           TEXT NOT NULL CHECK (via = 'summon' OR via = 'known_owner'
                              OR via = 'withdraw_recreate' OR via = 'continuation'
                              OR via = 'discovered'),
            spent_txid    BLOB,
            spent_height  INTEGER REFERENCES blocks(height),
            spent_time    INTEGER,
            spent_kind    TEXT CHECK (spent_kind IN ('trade', 'withdraw')),
            PRIMARY KEY (height, position, vout),
            CHECK ((spent_height IS NULL) = (spent_txid IS NULL)
                   AND (spent_height IS NULL) = (spent_time IS NULL)
                   AND (spent_height IS NULL) = (spent_kind IS NULL))
        ) WITHOUT ROWID;
        INSERT INTO cauldron_pools_v5 SELECT * FROM cauldron_pools;
        DROP TABLE cauldron_pools;
        ALTER TABLE cauldron_pools_v5 RENAME TO cauldron_pools;
        CREATE INDEX cauldron_pools_outpoint ON cauldron_pools(txid, vout);
        CREATE INDEX cauldron_pools_live_category
            ON cauldron_pools(category, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_live_owner
            ON cauldron_pools(owner_pkh, height, position, vout) WHERE spent_height IS NULL;
        CREATE INDEX cauldron_pools_lineage
            ON cauldron_pools(lineage_txid, lineage_vout, height, position, vout);
        CREATE INDEX cauldron_pools_spent_height
            ON cauldron_pools(spent_height) WHERE spent_height IS NOT NULL;

        CREATE TABLE cauldron_events_v5 (
            txid           BLOB NOT NULL,
            seq            INTEGER NOT NULL,
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            position       INTEGER NOT NULL,
            kind           TEXT NOT NULL CHECK (kind = 'create' OR kind = 'buy'
                               OR kind = 'sell' OR kind = 'deposit' OR kind = 'unchanged'
                               OR kind = 'drain' OR kind = 'withdraw' OR kind = 'discover'
                               OR kind = 'invalidated'),
            lineage_txid   BLOB NOT NULL,
            lineage_vout   INTEGER NOT NULL,
            owner_pkh      BLOB NOT NULL,
            category       BLOB NOT NULL,
            input_index    INTEGER,
            output_index   INTEGER,
            sats_before    INTEGER,
            tokens_before  INTEGER,
            sats_after     INTEGER,
            tokens_after   INTEGER,
            d_sats         INTEGER,
            d_tokens       INTEGER,
            lp_fee         INTEGER,
            pools_touched  INTEGER NOT NULL,
            PRIMARY KEY (height, position, seq)
        ) WITHOUT ROWID;
        INSERT INTO cauldron_events_v5 SELECT * FROM cauldron_events;
        DROP TABLE cauldron_events;
        ALTER TABLE cauldron_events_v5 RENAME TO cauldron_events;
        CREATE INDEX cauldron_events_txid ON cauldron_events(txid);
        CREATE INDEX cauldron_events_category_time ON cauldron_events(category, time);
        CREATE INDEX cauldron_events_owner_time ON cauldron_events(owner_pkh, time);
        CREATE INDEX cauldron_events_withdrawn
            ON cauldron_events(category) WHERE kind = 'withdraw';
        """,
    ),
    Migration(
        COMPONENT,
        6,
        "trades by height in the feed's order",
        """
        -- The trade feed (newest first: height, position descending, then token ascending)
        -- read in this index's own order: a page's keys are read from it with no sort, and a
        -- deep page seeks to its anchor (rest.pages). Same name and leading columns, so the
        -- undo of a reorg (height > ?) still finds its rows through it.
        DROP INDEX IF EXISTS cauldron_trades_height;
        CREATE INDEX cauldron_trades_height
            ON cauldron_trades(height DESC, position DESC, category);
        """,
    ),
)
