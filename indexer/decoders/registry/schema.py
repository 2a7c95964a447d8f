"""The registry decoder's tables (documented in docs/index-schema.md, "Registries").

Chain data (`registry_links`, `registry_publications`) is keyed by height and undone by
deleting above a height. What the background fetch job learns (`registry_fetches`,
`registry_documents`) hangs off a publication with ON DELETE CASCADE, so a publication that a
reorg removes takes its fetches with it. Off-chain sources are not chain data: no height.
"""

from __future__ import annotations

from indexer.store.schema import Migration

COMPONENT = "registry"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        COMPONENT,
        1,
        "authchains, publications, fetches, last good copies, off-chain sources",
        """
        -- Every authchain link after the authbase: seq 1 is the token genesis (it spends the
        -- authbase's output 0), seq n+1 spends output 0 of seq n. The head is the highest seq.
        CREATE TABLE registry_links (
            authbase  BLOB NOT NULL,                  -- display order (= the token category)
            seq       INTEGER NOT NULL,
            txid      BLOB NOT NULL,
            height    INTEGER NOT NULL REFERENCES blocks(height),
            time      INTEGER NOT NULL,
            burned    INTEGER NOT NULL CHECK (burned IN (0, 1)),
            PRIMARY KEY (authbase, seq)
        ) WITHOUT ROWID;
        CREATE INDEX registry_links_height ON registry_links(height);
        CREATE INDEX registry_links_txid ON registry_links(txid);

        -- The first `OP_RETURN "BCMR"` output of an authchain transaction.
        CREATE TABLE registry_publications (
            txid           BLOB NOT NULL,
            authbase       BLOB NOT NULL,
            seq            INTEGER NOT NULL,               -- the link's place in the chain
            vout           INTEGER NOT NULL,
            expected_hash  BLOB NOT NULL,                  -- the 32-byte digest
            hash_encoding  TEXT NOT NULL CHECK (hash_encoding IN ('digest', 'ascii-hex')),
            uris           TEXT NOT NULL,                  -- JSON array, as pushed
            height         INTEGER NOT NULL REFERENCES blocks(height),
            time           INTEGER NOT NULL,
            PRIMARY KEY (txid, authbase)
        ) WITHOUT ROWID;
        CREATE INDEX registry_publications_authbase ON registry_publications(authbase, seq);
        CREATE INDEX registry_publications_height ON registry_publications(height);

        -- Every fetch attempt of a publication (the background job's log).
        CREATE TABLE registry_fetches (
            id           INTEGER PRIMARY KEY,
            txid         BLOB NOT NULL,
            authbase     BLOB NOT NULL,
            url          TEXT NOT NULL,
            fetched_at   INTEGER NOT NULL,
            http_status  INTEGER,                         -- NULL: no HTTP answer
            actual_hash  BLOB,                            -- sha256 of the raw bytes
            size         INTEGER,
            matches      INTEGER NOT NULL CHECK (matches IN (0, 1)),
            error        TEXT,
            FOREIGN KEY (txid, authbase) REFERENCES registry_publications(txid, authbase)
                ON DELETE CASCADE
        );
        CREATE INDEX registry_fetches_publication ON registry_fetches(txid, authbase, fetched_at);

        -- The copy served for a publication: the last good one (hash matches, valid v2 JSON);
        -- while there is none, the last valid-JSON copy (matches = 0 says so).
        CREATE TABLE registry_documents (
            txid         BLOB NOT NULL,
            authbase     BLOB NOT NULL,
            url          TEXT NOT NULL,
            fetched_at   INTEGER NOT NULL,
            http_status  INTEGER NOT NULL,
            actual_hash  BLOB NOT NULL,
            matches      INTEGER NOT NULL CHECK (matches IN (0, 1)),
            content      BLOB NOT NULL,
            PRIMARY KEY (txid, authbase),
            FOREIGN KEY (txid, authbase) REFERENCES registry_publications(txid, authbase)
                ON DELETE CASCADE
        ) WITHOUT ROWID;

        -- Configured off-chain registries (URLs or local files), merged into /all.
        CREATE TABLE registry_offchain (
            source       TEXT PRIMARY KEY,
            url          TEXT NOT NULL,
            fetched_at   INTEGER NOT NULL,
            http_status  INTEGER,
            actual_hash  BLOB,
            content      BLOB,                            -- the last good (valid JSON) copy
            error        TEXT
        );
        """,
    ),
)
