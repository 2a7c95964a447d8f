"""The oracle decoder's tables (documented in docs/index-schema.md, "Oracles").

Hashes are display-order BLOBs, every row carries the height of the block that wrote it (undo =
delete above a height), prices are integer US cents per BCH.
"""

from __future__ import annotations

from indexer.store.schema import Migration

COMPONENT = "oracle"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        COMPONENT,
        1,
        "feed updates and signed price messages",
        """
        -- One row per oracle UTXO of a configured feed (each update re-creates it).
        CREATE TABLE oracle_updates (
            txid         BLOB NOT NULL,
            vout         INTEGER NOT NULL,
            category     BLOB NOT NULL,
            layout       TEXT NOT NULL CHECK (layout IN ('delphi', 'price9', 'legacy36')),
            height       INTEGER NOT NULL REFERENCES blocks(height),
            time         INTEGER NOT NULL,            -- block time
            position     INTEGER NOT NULL,
            oracle_time  INTEGER NOT NULL,            -- the commitment's timestamp (or block time)
            sequence     INTEGER NOT NULL,
            price        INTEGER,                     -- NULL: not a price (metadata)
            use_fee      INTEGER,
            commitment   BLOB NOT NULL,
            PRIMARY KEY (txid, vout)
        ) WITHOUT ROWID;
        CREATE INDEX oracle_updates_feed_time
            ON oracle_updates(category, oracle_time, sequence);
        CREATE INDEX oracle_updates_feed_sequence ON oracle_updates(category, sequence);
        CREATE INDEX oracle_updates_height ON oracle_updates(height);

        -- Signed GP messages published on chain (`OP_RETURN "GPPM" …`); status says whether
        -- the signature verified against a configured key. price is NULL unless status is
        -- 'valid' and the message is a price (not metadata).
        CREATE TABLE oracle_messages (
            txid              BLOB NOT NULL,
            vout              INTEGER NOT NULL,
            height            INTEGER NOT NULL REFERENCES blocks(height),
            time              INTEGER NOT NULL,
            position          INTEGER NOT NULL,
            pubkey            BLOB NOT NULL,
            message           BLOB NOT NULL,
            signature         BLOB NOT NULL,
            status            TEXT NOT NULL
                                  CHECK (status IN ('valid', 'invalid_signature', 'unknown_key')),
            msg_time          INTEGER NOT NULL,
            message_sequence  INTEGER NOT NULL,
            data_sequence     INTEGER NOT NULL,
            value             INTEGER NOT NULL,       -- the message's last field, whatever it is
            price             INTEGER,
            PRIMARY KEY (txid, vout)
        ) WITHOUT ROWID;
        CREATE INDEX oracle_messages_key_time ON oracle_messages(pubkey, msg_time);
        CREATE INDEX oracle_messages_height ON oracle_messages(height);
        """,
    ),
    Migration(
        COMPONENT,
        2,
        "the interest-rate layout",
        """
        -- The lending protocol's interest-rate oracle joins the feed layouts (layout 'rate':
        -- price = its bp value, sequence = its timestamp). SQLite cannot alter a CHECK, so the
        -- table is rebuilt with its rows and indexes.
        CREATE TABLE oracle_updates_v2 (
            txid         BLOB NOT NULL,
            vout         INTEGER NOT NULL,
            category     BLOB NOT NULL,
            layout       TEXT NOT NULL
                             CHECK (layout IN ('delphi', 'price9', 'legacy36', 'rate')),
            height       INTEGER NOT NULL REFERENCES blocks(height),
            time         INTEGER NOT NULL,
            position     INTEGER NOT NULL,
            oracle_time  INTEGER NOT NULL,
            sequence     INTEGER NOT NULL,
            price        INTEGER,                     -- the rate layout: the bp value
            use_fee      INTEGER,
            commitment   BLOB NOT NULL,
            PRIMARY KEY (txid, vout)
        ) WITHOUT ROWID;
        INSERT INTO oracle_updates_v2 SELECT * FROM oracle_updates;
        DROP TABLE oracle_updates;
        ALTER TABLE oracle_updates_v2 RENAME TO oracle_updates;
        CREATE INDEX oracle_updates_feed_time
            ON oracle_updates(category, oracle_time, sequence);
        CREATE INDEX oracle_updates_feed_sequence ON oracle_updates(category, sequence);
        CREATE INDEX oracle_updates_height ON oracle_updates(height);
        -- "The rate at t" without knowing the rate feed's category.
        CREATE INDEX oracle_updates_layout_time ON oracle_updates(layout, oracle_time);
        """,
    ),
)
