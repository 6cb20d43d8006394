"""`awb reindex`: recompute every live tool's embedding with the current model, with a progress bar."""

from __future__ import annotations

import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from awb.cli.common import inventory_missing
from awb.cli.output import fail, print_json, progress_console, say
from awb.config import load_config
from awb.errors import AwbError, Unavailable
from awb.search.embeddings import EmbedderUnavailable
from awb.workbench import Workbench


def reindex_command(config_path: Path | None, json_output: bool) -> None:
    """Embed every live tool again; reports the models the old vectors came from."""
    try:
        config = load_config(config_path)
    except AwbError as error:
        fail(error, json_output)
    if inventory_missing(config, config_path):  # nothing to embed, and no inventory made for it
        if json_output:
            print_json({"reindexed": 0, "seconds": 0.0, "missing": 0})
        return
    if config.search.mode != "hybrid":  # `auto` and `text` too: reindexing asks for the model
        config = config.model_copy(update={"search": config.search.model_copy(update={"mode": "hybrid"})})
    workbench = Workbench(config)
    try:
        engine = workbench.search_engine
        before = engine.status()
        if before.mode != "hybrid":
            fail(Unavailable(f"nothing to reindex: search is text-only ({before.reason})"), json_output)
        started = time.perf_counter()
        if json_output:
            written = engine.reindex()
        else:
            stale = {m: n for m, n in before.vectors_by_model.items() if m != before.model_id}
            if stale:
                say(f"model changed: vectors from {', '.join(stale)} are replaced by {before.model_id}")
            columns = (TextColumn("embedding tools"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            # On stderr, and only on a terminal: a bar has nothing to say to a file or a pipe, and rich
            # would leave an empty line on stdout there.
            console = progress_console()
            with Progress(*columns, transient=True, console=console, disable=not console.is_terminal) as progress:
                task = progress.add_task("reindex", total=None)
                written = engine.reindex(lambda done, total: progress.update(task, completed=done, total=total))
        after = engine.status()
    except EmbedderUnavailable as error:
        fail(Unavailable(str(error)), json_output)
    finally:
        workbench.store.close()
    seconds = time.perf_counter() - started
    report = {
        "reindexed": written,
        "seconds": round(seconds, 2),
        "model_id": after.model_id,
        "model_load_seconds": after.to_dict()["load_seconds"],
        "previous_vectors_by_model": before.vectors_by_model,
        "missing": after.missing,
    }
    if json_output:
        print_json(report)
    else:
        say(f"reindexed {written} tool{'' if written == 1 else 's'} with {after.model_id} in {seconds:.1f} s")
