"""Figures, no pass/fail: upload throughput to rclone serve s3 and moto, and capture time.

    .venv/bin/python -m tests.benchmarks.bench_upload
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuron_watch.node.evidence import IncidentContext, capture_node_bundle
from neuron_watch.outputs.storage import S3Storage, upload_tree
from tests.fixtures.s3 import RcloneServer, stop_group


def bench_upload(name: str, url: str, key: str, secret: str, src: Path) -> None:
    os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_EC2_METADATA_DISABLED="true")
    store = S3Storage("bench", "p", endpoint_url=url, region="us-east-1")
    store._s3.create_bucket(Bucket="bench")
    t0 = time.perf_counter()
    tree = upload_tree(store, src, "first", deadline_s=600)
    dt = time.perf_counter() - t0
    mib = tree.summary()["bytes"] / 2**20
    t1 = time.perf_counter()
    again = upload_tree(store, src, "first", deadline_s=600)
    dt2 = time.perf_counter() - t1
    print(f"{name}: {tree.summary()['files']} files {mib:.0f} MiB in {dt:.2f}s = {mib / dt:.0f} MiB/s "
          f"(ok={tree.ok}); resume pass (all skipped={again.summary()['skipped']}) {dt2:.2f}s")


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "bundle"
        src.mkdir()
        (src / "core.bin").write_bytes(os.urandom(64 * 2**20))
        for i in range(50):
            (src / f"small-{i}.txt").write_bytes(os.urandom(4096))
        srv = RcloneServer(str(Path(sys.executable).parent / "rclone"), Path(d) / "rc" / "data")
        srv.start()
        try:
            bench_upload("rclone serve s3", srv.endpoint.url, srv.ACCESS_KEY, srv.SECRET_KEY, src)
        finally:
            srv.stop()
        from moto.server import ThreadedMotoServer

        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        try:
            bench_upload("moto server", f"http://{host}:{port}", "testing", "testing", src)
        finally:
            moto.stop()
        ranks = [subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"],
                                  start_new_session=True) for _ in range(4)]
        try:
            time.sleep(0.5)  # let the interpreters start so py-spy sees Python frames
            os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
            ctx = IncidentContext(job_id="b", generation=0, incident=1, node="n", run_dir=Path(d) / "run",
                                  rank_pids={i: p.pid for i, p in enumerate(ranks)}, deadline_s=60)
            t0 = time.perf_counter()
            res = capture_node_bundle(ctx)
            print(f"capture_node_bundle with 4 live ranks (py-spy): {time.perf_counter() - t0:.2f}s, "
                  f"{len(res.manifest['files'])} files, stacks missing: "
                  f"{[m for m in res.missing if m['item'].startswith('stacks')]}")
        finally:
            for p in ranks:
                stop_group(p)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
