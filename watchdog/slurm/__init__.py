"""Slurm: srun's command line, scontrol text, draining, prolog/epilog health checks, HyperPod."""
