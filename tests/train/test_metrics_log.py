"""The metrics sinks: every scalar of a step lands in metrics.jsonl and in TensorBoard."""

import json
import struct

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from posttrain.train.metrics import MetricsLog


def test_every_scalar_reaches_jsonl_and_tensorboard(tmp_path):
    log = MetricsLog(tmp_path)
    for step in range(3):
        log.log("rl", step, {"loss": 0.5 - step / 10, "grad_norm": float(step), "tokens": 7, "note": "x"})
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[2]["note"] == "x"
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["rl/grad_norm", "rl/loss", "rl/tokens"]
    loss = events.Scalars("rl/loss")
    assert [e.step for e in loss] == [0, 1, 2]
    assert [round(e.value, 6) for e in loss] == [0.5, 0.4, 0.3]


def test_the_event_records_carry_tensorboards_checksums():
    """The C CRC32C frames records as TensorBoard's reader checks them."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from posttrain.train.metrics import _masked_crc

    for data in (b"", b"brain.Event:2", bytes(range(256)) * 9):
        assert _masked_crc(data) == struct.pack("<I", masked_crc32c(data))
