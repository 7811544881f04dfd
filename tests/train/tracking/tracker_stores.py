"""What a run left in each tracker's local store, read back with the tracker's own code: W&B's
protobuf records, MLflow's client, trackio's storage API."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

BLOCK = 32 * 1024   # the .wandb file is a LevelDB-style log: 32 KiB blocks of framed chunks
FULL, LAST = 1, 4


def wandb_records(run_dir: Path) -> list:
    """The records of the run's one offline .wandb file, decoded by wandb's own protobuf. wandb
    0.31 ships no Python reader of the file (its Go core reads it), so the framing is undone
    here: a 7-byte file header, then chunks of crc32 (4), length (2), type (1) and data."""
    from wandb.proto.wandb_internal_pb2 import Record

    (path,) = Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")
    data, pos, part, records = path.read_bytes(), 7, b"", []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if n == 0 and kind == 0:   # a block's zero padding
            pos += left
            continue
        part += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (FULL, LAST):
            records.append(Record.FromString(part))
            part = b""
    return records


def _items(updates) -> dict:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in updates}


def wandb_run(run_dir: Path) -> dict:
    """{"config": the run's config, "history": its logged rows, "summary": what was set on it}."""
    out = {"config": {}, "history": [], "summary": {}}
    for record in wandb_records(run_dir):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["config"] = _items(record.run.config.update)
        elif kind == "history":
            out["history"].append(_items(record.history.item))
        elif kind == "summary":
            out["summary"] |= _items(record.summary.update)
    return out


def mlflow_run(uri: str, experiment: str = "posttrain"):
    """The one run of the experiment, and the client that reads its metric histories."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return client, run


def mlflow_series(client, run, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]


def trackio_run(store: Path, run: str, project: str = "posttrain") -> dict:
    """{"logs": every row, "config": the run's config}: trackio's storage reads TRACKIO_DIR when
    imported, so another Python reads it."""
    code = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage as S; "
            "p, r = sys.argv[1:]; print(json.dumps({'logs': S.get_logs(p, r), 'config': S.get_run_config(p, r)}))")
    out = subprocess.run([sys.executable, "-c", code, project, run], capture_output=True, text=True, check=True,
                         env=os.environ | {"TRACKIO_DIR": str(store)}, timeout=120)
    return json.loads(out.stdout.splitlines()[-1])
