"""The pgvector path of the PostgreSQL inventory, on a PostgreSQL 16 with pgvector from the `pgserver`
wheel (the machine's PostgreSQL has no pgvector: there the path must stay off and say why)."""

from __future__ import annotations

import json
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from test_hybrid import QUERIES, TOOLS, ConceptEmbedder, make_tool  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from awb.config import Config, SearchConfig  # noqa: E402
from awb.inventory.postgres import PostgresStore  # noqa: E402
from awb.inventory.postgres_vectors import PgVectorIndex, table_name  # noqa: E402
from awb.inventory.sqlite import SQLiteStore  # noqa: E402
from awb.search.hybrid import HybridSearch  # noqa: E402
from awb.search.relevance import RELEVANCE_FLOOR  # noqa: E402
from awb.search.vector_index import VectorIndex  # noqa: E402
from awb.workbench import Workbench  # noqa: E402

CODE = "def run(params):\n    return None\n"
# One pgserver for the session: under pytest-xdist, every test of this file runs on one worker.
pytestmark = pytest.mark.xdist_group("pgvector_server")


@pytest.fixture(scope="session")
def pgvector_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A PostgreSQL 16 with pgvector for the session (pgserver, a dev dependency: required in CI)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it warns that XDG_RUNTIME_DIR is unset
            import pgserver
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"pgserver (a dev dependency) is required in CI: {exc}")
        pytest.skip(f"pgserver is not installed: {exc}")
    server = pgserver.get_server(tmp_path_factory.mktemp("pgserver"), cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def vector_url(pgvector_server: Any) -> Iterator[str]:
    """A fresh database on the pgvector server, dropped afterwards."""
    import psycopg

    admin = pgvector_server.get_uri()
    name = "awb_pgv_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.replace("/postgres?", f"/{name}?", 1)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def unit_vectors(count: int, dim: int, seed: int = 7) -> Any:
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def mirrored(url: str, dim: int) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(f"SELECT tool_id, model_id FROM {table_name(dim)}").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def mirror_agrees_with_the_record(url: str, dim: int) -> bool:
    """Every mirrored vector equals its tool's `tool_vectors` row, and every row is mirrored."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT v.vector, p.embedding::text FROM tool_vectors v FULL JOIN {table_name(dim)} p USING (tool_id)"
        ).fetchall()
    return all(
        record is not None
        and mirror is not None
        and np.array_equal(np.frombuffer(bytes(record), dtype="<f4"), np.array(json.loads(mirror), dtype=np.float32))
        for record, mirror in rows
    )


def test_the_path_is_active_on_a_server_with_pgvector(vector_url: str) -> None:
    store = PostgresStore(vector_url)
    try:
        info = store.server_info()
        assert info["pgvector_active"] is True
        assert info["vector_search"].startswith("pgvector HNSW (extension 0.")
        assert isinstance(store.nearest_index("m", 8), PgVectorIndex)
    finally:
        store.close()


def test_the_path_is_off_without_the_extension_or_when_configured_off(clean_pg_url: str, vector_url: str) -> None:
    plain = PostgresStore(clean_pg_url)
    off = PostgresStore(vector_url, pgvector="off")
    try:
        assert plain.server_info()["pgvector_active"] is False
        assert "pgvector not used: the server has no pgvector extension" in plain.vector_search_path
        assert "in memory per server" in plain.vector_search_path
        assert plain.nearest_index("m", 8) is None
        assert "pgvector not used: search.pgvector is 'off'" in off.vector_search_path
        assert off.nearest_index("m", 8) is None
    finally:
        plain.close()
        off.close()


def test_a_role_that_may_not_create_the_extension_keeps_vectors_in_memory_and_says_why(pgvector_server: Any) -> None:
    import psycopg

    admin = pgvector_server.get_uri()
    name = "awb_pgv_" + uuid.uuid4().hex[:12]
    role = "awb_plain_" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    store = PostgresStore(admin.replace("postgres:@", f"{role}@", 1).replace("/postgres?", f"/{name}?", 1))
    try:
        assert store.server_info()["pgvector_active"] is False
        assert 'CREATE EXTENSION vector failed: permission denied to create extension "vector"' in (
            store.vector_search_path
        )
        assert store.nearest_index("m", 8) is None
    finally:
        store.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_pgvector_nearest_matches_exact_cosine_ranking(vector_url: str) -> None:
    dim, count = 32, 200
    vectors = unit_vectors(count, dim)
    store = PostgresStore(vector_url)
    try:
        for i, vector in enumerate(vectors):
            tool = make_tool(f"tool_{i:03d}", f"tool number {i}")
            store.add_tool(tool)
            store.put_vector(tool.tool_id, "m", vector.tolist())
        index = store.nearest_index("m", dim)
        assert index is not None and index.has_vectors()
        exact = VectorIndex.from_rows(dim, store.load_vectors("m"))
        overlaps = []
        for query in unit_vectors(20, dim, seed=11):
            also = ["tool_tool_000", "tool_tool_199"]
            cosines = index.nearest(query, 10, also)
            truth = exact.nearest(query, 10, also)
            top = set(sorted(cosines, key=cosines.__getitem__, reverse=True)[:10]) - set(also)
            true_top = set(sorted(truth, key=truth.__getitem__, reverse=True)[:10]) - set(also)
            overlaps.append(len(top & true_top) / max(len(true_top), 1))
            for tool_id, cosine in cosines.items():
                assert cosine == pytest.approx(float(vectors[int(tool_id[-3:])] @ query), abs=1e-5)
            assert set(also) <= set(cosines)
        assert sum(overlaps) / len(overlaps) >= 0.95
    finally:
        store.close()


def test_existing_vectors_are_backfilled_when_the_path_is_first_enabled(vector_url: str) -> None:
    vectors = unit_vectors(5, 8)
    off = PostgresStore(vector_url, pgvector="off")
    try:
        for i, vector in enumerate(vectors):
            tool = make_tool(f"early_{i}", "written before the path was on")
            off.add_tool(tool)
            off.put_vector(tool.tool_id, "m", vector.tolist())
    finally:
        off.close()
    store = PostgresStore(vector_url)
    try:
        assert set(mirrored(vector_url, 8)) == {f"tool_early_{i}" for i in range(5)}
        index = store.nearest_index("m", 8)
        assert index is not None
        cosines = index.nearest(vectors[3], 1)
        assert list(cosines) == ["tool_early_3"]
        assert cosines["tool_early_3"] == pytest.approx(1.0, abs=1e-5)
    finally:
        store.close()


def test_a_server_with_the_path_off_still_keeps_an_existing_mirror_in_step(vector_url: str) -> None:
    first, second = unit_vectors(2, 8)
    active = PostgresStore(vector_url)
    tool = make_tool("shared", "written by both servers")
    active.add_tool(tool)
    active.put_vector(tool.tool_id, "m", first.tolist())
    off = PostgresStore(vector_url, pgvector="off")  # starts after the table exists: it writes there too
    try:
        assert "search.pgvector is 'off'" in off.vector_search_path
        off.put_vector(tool.tool_id, "m", second.tolist())
        assert mirror_agrees_with_the_record(vector_url, 8)
        index = active.nearest_index("m", 8)
        assert index is not None
        cosines = index.nearest(second, 1)
        assert cosines[tool.tool_id] == pytest.approx(1.0, abs=1e-5)
    finally:
        active.close()
        off.close()


@pytest.mark.anyio
async def test_craft_update_and_delete_through_a_workbench_keep_the_pgvector_table_in_step(
    vector_url: str, tmp_path: Path
) -> None:
    config = Config(inventory_url=vector_url, tools_dir=tmp_path / "tools", max_tools=50)
    async with Workbench(config) as workbench:
        workbench.search_engine = HybridSearch(workbench.store, ConceptEmbedder(), SearchConfig(mode="hybrid"))
        for name, description in TOOLS:
            await workbench.craft({"name": name, "description": description, "code": CODE})
        dim = ConceptEmbedder().dim
        assert len(mirrored(vector_url, dim)) == len(TOOLS)
        assert mirror_agrees_with_the_record(vector_url, dim)
        assert workbench.search("will I need an umbrella", limit=3).results[0].name == "weather_forecast"
        assert workbench.search_engine._index is not None
        assert not isinstance(workbench.search_engine._index, VectorIndex)  # no matrix in memory
        await workbench.update("word_counter", description="Forecast of rain and sunny weather, by the word.")
        assert mirror_agrees_with_the_record(vector_url, dim)
        # The new description's vector is the one searched: word counting now reads as weather.
        assert {r.name for r in workbench.search("will I need an umbrella", limit=2).results} == {
            "weather_forecast",
            "word_counter",
        }
        workbench.delete("weather_forecast")
        names = [r.name for r in workbench.search("will I need an umbrella", limit=6).results]
        assert "weather_forecast" not in names and names[0] == "word_counter"
        purged = workbench.store.delete_forever(
            [workbench.store.get_by_name("weather_forecast", include_deleted=True).tool_id]
        )  # type: ignore[union-attr]
        assert purged == 1
        assert len(mirrored(vector_url, dim)) == len(TOOLS) - 1
        assert mirror_agrees_with_the_record(vector_url, dim)


def test_hybrid_search_on_pgvector_ranks_as_on_sqlite(vector_url: str, tmp_path: Path) -> None:
    tools = [make_tool(n, d) for n, d in TOOLS]
    lite = SQLiteStore(tmp_path / "inventory.db")
    shared = PostgresStore(vector_url)
    try:
        engines = [HybridSearch(s, ConceptEmbedder(), SearchConfig(mode="hybrid")) for s in (lite, shared)]
        for store, engine in zip((lite, shared), engines, strict=True):
            for tool in tools:
                store.add_tool(tool)
                engine.index_tool(tool)
        for query, wanted in QUERIES:
            # Every tool's score, so that tools tied to float rounding (unrelated ones, ~0.01) cannot
            # swap across the cut.
            on_sqlite = [(t.name, s) for t, s in engines[0].search(query, len(tools))[1]]
            on_pgvector = [(t.name, s) for t, s in engines[1].search(query, len(tools))[1]]
            assert on_pgvector[0][0] == wanted == on_sqlite[0][0]
            assert dict(on_pgvector) == pytest.approx(dict(on_sqlite), abs=1e-4)
        # Scores are absolute on pgvector too: a query about nothing here scores under the floor.
        unrelated = engines[1].search("quantum chromodynamics lattice", 3)[1]
        assert unrelated and unrelated[0][1] < RELEVANCE_FLOOR
        assert engines[1].search("quantum chromodynamics lattice", 3, matches_only=True)[1] == []
        assert isinstance(engines[0]._index, VectorIndex) and isinstance(engines[1]._index, PgVectorIndex)
    finally:
        lite.close()
        shared.close()


def test_db_status_and_doctor_say_which_vector_path_is_active(
    vector_url: str, clean_pg_url: str, tmp_path: Path
) -> None:
    from awb.cli.main import app

    runner = CliRunner()
    paths = {}
    for name, url in (("pgvector", vector_url), ("plain", clean_pg_url)):
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps({"inventory_url": url, "port": 1}), encoding="utf-8")
        doctor = runner.invoke(app, ["doctor", "--quick", "--config", str(config), "--json"])
        checks = {c["check"]: c for c in json.loads(doctor.output)["checks"]}
        status = runner.invoke(app, ["db", "status", "--config", str(config), "--json"])
        paths[name] = (
            checks["store"]["detail"],
            checks["search"]["detail"],
            json.loads(status.output)["vector_search"],
        )
    store, search, status = paths["pgvector"]
    assert "vectors: pgvector HNSW (extension 0." in store
    assert status.startswith("pgvector HNSW (extension 0.")
    if "mode hybrid" in search:  # the embed extra is installed: the search line says the path too
        assert "vectors: pgvector HNSW" in search
    store, _, status = paths["plain"]
    assert "pgvector not used: the server has no pgvector extension" in store
    assert "in memory per server" in status and "pgvector not used" in status
