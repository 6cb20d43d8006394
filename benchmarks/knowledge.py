"""Knowledge bases: what indexing and searching a base of generated Markdown files costs.

Run: python benchmarks/knowledge.py [--files 40] [--hybrid-files 4]. Per search mode the table shows the
passages indexed, the first index, a refresh after one file changed (only that file is read again), a
refresh with nothing changed (the directory walk each search pays) and the median warm search. The ratios
compare each against the full index of the same run, so the machine's speed cancels out. Hybrid runs on
fewer files (it embeds three views of every passage) and is skipped without the `embed` extra.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rich.console import Console
from rich.table import Table

from awb.blueprints.knowledge import KnowledgeBase
from awb.config import SearchConfig
from awb.search.embeddings import EmbedderUnavailable, create_embedder, local_model_files

WORDS = (
    "refund policy travel office handbook customer return payment card days week train plane budget approval "
    "manager invoice receipt expense hotel meal laptop password account holiday leave salary contract"
).split()
QUERIES = ["refund card days", "hotel expense approval", "laptop password", "holiday leave week", "train budget"]


def write_corpus(root: Path, files: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for index in range(files):
        sections = []
        for section in range(5):
            paragraphs = [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(4)]
            sections.append(f"## Section {section}\n\n" + "\n\n".join(paragraphs))
        (root / f"doc{index:03}.md").write_text(f"# Document {index}\n\n" + "\n\n".join(sections), encoding="utf-8")


def measure(root: Path, mode: str) -> dict[str, float]:
    base = KnowledgeBase("bench", root, SearchConfig(mode=mode))  # type: ignore[arg-type]
    try:
        started = time.perf_counter()
        passages = base.refresh()
        full = time.perf_counter() - started
        changed = root / "doc000.md"
        changed.write_text(changed.read_text(encoding="utf-8") + "\n\nOne more paragraph about refunds.\n")
        started = time.perf_counter()
        base.refresh()
        one_file = time.perf_counter() - started
        started = time.perf_counter()
        base.refresh()
        unchanged = time.perf_counter() - started
        base.search(QUERIES[0])
        searches = []
        for _ in range(5):
            for query in QUERIES:
                started = time.perf_counter()
                base.search(query)
                searches.append(time.perf_counter() - started)
        return {
            "passages": passages,
            "full": full,
            "one_file": one_file,
            "unchanged": unchanged,
            "search": statistics.median(searches),
        }
    finally:
        base.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40, help="files for text search (20 passages each)")
    parser.add_argument("--hybrid-files", type=int, default=4, help="files for hybrid search (0 skips it)")
    args = parser.parse_args()
    runs: list[tuple[str, int]] = [("text", args.files)]
    if args.hybrid_files:
        try:
            local_model_files()
            embedder, _ = create_embedder("local")
            if embedder is not None:
                embedder.embed(["warm up"])  # the model loads once, outside the timings
            runs.append(("hybrid", args.hybrid_files))
        except EmbedderUnavailable as err:
            print(f"hybrid skipped: {err}")
    table = Table(title="knowledge base: index and search")
    for column in ("mode", "files", "passages", "full index", "1 file changed", "unchanged", "search (median)"):
        table.add_column(column, justify="right")
    for mode, files in runs:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            write_corpus(root, files)
            got = measure(root, mode)
        full = got["full"]
        table.add_row(
            mode,
            str(files),
            str(int(got["passages"])),
            f"{full * 1000:.1f} ms",
            f"{got['one_file'] * 1000:.1f} ms ({got['one_file'] / full:.0%})",
            f"{got['unchanged'] * 1000:.2f} ms ({got['unchanged'] / full:.1%})",
            f"{got['search'] * 1000:.2f} ms",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
