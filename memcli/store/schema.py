"""The schema, as the migrations that build it. A file's PRAGMA user_version says how many ran.

Each entry migrates the schema from version i to i + 1: SQL text, or a function of the
connection for steps SQL alone cannot do. Add new entries at the end; never edit one that
has shipped. Migrations run inside one write transaction with foreign keys off (a table
rebuild must not cascade), and `PRAGMA foreign_key_check` must pass before it commits.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import numpy as np

from memcli.store.types import content_hash, parse_iso
from memcli.store.vector_format import HALF, half_sign_bits, sign_bits, vector_table_sql

# "mem" + schema family 1: set on every file mem creates, so a foreign SQLite file that
# happens to have a user_version is never mistaken for a store.
APPLICATION_ID = 0x6D656D01

V1 = """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE banks(
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL
    );
    CREATE TABLE documents(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        external_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE(bank_id, external_id)
    );
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        document_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
        source_id TEXT,
        text TEXT NOT NULL
    );
    CREATE TABLE facts(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        context TEXT,
        fact_type TEXT NOT NULL CHECK (fact_type IN ('world', 'experience', 'observation')),
        mentioned_at TEXT NOT NULL,
        occurred_start TEXT,
        occurred_end TEXT,
        -- when the fact happened if known, else when it was said: the temporal arm's axis
        event_time TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        proof_count INTEGER NOT NULL DEFAULT 1,
        source_id TEXT,
        document_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
        chunk_id INTEGER REFERENCES chunks(id) ON DELETE SET NULL,
        content_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE(bank_id, content_hash)
    );
    CREATE INDEX facts_event_time ON facts(bank_id, event_time);
    CREATE INDEX facts_document ON facts(document_id);
    CREATE TABLE fact_tags(
        fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY(fact_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX fact_tags_tag ON fact_tags(tag);
    CREATE TABLE entities(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        aliases TEXT NOT NULL DEFAULT '[]',
        first_seen TEXT,
        last_seen TEXT,
        mention_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE entity_keys(
        key TEXT NOT NULL,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        PRIMARY KEY(key, entity_id)
    ) WITHOUT ROWID;
    CREATE TABLE fact_entities(
        fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        PRIMARY KEY(fact_id, entity_id)
    ) WITHOUT ROWID;
    CREATE INDEX fact_entities_entity ON fact_entities(entity_id);
    CREATE TABLE links(
        from_fact INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        to_fact INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('semantic', 'temporal', 'causal')),
        weight REAL NOT NULL,
        PRIMARY KEY(from_fact, to_fact, kind)
    ) WITHOUT ROWID;
    CREATE INDEX links_to ON links(to_fact);
    -- rowid = facts.id; text is pre-segmented so CJK characters are separate tokens (fts.py);
    -- lead_in is what was said just before the fact (a reply's question), weighted low
    CREATE VIRTUAL TABLE fact_fts USING fts5(
        text, context, entities, lead_in, tokenize = 'porter unicode61 remove_diacritics 2'
    );
"""

# 2: recall looks up the speakers a query names (contexts_among) on every query.
V2 = "CREATE INDEX facts_context ON facts(bank_id, lower(context));"

_FACTS_V3 = """
    CREATE TABLE facts_v3(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        context TEXT,
        fact_type TEXT NOT NULL CHECK (fact_type IN ('world', 'experience', 'observation')),
        mentioned_at TEXT NOT NULL,
        occurred_start TEXT,
        occurred_end TEXT,
        event_time TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        proof_count INTEGER NOT NULL DEFAULT 1,
        source_id TEXT,
        document_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
        chunk_id INTEGER REFERENCES chunks(id) ON DELETE SET NULL,
        -- sha256 of type, context, normalised text and times: identical content said at
        -- the same time, unique per document (or among facts of no document)
        content_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        -- valid time: from when the fact holds, and when a correction closed it (NULL: open)
        valid_from TEXT,
        invalid_at TEXT,
        superseded_by INTEGER REFERENCES facts(id) ON DELETE SET NULL
    );
"""


def _v3(conn: apsw.Connection) -> None:
    """3: dedupe per document and per time (a shared sentence belongs to each document that
    holds it; a recurring event is a new memory), valid time, per-bank embedder, staging
    banks for atomic document replacement."""
    conn.execute(
        "ALTER TABLE banks ADD COLUMN kind TEXT NOT NULL DEFAULT 'user';"
        "ALTER TABLE banks ADD COLUMN owner TEXT;"
        "ALTER TABLE banks ADD COLUMN embedder TEXT;"
        "ALTER TABLE banks ADD COLUMN embedder_fingerprint TEXT;"
        + _FACTS_V3
        + "INSERT INTO facts_v3(id, bank_id, text, context, fact_type, mentioned_at, "
        "occurred_start, occurred_end, event_time, tags, metadata, proof_count, source_id, "
        "document_id, chunk_id, content_hash, created_at, valid_from) "
        "SELECT id, bank_id, text, context, fact_type, mentioned_at, occurred_start, "
        "occurred_end, event_time, tags, metadata, proof_count, source_id, document_id, "
        "chunk_id, content_hash, created_at, mentioned_at FROM facts;"
        "DROP TABLE facts;"
        "ALTER TABLE facts_v3 RENAME TO facts;"
        "CREATE INDEX facts_event_time ON facts(bank_id, event_time);"
        "CREATE INDEX facts_document ON facts(document_id);"
        "CREATE INDEX facts_context ON facts(bank_id, lower(context));"
        "CREATE INDEX facts_source ON facts(bank_id, source_id);"
        "CREATE INDEX facts_created ON facts(bank_id, created_at);"
    )
    rows = conn.execute(
        "SELECT id, text, context, fact_type, mentioned_at, occurred_start, occurred_end FROM facts"
    ).fetchall()
    conn.executemany(
        "UPDATE facts SET content_hash = ? WHERE id = ?",
        [
            (
                content_hash(text, context, ftype, parse_iso(said), parse_iso(s), parse_iso(e)),
                fid,
            )
            for fid, text, context, ftype, said, s, e in rows
        ],
    )
    conn.execute(
        "CREATE UNIQUE INDEX facts_dedupe ON facts(bank_id, coalesce(document_id, 0), content_hash)"
    )
    # The embedder was recorded for the whole file; each bank now records its own.
    conn.execute(
        "UPDATE banks SET embedder = (SELECT value FROM meta WHERE key = 'embedder') "
        "WHERE embedder IS NULL"
    )


def _v4(conn: apsw.Connection) -> None:
    """4: vec0 indexes each fact's sign bits and keeps its float vector as an auxiliary
    column (store/vectors.py); temporal links are no longer stored but read from the time
    index at query time (store/links.py), so the stored ones go."""
    conn.execute("DELETE FROM links WHERE kind = 'temporal'")
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'fact_vec'").fetchone()
    if row is None or "embedding_bits" in row[0]:
        return
    dim = int(conn.execute("SELECT value FROM meta WHERE key = 'embedding_dim'").fetchone()[0])
    if dim % 8:
        return  # bit vectors need whole bytes: such a table keeps the exact scan
    # vec0 (0.1.9) cannot be renamed or altered: copy out, recreate, copy back.
    conn.execute(
        "CREATE TABLE fact_vec_v3(fact_id INTEGER PRIMARY KEY, bank_id, fact_type, embedding);"
        "INSERT INTO fact_vec_v3 SELECT fact_id, bank_id, fact_type, embedding FROM fact_vec;"
        "DROP TABLE fact_vec;"
    )
    conn.execute(vector_table_sql("fact_vec", dim))
    # vec0 takes a bit vector only straight from vec_bit() (INSERT ... SELECT loses the
    # value's subtype), so the rows go through Python.
    rows = conn.execute(
        "SELECT fact_id, bank_id, fact_type, embedding FROM fact_vec_v3 ORDER BY bank_id, fact_id"
    )
    conn.executemany(
        "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding_bits, embedding) "
        "VALUES(?, ?, ?, vec_bit(?), ?)",
        (
            (fid, bank, ftype, sign_bits(vec), vec.astype(HALF).tobytes())
            for fid, bank, ftype, vec in (
                (r[0], r[1], r[2], np.frombuffer(r[3], dtype=np.float32)) for r in rows.fetchall()
            )
        ),
    )
    conn.execute("DROP TABLE fact_vec_v3")


# 5: an index on the child columns of every foreign key. Without one, each deleted parent
# row (a forgotten fact, a replaced document's chunks, a deleted bank's entities) makes
# SQLite scan the whole child table: a 156-fact forget in a 101k-fact store took 23 s.
V5 = """
    CREATE INDEX chunks_document ON chunks(document_id);
    CREATE INDEX chunks_bank ON chunks(bank_id);
    CREATE INDEX entities_bank ON entities(bank_id);
    CREATE INDEX entity_keys_entity ON entity_keys(entity_id);
    CREATE INDEX facts_superseded_by ON facts(superseded_by) WHERE superseded_by IS NOT NULL;
    CREATE INDEX facts_chunk ON facts(chunk_id) WHERE chunk_id IS NOT NULL;
"""


def _v6(conn: apsw.Connection) -> None:
    """6: each fact keeps the token count of its printed block after the date
    (blocks.block_tail), so recall fits its budget without loading the tokenizer (~0.15 s
    of a cold recall). Counted here for the facts already stored."""
    from memcli.blocks import tail_tokens  # only an upgrade from schema 5 counts tokens

    conn.execute("ALTER TABLE facts ADD COLUMN tail_tokens INTEGER")
    rows = conn.execute("SELECT id, context, text FROM facts").fetchall()
    conn.executemany(
        "UPDATE facts SET tail_tokens = ? WHERE id = ?",
        ((tail_tokens(context, text), fid) for fid, context, text in rows),
    )


# 7: the facts whose period began before a time window and reaches into it are found by
# their end (few facts have one); without it a window near the present read every earlier
# fact of the bank to look at its end (store/search.py fact_ids_in_window).
V7 = """
    CREATE INDEX facts_occurred_end ON facts(bank_id, occurred_end)
        WHERE occurred_end IS NOT NULL;
"""

# 8: a fact id is never given twice. SQLite's own rowid is the largest in use plus one, so
# forgetting the newest fact handed its id to the next memory, and an agent holding it from
# an earlier recall would forget or correct another one. The largest id ever forgotten is
# kept (meta fact_id_high); a new fact takes the next id past it and past every id in use
# (insert_fact). Ids forgotten before this upgrade are not known.
V8 = """
    INSERT OR REPLACE INTO meta(key, value)
        SELECT 'fact_id_high', CAST(coalesce(max(id), 0) AS TEXT) FROM facts;
    CREATE TRIGGER facts_id_high AFTER DELETE ON facts
    WHEN OLD.id > CAST((SELECT value FROM meta WHERE key = 'fact_id_high') AS INTEGER)
    BEGIN
        UPDATE meta SET value = CAST(OLD.id AS TEXT) WHERE key = 'fact_id_high';
    END;
"""

# 9: where a document came from, so that the same input retained again is skipped and a
# folder kept in step (`mem sync`) replaces and forgets only the documents it made:
# source_hash is the hash of the input a document was made from (a file's bytes, an
# imported conversation's messages), sync_root the folder a sync made it from (absolute
# path). NULL for documents retained without a known source (JSONL, --document).
V9 = """
    ALTER TABLE documents ADD COLUMN source_hash TEXT;
    ALTER TABLE documents ADD COLUMN sync_root TEXT;
    CREATE INDEX documents_sync_root ON documents(bank_id, sync_root)
        WHERE sync_root IS NOT NULL;
"""

# 10: sentence vectors. A fact that says several things also keeps one vector for each of
# its longer sentences (retain.sentence_texts), half precision like fact_vec's floats; the
# semantic arm scores a fact by the best of its vectors (store/vectors.py). Not a vec0
# table: its rows are few (~0.3 of the facts' tokens) and a bank's are read whole into one
# matrix. Facts stored before have none until `mem reembed`.
V10 = """
    CREATE TABLE sentence_vec(
        fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        bank_id INTEGER NOT NULL,
        fact_type TEXT NOT NULL,
        embedding BLOB NOT NULL
    );
    CREATE INDEX sentence_vec_bank ON sentence_vec(bank_id);
    CREATE INDEX sentence_vec_fact ON sentence_vec(fact_id);
"""


def _v11(conn: apsw.Connection) -> None:
    """11: sentence vectors searched by their sign bits, as fact vectors are. Reading a bank's
    sentence rows whole (768 bytes of floats each) and converting them was 1.4 s of CPU at
    200k sentences, in every new process. Each row now also holds its sign bits, and one
    covering index holds every row's bank, type, fact and bits (~60 bytes a sentence), so a
    search reads the index, ranks by Hamming distance and reads only its short list's floats
    by rowid (store/vectors.py SentenceScan)."""
    conn.execute("ALTER TABLE sentence_vec ADD COLUMN bits BLOB")
    last = 0
    while True:  # a batch of rows at a time: a big store's floats are never all in memory
        rows = conn.execute(
            "SELECT rowid, embedding FROM sentence_vec WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, 10_000),
        ).fetchall()
        if not rows:
            break
        conn.executemany(
            "UPDATE sentence_vec SET bits = ? WHERE rowid = ?",
            [
                (half_sign_bits(np.frombuffer(blob, dtype=HALF)).tobytes(), rowid)
                for rowid, blob in rows
            ],
        )
        last = rows[-1][0]
    conn.execute("DROP INDEX sentence_vec_bank")
    conn.execute(
        "CREATE INDEX sentence_vec_scan ON sentence_vec(bank_id, fact_type, fact_id, bits)"
    )


MIGRATIONS: list[str | Callable[[apsw.Connection], None]] = [
    V1,
    V2,
    _v3,
    _v4,
    V5,
    _v6,
    V7,
    V8,
    V9,
    V10,
    _v11,
]
SCHEMA_VERSION = len(MIGRATIONS)
