"""The PostgreSQL store against a real server (tests/postgres_server.py): the same retain,
recall, documents, corrections, forget, export and import as on SQLite, opening rules
(never a database that is not mem's), concurrency across processes, and faults (a wrong URL,
a server down, refused credentials, no pgvector, the server killed mid-import)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from memcli import exchange, lifecycle
from memcli.recall.pipeline import recall
from memcli.recall.types import RecallOptions
from memcli.retain import Retainer, RetainItem
from memcli.store import StoreError
from memcli.store.location import open_store
from memcli.store.postgres import PgStore
from memcli.store.postgres import schema as pg_schema
from memcli.storeurl import masked, scrub

NOW = datetime(2026, 11, 20)
PUBLIC_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"

NOTES = [
    RetainItem(text="Maya decided to move to Lisbon in May 2026.", source_id="n1"),
    RetainItem(text="Tom's favourite food is grilled sardines.", source_id="n2"),
    RetainItem(text="Maya and Tom adopted a cat named Pixel.", source_id="n3"),
    RetainItem(text="我每天晚上十一点睡觉，睡眠很重要。", source_id="n4"),
    RetainItem(text="The café on Rua Augusta closes at nine.", source_id="n5"),
    RetainItem(
        text="Tom started a new job at the harbour in March 2026.",
        source_id="n6",
        tags=["work"],
    ),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store location of each backend: a file path, or a fresh database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "mem.db")
    return request.getfixturevalue("pg_url")


def retain(store, items, embedder, bank: str = "default"):
    return Retainer(store, bank, embedder, now=NOW).retain(items)


def top(store, query: str, embedder, **options) -> list[str]:
    result = recall(store, "default", query, RecallOptions(now=NOW, **options), embedder=embedder)
    return [r.fact.text for r in result.results]


def test_the_backends_store_and_recall_the_same(location: str, embedder) -> None:
    with open_store(location) as store:
        summary = retain(store, NOTES, embedder)
        assert summary.facts == len(NOTES)
        assert top(store, "What did Maya decide?", embedder)[0].startswith("Maya decided")
        assert top(store, "睡眠", embedder)[0].startswith("我每天")
        # Diacritics fold as SQLite's tokenizer folds them, both ways.
        assert "café" in top(store, "cafe", embedder)[0]
        assert "sardines" in top(store, "sardine food", embedder)[0]
        assert top(store, "What happened in March 2026?", embedder)[0].startswith("Tom started")
        tagged = top(store, "job", embedder, tags=["work"], tags_match="any_strict")
        assert tagged == ["Tom started a new job at the harbour in March 2026."]


def test_postgres_ranks_as_sqlite_on_the_same_facts(tmp_path: Path, pg_url: str, embedder) -> None:
    """The four arms on both backends over the same notes: the same facts, in nearly the
    same order (keyword scores differ: ts_rank_cd is not BM25)."""
    queries = ["Who is Pixel?", "Where does Tom work?", "Lisbon", "什么时候睡觉", "food"]
    results = {}
    for name, loc in (("sqlite", str(tmp_path / "mem.db")), ("pg", pg_url)):
        with open_store(loc) as store:
            retain(store, NOTES, embedder)
            results[name] = [top(store, q, embedder)[:3] for q in queries]
    for got_sqlite, got_pg in zip(results["sqlite"], results["pg"]):
        assert got_sqlite[0] == got_pg[0]
        assert set(got_sqlite) == set(got_pg)


def test_a_document_retained_again_is_replaced_whole_and_ids_are_never_reused(
    location: str, embedder
) -> None:
    with open_store(location) as store:
        first = [RetainItem(text=f"Line {i} of the plan.", document_id="plan") for i in range(3)]
        retain(store, first, embedder)
        old_ids = store.facts.fact_ids_of_bank(store.banks.require_bank("default"))
        second = [RetainItem(text="The plan was cancelled.", document_id="plan")]
        summary = retain(store, second, embedder)
        assert summary.documents_replaced == 1
        bank = store.banks.require_bank("default")
        new_ids = store.facts.fact_ids_of_bank(bank)
        assert [f.text for f in store.facts.facts_by_id(new_ids).values()] == [
            "The plan was cancelled."
        ]
        assert not set(new_ids) & set(old_ids)
        assert min(new_ids) > max(old_ids)
        # Identical content in one document is stored once.
        again = retain(store, [RetainItem(text="A note.", document_id="d")] * 2, embedder)
        assert again.facts == 1


def test_correction_forget_and_as_of(location: str, embedder) -> None:
    with open_store(location) as store:
        retain(store, [RetainItem(text="Tom lives in Porto.")], embedder)
        bank = store.banks.require_bank("default")
        (old_id,) = store.facts.fact_ids_of_bank(bank)
        old = lifecycle.current_fact(store, "default", old_id)
        items = lifecycle.as_corrections(
            store, old, [lifecycle.correction_item(store, old, "Tom lives in Lisbon.")]
        )
        retainer = Retainer(store, "default", embedder, now=NOW)
        lifecycle.retain_superseding(store, old, retainer, items)
        facts = store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank))
        closed = facts[old_id]
        assert closed.invalid_at is not None and closed.superseded_by is not None
        assert top(store, "Where does Tom live?", embedder) == ["Tom lives in Lisbon."]
        # Forgetting the correction takes exactly it, and reopens what it closed.
        sel = lifecycle.Selection(ids=[closed.superseded_by])
        plan = lifecycle.plan_forget(store, "default", sel, embedder=None)
        counts = lifecycle.forget(store, plan)
        assert counts["facts"] == 1
        assert store.health.fact_traces(closed.superseded_by) == dict.fromkeys(
            store.health.fact_traces(closed.superseded_by), 0
        )
        reopened = store.facts.facts_by_id([old_id])[old_id]
        assert reopened.invalid_at is None
        # The next fact never takes the forgotten id.
        retain(store, [RetainItem(text="Tom has a boat.")], embedder)
        assert max(store.facts.fact_ids_of_bank(bank)) > closed.superseded_by


def export_text(store, bank: str = "default", with_vectors: bool = True) -> str:
    _, lines = exchange.export_lines(store, bank, with_vectors=with_vectors)
    return "\n".join(lines) + "\n"


def import_text(store, text: str, embedder, bank: str | None = None) -> exchange.ImportReport:
    return exchange.import_lines(
        store, text.splitlines(), name="export.jsonl", bank=bank, embedder=lambda: embedder
    )


def test_export_from_sqlite_imports_into_postgres_and_back_byte_for_byte(
    tmp_path: Path, pg_url: str, embedder
) -> None:
    with open_store(tmp_path / "a.db") as sqlite_store:
        retain(sqlite_store, NOTES, embedder)
        retain(
            sqlite_store,
            [RetainItem(text=f"Part {i} of the manual.", document_id="manual") for i in range(4)],
            embedder,
        )
        original = export_text(sqlite_store)
    with open_store(pg_url) as pg:
        import_text(pg, original, embedder)
        through_postgres = export_text(pg)
        assert through_postgres == original
        assert top(pg, "What did Maya decide?", embedder)[0].startswith("Maya decided")
    with open_store(tmp_path / "b.db") as back:
        import_text(back, through_postgres, embedder)
        assert export_text(back) == original


def test_a_database_that_is_not_mem_s_is_refused_untouched(pg_server, pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices(id int)")
    with pytest.raises(StoreError, match="not mem's.*left untouched"):
        PgStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ]
        ext = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert tables == ["invoices"] and ext is None


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    import psycopg

    PgStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"newer mem \(schema 99"):
        PgStore(pg_url)


def test_a_read_of_a_database_with_no_store_creates_nothing(pg_url: str) -> None:
    with pytest.raises(StoreError, match="no mem store"):
        PgStore(pg_url, create=False)
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert (
            conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
            == 0
        )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@/db?host=/nonexistent-mem-socket", "cannot reach the PostgreSQL server"),
        ("postgresql://u@host:notaport/db", "not a valid postgresql:// URL"),
        ("postgresql://u@localhost:5432", "names no database"),
        ("mysql://u@h/db", "not a store location"),
    ],
)
def test_bad_locations_are_one_line_errors(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message) as caught:
        open_store(url)
    assert "\n" not in str(caught.value)


def test_passwords_never_appear_in_errors(pg_server, pg_url: str) -> None:
    secret = "s3cr3t-Pa55"
    with pg_server.admin() as conn:
        conn.execute(f"CREATE ROLE mem_pw LOGIN PASSWORD '{secret}'")
    database = pg_url.split("/")[3].split("?")[0]
    # Refused credentials (the server trusts local users: a wrong database name is refused
    # with the user's password in the URL, which must not show).
    url = pg_server.url(database + "_missing", user="mem_pw", password=secret)
    with pytest.raises(StoreError) as caught:
        PgStore(url)
    assert secret not in str(caught.value)
    assert "***" in str(caught.value) or "mem_pw" in str(caught.value)
    assert masked(url).count(secret) == 0
    assert scrub(f"failed for {url}", url).count(secret) == 0


def test_refused_credentials_are_named(pg_server) -> None:
    """A server that asks this user for a password refuses a wrong one: a one-line error
    that names the refusal and never the password."""
    import psycopg

    database = pg_server.create_database()
    hba = Path(pg_server.server.pgdata) / "pg_hba.conf"
    trusting = hba.read_text()
    try:
        with pg_server.admin() as conn:
            conn.execute("CREATE ROLE mem_user LOGIN PASSWORD 'right-one'")
            conn.execute(f'ALTER DATABASE "{database}" OWNER TO mem_user')
        hba.write_text("local all mem_user scram-sha-256\n" + trusting)
        with pg_server.admin() as conn:
            conn.execute("SELECT pg_reload_conf()")
        wrong = pg_server.url(database, user="mem_user", password="wrong-one")
        with pytest.raises(StoreError, match="refused the credentials") as caught:
            PgStore(wrong)
        assert "wrong-one" not in str(caught.value) and "\n" not in str(caught.value)
        right = pg_server.url(database, user="mem_user", password="right-one")
        with pytest.raises(StoreError, match="a superuser runs CREATE EXTENSION vector"):
            PgStore(right)
        with psycopg.connect(pg_server.url(database), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        with PgStore(right) as store:
            assert store.banks.bank_names() == []
            assert "right-one" not in store.path
    finally:
        hba.write_text(trusting)
        with pg_server.admin() as conn:
            conn.execute("SELECT pg_reload_conf()")
        pg_server.drop_database(database)
        with pg_server.admin() as conn:
            conn.execute("DROP ROLE IF EXISTS mem_user")


def test_a_database_without_pgvector_is_named(pg_url: str) -> None:
    import psycopg

    PgStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # CASCADE: the sentence vectors' column (schema 3) is of pgvector's type.
        conn.execute("DROP EXTENSION vector CASCADE")
    with pytest.raises(StoreError, match="pgvector extension is missing"):
        PgStore(pg_url)


def test_without_psycopg_a_url_names_the_extra(pg_url: str) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from memcli.store.location import open_store\n"
        "from memcli.store import StoreError\n"
        "try:\n"
        f"    open_store({pg_url!r})\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'memcli[postgres]'" in out.stdout


WRITER = """
import sys
from datetime import datetime
from memcli.models.load import load_embedder
from memcli.retain import Retainer, RetainItem
from memcli.store.location import open_store
url, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
embedder = load_embedder()
with open_store(url) as store:
    for i in range(n):
        Retainer(store, "default", embedder, now=datetime(2026, 11, 20)).retain(
            [RetainItem(text=f"Writer {who} wrote note {i}.")]
        )
        if i % 2:  # a document replaced again and again by every writer
            Retainer(store, "default", embedder, now=datetime(2026, 11, 20)).retain(
                [RetainItem(text=f"Version {who}.{i} line {j}.", document_id="shared")
                 for j in range(3)]
            )
"""


def test_writers_in_many_processes_lose_nothing_and_share_no_id(pg_url: str) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(w), "6"]) for w in range(4)
    ]
    assert [p.wait(timeout=300) for p in writers] == [0, 0, 0, 0]
    with PgStore(pg_url) as store:
        bank = store.banks.require_bank("default")
        facts = store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank))
        notes = sorted(f.text for f in facts.values() if f.text.startswith("Writer"))
        assert notes == sorted(f"Writer {w} wrote note {i}." for w in range(4) for i in range(6))
        # One version of the shared document, whole.
        shared = [f for f in facts.values() if f.document_id == "shared"]
        versions = {f.text.split(" line ")[0] for f in shared}
        assert len(versions) == 1 and len(shared) == 3
        assert store.banks.bank_names() == ["default"]  # no staging bank left
        assert store.health.quick_check() == ["ok"]
        counts = store.health.index_counts()
        assert counts["facts"] == counts["fts_rows"] == counts["vectors"] == len(facts)


def test_the_server_killed_mid_import_writes_nothing_and_the_next_run_completes(
    tmp_path: Path, pg_server, pg_url: str, embedder
) -> None:
    """The session's server is killed (SIGKILL, its every process) half way through an
    import, and started again (crash recovery) before the test ends."""
    with open_store(tmp_path / "src.db") as src:
        retain(
            src, [RetainItem(text=f"Fact number {i} of the archive.") for i in range(120)], embedder
        )
        text = export_text(src)
    PgStore(pg_url).close()
    lines = text.splitlines()

    def killing() -> object:
        for number, line in enumerate(lines):
            if number == 60:
                pg_server.kill()
            yield line

    try:
        with PgStore(pg_url) as store:
            with pytest.raises(StoreError, match="lost the connection") as caught:
                exchange.import_lines(
                    store, killing(), name="export.jsonl", bank=None, embedder=lambda: embedder
                )
            assert "\n" not in str(caught.value)
        with pytest.raises(StoreError, match="cannot reach the PostgreSQL server") as down:
            PgStore(pg_url)
        assert "\n" not in str(down.value)
    finally:
        pg_server.restart()
    with PgStore(pg_url) as store:
        assert store.banks.bank_names() == []
        assert store.health.row_counts()["facts"] == 0
        report = import_text(store, text, embedder)
        assert report.counts["facts"] == 120
        assert export_text(store) == text


def test_doctor_checks_of_a_postgres_store(pg_url: str, embedder) -> None:
    with PgStore(pg_url) as store:
        retain(store, NOTES, embedder)
        assert store.health.quick_check() == ["ok"]
        assert store.health.fts_integrity_error() is None
        assert store.health.foreign_key_violations() == 0
        counts = store.health.index_counts()
        assert counts == {"facts": 6, "fts_rows": 6, "vectors": 6}
        versions = dict(store.health.versions())
        assert versions["pgvector"] == "0.6.2"
        assert versions["schema"] == str(pg_schema.SCHEMA_VERSION)
        store.conn.execute("UPDATE fact_fts SET doc = to_tsvector('simple', 'nothing')")
        assert store.health.fts_integrity_error() == "6 keyword rows do not match their text"
        store.conn.execute("UPDATE facts SET tags = 'not json' WHERE id = 1")
        assert store.health.damaged_fact_fields() == [1]


def test_json_columns_keep_their_text(pg_url: str, embedder) -> None:
    """Metadata keeps its keys' order (json text, not jsonb), so exports match SQLite's."""
    with PgStore(pg_url) as store:
        retain(
            store, [RetainItem(text="A note.", metadata={"z": 1, "a": {"y": 2, "b": 3}})], embedder
        )
        (fact,) = store.facts.facts_by_id([1]).values()
        assert json.dumps(fact.metadata) == '{"z": 1, "a": {"y": 2, "b": 3}}'


def test_the_cli_on_a_postgres_url_end_to_end(pg_server, pg_url: str, tmp_path: Path) -> None:
    """mem --db postgresql://... retain, recall, list, export, import, doctor and config show:
    the same commands and JSON, and the URL's password never printed."""
    from typer.testing import CliRunner

    from memcli.cli import app

    runner = CliRunner()
    database = pg_url.split("/")[3].split("?")[0]
    with pg_server.admin() as conn:
        conn.execute("ALTER ROLE postgres PASSWORD 'pw-never-shown'")
    url = pg_server.url(database, password="pw-never-shown")

    def mem(*args: str, env: dict | None = None):
        result = runner.invoke(app, ["--db", url, *args], env=env)
        assert "pw-never-shown" not in result.output
        return result

    assert mem("retain", "Maya decided to move to Lisbon in May 2026.").exit_code == 0
    assert mem("retain", "Tom's favourite food is grilled sardines.").exit_code == 0
    found = json.loads(mem("recall", "What did Maya decide?", "--format", "json").output)
    assert found["results"][0]["text"] == "Maya decided to move to Lisbon in May 2026."
    assert "2 " in mem("list").output.splitlines()[0]
    out = tmp_path / "bank.jsonl"
    assert mem("export", "-o", str(out)).exit_code == 0
    assert mem("import", str(out), "--into", "copy").exit_code == 0
    assert mem("--bank", "copy", "recall", "sardines").output.count("sardines") >= 1
    doctor = mem("doctor", "--format", "json")
    assert doctor.exit_code == 0, doctor.output
    report = json.loads(doctor.output)
    assert "pw-never-shown" not in json.dumps(report)
    shown = runner.invoke(app, ["config", "show"], env={"MEM_DB": url})
    assert "pw-never-shown" not in shown.output and "postgres:***@" in shown.output
    refused = mem("--bank", "nope", "recall", "x")
    assert refused.exit_code != 0 and "unknown bank" in refused.output


def test_big_banks_search_the_hnsw_index_and_rank_its_candidates_exactly(
    pg_url: str, bare_fact, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past EXACT_SCAN_MAX vectors a bank is searched through HNSW: the plan uses the index,
    the results are the exact top k (ranked by their exact cosine), and a bank or type filter
    that leaves fewer than k of the index's candidates falls back to the exact scan."""
    import numpy as np

    from memcli.store.postgres import vectors as pg_vectors

    monkeypatch.setattr(pg_vectors, "EXACT_SCAN_MAX", 100)
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((400, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with PgStore(pg_url) as store:
        with store.atomic():
            bank = store.banks.ensure_bank("default", NOW)
            other = store.banks.ensure_bank("other", NOW)
            store.vectors.ensure_vectors(bank, "test", None, 384)
            store.vectors.ensure_vectors(other, "test", None, 384)
            ids = []
            for i, vec in enumerate(vecs):
                kind = "experience" if i % 40 == 0 else "world"
                target = other if i % 2 else bank
                ids.append(bare_fact(store, target, i, vec, NOW, fact_type=kind))
        query = vecs[0] + 0.1 * vecs[2]
        mine = [i for n, i in enumerate(ids) if n % 2 == 0]
        cos = {i: float(np.dot(vecs[n], query) / np.linalg.norm(query)) for n, i in enumerate(ids)}
        exact = sorted(mine, key=lambda i: -cos[i])[:10]
        found = store.vectors.nearest(bank, query, 10)
        assert [f for f, _ in found] == exact
        assert all(abs(c - cos[f]) < 1e-4 for f, c in found)
        # The index serves the query's inner form (on a table this small the planner would
        # rather sort a sequential scan: told not to, it takes the index, not a sort).
        store.conn.execute("ANALYZE fact_vec")
        store.conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in store.conn.execute(
                "EXPLAIN SELECT v.fact_id FROM fact_vec v ORDER BY v.embedding <=> %s LIMIT 100",
                (pg_vectors.Vec(query),),
            )
        )
        store.conn.execute("RESET enable_seqscan")
        assert "fact_vec_hnsw" in plan and "Sort" not in plan
        # The bank's 10 experience facts: the index's 100 candidates hold only a few of
        # them, so the exact scan answers, with all 10 in order.
        rare = store.vectors.nearest(bank, query, 12, ["experience"])
        experience = [i for n, i in enumerate(ids) if n % 40 == 0]
        assert [f for f, _ in rare] == sorted(experience, key=lambda i: -cos[i])


def test_two_corrections_of_one_fact_at_once_one_wins_whole(pg_url: str, embedder) -> None:
    """Two connections (as two machines) correct the same fact at the same moment: one
    correction is stored and closes it, the other is refused with nothing of it stored."""
    import threading

    with PgStore(pg_url) as store:
        retain(store, [RetainItem(text="The meeting is on Monday.")], embedder)
        (fid,) = store.facts.fact_ids_of_bank(store.banks.require_bank("default"))
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def correct(text: str) -> None:
        with PgStore(pg_url) as store:
            old = lifecycle.current_fact(store, "default", fid)
            items = lifecycle.as_corrections(
                store, old, [lifecycle.correction_item(store, old, text)]
            )
            barrier.wait()
            try:
                lifecycle.retain_superseding(
                    store, old, Retainer(store, "default", embedder, now=NOW), items
                )
                outcomes.append("stored")
            except lifecycle.LifecycleError as exc:
                outcomes.append(str(exc))

    threads = [
        threading.Thread(target=correct, args=(t,))
        for t in ("The meeting is on Tuesday.", "The meeting is on Friday.")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes)[-1] == "stored"
    assert "corrected meanwhile" in sorted(outcomes)[0]
    with PgStore(pg_url) as store:
        facts = store.facts.facts_by_id(store.facts.fact_ids_of_bank(1))
        assert len(facts) == 2  # the old fact and one correction, nothing of the other
        assert facts[fid].superseded_by in facts


def test_the_mcp_server_on_a_postgres_store(pg_url: str) -> None:
    """mem --db postgresql://... mcp: retain and recall tools answer as the CLI does."""
    from typer.testing import CliRunner

    from memcli.cli import app
    from tests.test_mcp import Client, run, server_params

    async def session() -> dict:
        async with Client(server_params(pg_url)) as client:
            stored = await client.call_tool(
                "retain", {"text": "Decided to book the Lisbon trip for May.", "at": "2026-03-21"}
            )
            found = await client.call_tool(
                "recall", {"query": "Lisbon", "now": "2026-11-20", "detail": True}
            )
        return {"stored": stored, "found": found}

    out = run(session)
    assert not out["stored"].is_error and not out["found"].is_error
    via_mcp = out["found"].structured_content
    assert via_mcp["results"][0]["text"] == "Decided to book the Lisbon trip for May."
    cli = CliRunner().invoke(
        app, ["--db", pg_url, "recall", "Lisbon", "--now", "2026-11-20", "--format", "json"]
    )
    # detail: every field of the CLI's JSON; the MCP answer also counts what did not fit.
    assert via_mcp.pop("omitted") == 0
    assert via_mcp == json.loads(cli.stdout)


def test_mem_sync_on_a_postgres_store_keeps_the_bank_in_step_with_the_folder(
    pg_url: str, tmp_path: Path
) -> None:
    """mem sync and retain --file on a postgresql:// store (store.sources, schema 2): what a
    sync made is replaced and forgotten as the folder changes, what it did not make stays,
    an unchanged file is not retained again."""
    from typer.testing import CliRunner

    from memcli.cli import app

    runner = CliRunner()

    def mem(*args: str):
        result = runner.invoke(app, ["--db", pg_url, *args])
        assert result.exit_code == 0, result.output
        return result

    def documents() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in mem("list", "--format", "jsonl").stdout.splitlines():
            fact = json.loads(line)
            out.setdefault(fact["document_id"], []).append(fact["text"])
        return {k: sorted(v) for k, v in out.items()}

    root = tmp_path / "vault"
    (root / "d").mkdir(parents=True)
    (root / "a.md").write_text("Priya moved to Porto in 2025.\n")
    (root / "d" / "b.md").write_text("The offsite is in Braga.\n")
    (root / "c.md").write_text("Tom plays the cello.\n")
    mem("retain", "Mine, not the sync's.", "--document", "mine")
    assert "3 added, 0 replaced, 0 forgotten, 0 unchanged" in mem("sync", str(root)).stderr
    first = documents()
    assert first == {
        "a.md": ["Priya moved to Porto in 2025."],
        "d/b.md": ["The offsite is in Braga."],
        "c.md": ["Tom plays the cello."],
        "mine": ["Mine, not the sync's."],
    }
    (root / "a.md").write_text("Priya moved to Braga in 2026.\n")
    (root / "c.md").unlink()
    (root / "e.md").write_text("The train leaves at 8:05.\n")
    planned = mem("sync", str(root), "--dry-run").stdout.splitlines()
    assert sorted(line.split()[0] for line in planned) == ["add", "forget", "replace"]
    assert documents() == first  # a dry run changes nothing
    assert "1 added, 1 replaced, 1 forgotten, 1 unchanged" in mem("sync", str(root)).stderr
    assert documents() == {
        "a.md": ["Priya moved to Braga in 2026."],
        "d/b.md": ["The offsite is in Braga."],
        "e.md": ["The train leaves at 8:05."],
        "mine": ["Mine, not the sync's."],
    }
    assert "0 added, 0 replaced, 0 forgotten, 3 unchanged" in mem("sync", str(root)).stderr
    # retain --file: its absolute path is its document; the same file again is skipped
    assert "1 fact stored" in mem("retain", "--file", str(root / "e.md")).stderr
    assert "as it was retained: skipped" in mem("retain", "--file", str(root / "e.md")).stderr


def test_a_store_of_schema_1_is_read_as_it_is_read_only_and_upgraded_by_a_write(
    pg_url: str, embedder
) -> None:
    """A store made before documents recorded their source (schema 1): a read-only opening
    (a sync's dry run) reads it without upgrading it, none of its documents with a known
    source; the next writer upgrades it in one transaction, its facts kept."""
    with PgStore(pg_url) as store:
        retain(store, [RetainItem(text="An older note.", document_id="a.md")], embedder)
        store.conn.execute(
            "DROP INDEX documents_sync_root; ALTER TABLE documents DROP COLUMN sync_root; "
            "ALTER TABLE documents DROP COLUMN source_hash; DROP TABLE sentence_vec; "
            "UPDATE meta SET value = '1' WHERE key = 'schema_version'"
        )
    with PgStore(pg_url, create=False, readonly=True) as store:
        assert store.version_at_open == 1
        bank = store.banks.require_bank("default")
        (source,) = store.sources.document_sources(bank, ["a.md"]).values()
        assert (source.external_id, source.source_hash, source.sync_root) == ("a.md", None, None)
        assert store.sources.synced_documents(bank, "/anywhere") == {}
        assert store.schema_version() == 1
        # Nor sentence vectors (schema 3): the semantic arm reads the facts' own vectors.
        query = store.vectors.vectors_for([1])[1]
        assert store.vectors.nearest_sentences(bank, query, 5) == []
        assert store.vectors.sentence_vectors([1]) == {}
        assert store.vectors.nearest(bank, query, 5)[0][0] == 1
    with PgStore(pg_url) as store:
        assert store.schema_version() == pg_schema.SCHEMA_VERSION
        bank = store.banks.require_bank("default")
        row = store.documents.document_row(bank, "a.md")
        with store.atomic():
            store.sources.set_document_source(row, "hash", "/vault")
        assert store.sources.synced_documents(bank, "/vault")["a.md"].source_hash == "hash"
        assert [f.text for f in store.facts.facts_by_id([1]).values()] == ["An older note."]
