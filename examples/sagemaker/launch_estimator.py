#!/usr/bin/env python3
"""Launch a SageMaker training job whose hosts each run ``entry.py`` (neuron-watch torchrun).

    pip install sagemaker
    python launch_estimator.py --role <execution-role-arn> --bucket <bucket> [--instances 2]

No ``distribution=``: SageMaker's plain runner starts ``entry.py`` once per host, and entry.py builds
torchrun's arguments itself (see its docstring). ``requirements.txt`` in ``source_dir`` installs
neuron-watch in the container. Checkpoints go to ``/opt/ml/checkpoints``, synced with
``checkpoint_s3_uri``, so a new job with the same URI resumes.
"""

from __future__ import annotations

import argparse
import secrets


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", required=True, help="SageMaker execution role ARN")
    p.add_argument("--bucket", required=True, help="S3 bucket for checkpoints, compile cache and output")
    p.add_argument("--instances", type=int, default=2)
    p.add_argument("--instance-type", default="ml.trn1.32xlarge")
    p.add_argument("--image-uri", default=None, help="a pytorch-training-neuronx image (default: the SDK's choice)")
    p.add_argument("--steps", type=int, default=100)
    a = p.parse_args()

    from sagemaker.pytorch import PyTorch  # imported here: only this script needs the SDK

    estimator = PyTorch(
        entry_point="entry.py",
        source_dir=".",  # entry.py, train.py (your model) and requirements.txt (neuron-watch)
        role=a.role,
        instance_type=a.instance_type,
        instance_count=a.instances,
        image_uri=a.image_uri,
        framework_version=None if a.image_uri else "2.1",
        py_version=None if a.image_uri else "py310",
        hyperparameters={"steps": a.steps},
        checkpoint_s3_uri=f"s3://{a.bucket}/neuron-watch/checkpoints",
        checkpoint_local_path="/opt/ml/checkpoints",
        environment={
            "FI_EFA_FORK_SAFE": "1",
            "NEURON_COMPILE_CACHE_URL": f"s3://{a.bucket}/neuron-compile-cache",
            # neuron-watch uploads incident bundles here as soon as they are captured
            "NEURON_WATCH_ARTIFACTS": f"s3://{a.bucket}/neuron-watch/incidents",
            # the job's secret: every host's neuron-watch links to the coordinator on algo-1 with it
            "NEURON_WATCH_SECRET": secrets.token_hex(32),
        },
        max_run=24 * 3600,
    )
    estimator.fit(wait=False)
    print(f"started {estimator.latest_training_job.name}")


if __name__ == "__main__":
    main()
